"""Helpers for testing code that consumes measurements: :class:`ReplayZeusMonitor`."""

from __future__ import annotations

import os
from typing import Optional, Sequence, Union

from zeus_cpp import _zeus

__all__ = ["ReplayZeusMonitor"]


class ReplayZeusMonitor(_zeus._ReplayMonitor):
    """Plays back a CSV log written by ``ZeusMonitor(log_file=...)``, as the reference's
    ``zeus.utils.testing.ReplayZeusMonitor``.

    The GPU indices come from the header's ``gpu<i>_energy`` columns. ``begin_window`` only
    records the name; each ``end_window`` (not cancelled) returns the next row as a
    :class:`~zeus_cpp.monitor.Measurement` (``time`` = the row's elapsed_time, energies in J);
    ``cancel=True`` consumes no row. The power-limit optimizer and the batch-size client accept
    it like any monitor (it is a native ``WindowMonitor``), which is how recorded profiles are
    replayed in tests.

    Args:
        gpu_indices: None takes the log's GPUs. A list must name exactly the log's GPUs in the
            header's order (ValueError otherwise: unlike the reference, columns are never
            relabelled).
        approx_instant_energy: Accepted for the reference's signature; a replayed energy is
            never approximated.
        log_file: The log to replay (required). Missing: FileNotFoundError; malformed:
            ValueError naming the line.
        ignore_sync_execution: Accepted for the reference's signature; replaying synchronises
            nothing.
        match_window_name: Whether ``end_window``'s name must equal the row's window_name.

    Raises RuntimeError (as the reference) for a window opened twice, an unknown window, a row
    of another name (with ``match_window_name``), and an exhausted log.
    """

    def __init__(
        self,
        gpu_indices: Optional[Sequence[int]] = None,
        approx_instant_energy: bool = False,
        log_file: Optional[Union[str, os.PathLike]] = None,
        ignore_sync_execution: bool = False,
        match_window_name: bool = True,
    ) -> None:
        if log_file is None:
            raise ValueError("`log_file` cannot be `None`: ReplayZeusMonitor needs a log to replay")
        if not isinstance(match_window_name, bool):
            raise TypeError(
                f"match_window_name must be a bool, not {type(match_window_name).__name__}"
            )
        path = os.fspath(log_file)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        super().__init__(path, match_window_name)
        if gpu_indices is not None:
            wanted = [int(index) for index in gpu_indices]
            if wanted != list(self.gpu_indices):
                raise ValueError(
                    f"gpu_indices {wanted} do not match the GPUs of {path}'s columns "
                    f"{list(self.gpu_indices)}; pass None to take the log's"
                )
        self.log_file = path
        self.approx_instant_energy = bool(approx_instant_energy)
        self.ignore_sync_execution = bool(ignore_sync_execution)
        self.match_window_name = match_window_name

    def __repr__(self) -> str:
        return (
            f"ReplayZeusMonitor(log_file={self.log_file!r}, gpu_indices={list(self.gpu_indices)}, "
            f"rows_left={self.rows_left})"
        )
