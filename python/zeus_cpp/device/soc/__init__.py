"""Systems-on-chip at the reference's path ``zeus.device.soc``.

zeus_cpp measures no SoC (Apple Silicon, Jetson): :func:`get_soc` always raises
:class:`~zeus_cpp.exception.ZeusSoCInitError`, and :class:`EmptySoC` is what
:attr:`zeus_cpp.monitor.ZeusMonitor.soc` holds (``soc_is_present`` is False), as in the reference
on a machine without one.
"""

from __future__ import annotations

from zeus_cpp.exception import ZeusSoCInitError


class SoC:
    """The reference's SoC interface (no implementation here: see :class:`EmptySoC`)."""

    def get_available_metrics(self) -> set:
        raise NotImplementedError

    def get_total_energy_consumption(self):  # noqa: ANN201
        raise NotImplementedError

    def begin_window(self, key: str, restart: bool = False) -> None:
        raise NotImplementedError

    def end_window(self, key: str):  # noqa: ANN201
        raise NotImplementedError


class EmptySoC(SoC):
    """No SoC: no metric; reading or windowing raises ``ValueError("No SoC is available.")``."""

    def get_available_metrics(self) -> set:
        return set()

    def get_total_energy_consumption(self):  # noqa: ANN201
        raise ValueError("No SoC is available.")

    def begin_window(self, key: str, restart: bool = False) -> None:
        raise ValueError("No SoC is available.")

    def end_window(self, key: str):  # noqa: ANN201
        raise ValueError("No SoC is available.")

    def __repr__(self) -> str:
        return "EmptySoC()"


def get_soc() -> SoC:
    """zeus_cpp measures no system-on-chip: always raises :class:`ZeusSoCInitError`."""
    raise ZeusSoCInitError("zeus_cpp has no SoC (Apple Silicon, Jetson) support")


__all__ = ["SoC", "EmptySoC", "get_soc", "ZeusSoCInitError"]
