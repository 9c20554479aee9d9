"""ZeusMonitor: time and energy of named code windows on GPUs, CPU packages and DRAM."""

from __future__ import annotations

import dataclasses
import os
from types import TracebackType
from typing import Any, Dict, Optional, Sequence, Type, Union

from zeus_cpp import _zeus
from zeus_cpp.monitor import _checks
from zeus_cpp.utils._sync import SyncWith, lazy_sync_hook

#: What a window measured: ``time`` (s), ``gpu_energy`` ({GPU index: J}), ``cpu_energy`` and
#: ``dram_energy`` ({package index: J}, or None without CPU/DRAM data), ``soc_energy`` (a Jetson's
#: :class:`~zeus_cpp.device.soc.jetson.JetsonMeasurement` in mJ, None without a SoC) and
#: ``total_energy`` (the GPU energy's sum, J). A native class; its dicts are built on first read.
Measurement = _zeus.Measurement


@dataclasses.dataclass
class _MeasurementFields:
    # Only a source of dataclasses.Field objects for the native Measurement (below).
    time: float
    gpu_energy: Dict[int, float]
    cpu_energy: Optional[Dict[int, float]] = None
    dram_energy: Optional[Dict[int, float]] = None
    soc_energy: Optional[Any] = None


# The reference's Measurement is a dataclass. Ours stays a native type (a window's end must not
# build Python dicts it may never need), but it carries the dataclass metadata, so that
# dataclasses.is_dataclass, fields, replace and asdict work on it: replace calls the native
# constructor with the same keywords, and asdict reads the fields as attributes.
Measurement.__dataclass_fields__ = _MeasurementFields.__dataclass_fields__  # type: ignore[attr-defined]
Measurement.__dataclass_params__ = _MeasurementFields.__dataclass_params__  # type: ignore[attr-defined]
Measurement.__match_args__ = ("time", "gpu_energy", "cpu_energy", "dram_energy", "soc_energy")  # type: ignore[attr-defined]


class ZeusMonitor(_zeus.ZeusMonitor):
    """Measures the time and energy of named windows of code.

    Windows are opened with :meth:`begin_window` and closed with :meth:`end_window`, which
    returns a :class:`Measurement`. Any number of windows may be open at once, nested or
    overlapping, as long as their names differ.

    Args:
        gpu_indices: GPUs to measure, as the process indexes them (after
            ``CUDA_VISIBLE_DEVICES``). None: every visible GPU; ``[]``: none.
        cpu_indices: CPU packages (RAPL) to measure. None: every readable package (none, silently,
            when RAPL cannot be read); ``[]``: none. Asking for packages that cannot be read
            raises :class:`~zeus_cpp.exception.ZeusCPUNoPermissionError` (or another
            ``ZeusBaseCPUError``).
        approx_instant_energy: When a GPU's window energy is exactly 0 (its counter did not tick
            during a very short window), use instant power x time instead.
        log_file: When given, one CSV row per completed window
            (``start_time,window_name,elapsed_time,gpu<i>_energy,...``); parent folders are made.
        sync_execution_with: How to wait for queued GPU work before reading the counters:
            ``"torch"`` (``torch.cuda.synchronize`` on each monitored GPU), ``"jax"``, ``"cupy"``,
            or a callable taking the list of monitored GPU indices. A framework that is not
            installed makes every synchronising window call on monitored GPUs raise
            ``RuntimeError("No framework is available. ...")``, as the reference does (pass
            ``sync_execution=False`` or a callable); one that sees no GPU means no
            synchronisation (and no cost).

    The monitor is also a context manager (``with ZeusMonitor() as monitor:``), which drops the
    windows still open at exit, and :meth:`window` measures a ``with`` block.
    """

    def __init__(
        self,
        gpu_indices: Optional[Sequence[int]] = None,
        cpu_indices: Optional[Sequence[int]] = None,
        approx_instant_energy: bool = False,
        log_file: Optional[Union[str, os.PathLike]] = None,
        sync_execution_with: SyncWith = "torch",
    ) -> None:
        gpus = _checks.index_list("gpu_indices", gpu_indices)
        cpus = _checks.index_list("cpu_indices", cpu_indices)
        approx = _checks.boolean("approx_instant_energy", approx_instant_energy)
        log = _checks.optional_path("log_file", log_file)
        hook = lazy_sync_hook(sync_execution_with)
        super().__init__(gpus, cpus, approx, log, hook)
        self.sync_execution_with = sync_execution_with
        self.approx_instant_energy = approx
        self.log_file = log

    @property
    def sync_with(self) -> SyncWith:
        """The reference's name of ``sync_execution_with``."""
        return self.sync_execution_with

    @property
    def gpus(self):  # noqa: ANN201  (zeus_cpp.device.gpu.GPUs)
        """The process's GPUs (:func:`zeus_cpp.device.get_gpus`), as the reference keeps them."""
        from zeus_cpp.device import get_gpus

        return get_gpus()

    @property
    def cpus(self):  # noqa: ANN201  (zeus_cpp.device.cpu.CPUs)
        """The CPU packages (:func:`zeus_cpp.device.get_cpus`); an empty CPUs without RAPL."""
        from zeus_cpp.device.cpu import empty_cpus, get_cpus
        from zeus_cpp.exception import ZeusBaseCPUError

        try:
            return get_cpus()
        except ZeusBaseCPUError:
            return empty_cpus()

    @property
    def soc_is_present(self) -> bool:
        """Whether the windows measure a SoC (a Jetson's rails: ``Measurement.soc_energy``)."""
        return self._measures_soc

    @property
    def soc(self):  # noqa: ANN201  (zeus_cpp.device.soc.SoC)
        """The SoC (:func:`zeus_cpp.device.soc.get_soc`) when the windows measure one, else an
        :class:`~zeus_cpp.device.soc.EmptySoC`, as the reference. The windows read the rails
        through the monitor's own native sampler, not through this object."""
        from zeus_cpp.device.soc import EmptySoC, get_soc

        return get_soc() if self._measures_soc else EmptySoC()

    @property
    def power_monitor(self):  # noqa: ANN201  (Optional[zeus_cpp.monitor.power.PowerMonitor])
        """As the reference: None when every monitored GPU has an energy counter, else a
        :class:`~zeus_cpp.monitor.power.PowerMonitor` over those that have none (made at the
        first read, with an inferred period). The windows do not use it: they read those GPUs'
        power from the monitor's own native sampler.
        """
        if not hasattr(self, "_power_monitor"):
            from zeus_cpp.device import get_gpus
            from zeus_cpp.monitor.power import PowerMonitor

            gpus = get_gpus() if self.gpu_indices else None
            old = [i for i in self.gpu_indices
                   if not gpus.supports_get_total_energy_consumption(i)]  # type: ignore[union-attr]
            self._power_monitor = PowerMonitor(gpu_indices=old) if old else None
        return self._power_monitor

    @property
    def measurement_states(self) -> Dict[str, None]:
        """The open windows, as a dict keyed by window name (a fresh dict on each read).

        The reference maps each name to the readings taken at ``begin_window``; here those stay
        inside the C++ monitor, so the values are None: use it for ``key in`` and ``len``.
        """
        return dict.fromkeys(self.open_windows())

    # begin_window(key, sync_execution=True, restart=False) and
    # end_window(key, sync_execution=True, cancel=False) -> Measurement are the native methods
    # (no Python frame on the hot path); see zeus_cpp/_zeus.pyi for their documentation.

    def window(self, key: str, sync_execution: bool = True) -> "MeasuredWindow":
        """A context manager measuring its ``with`` block as window ``key``.

        ``with monitor.window("step") as w: ...`` then ``w.measurement``. If the block raises,
        the window is cancelled and the exception propagates.
        """
        return MeasuredWindow(self, key, sync_execution)

    def __enter__(self) -> "ZeusMonitor":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self.reset_windows()

    def __repr__(self) -> str:
        return (
            f"ZeusMonitor(gpu_indices={self.gpu_indices}, cpu_indices={self.cpu_indices}, "
            f"approx_instant_energy={self.approx_instant_energy}, log_file={self.log_file!r}, "
            f"sync_execution_with={self.sync_execution_with!r})"
        )


class MeasuredWindow:
    """One window as a context manager (see :meth:`ZeusMonitor.window`)."""

    def __init__(self, monitor: ZeusMonitor, key: str, sync_execution: bool = True) -> None:
        if not isinstance(key, str):
            raise TypeError(f"key must be a str, not {type(key).__name__}")
        self.monitor = monitor
        self.key = key
        self.sync_execution = _checks.boolean("sync_execution", sync_execution)
        #: The window's measurement, set when the block ends without an exception.
        self.measurement: Optional[Measurement] = None

    def __enter__(self) -> "MeasuredWindow":
        self.monitor.begin_window(self.key, self.sync_execution)
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        if exc_type is not None:
            self.monitor.end_window(self.key, False, True)
            return
        self.measurement = self.monitor.end_window(self.key, self.sync_execution)


__all__ = ["ZeusMonitor", "Measurement", "MeasuredWindow"]
