"""The SoC interface at the reference's path ``zeus.device.soc.common``: :class:`SoC`,
:class:`SoCMeasurement`, and :class:`EmptySoC` (what a monitor without a SoC holds)."""

from __future__ import annotations

import abc
from typing import Dict, Optional

from zeus_cpp.exception import ZeusSoCInitError


class SoCMeasurement(abc.ABC):
    """Some measurement of a SoC: subtracting two gives the difference of every field."""

    @abc.abstractmethod
    def __sub__(self, other: "SoCMeasurement") -> "SoCMeasurement":
        raise NotImplementedError

    @abc.abstractmethod
    def zero_all_fields(self) -> None:
        """Sets every field that is not None to zero."""
        raise NotImplementedError

    def zeroAllFields(self) -> None:  # noqa: N802  (the reference's spelling)
        """The same as :meth:`zero_all_fields`."""
        self.zero_all_fields()


class SoC(abc.ABC):
    """A system-on-chip whose energy can be read: cumulative, and over named windows."""

    def __init__(self) -> None:
        self._windows: Dict[str, SoCMeasurement] = {}

    @abc.abstractmethod
    def get_available_metrics(self) -> set:
        """The names of the measurement's fields this SoC fills."""
        raise NotImplementedError

    @abc.abstractmethod
    def get_total_energy_consumption(self) -> SoCMeasurement:
        """The energy since the SoC was opened."""
        raise NotImplementedError

    def is_present(self) -> bool:
        """Whether there is a SoC to measure."""
        return True

    def begin_window(self, key: str, restart: bool = False) -> None:
        """Starts the window ``key`` (ValueError when it is open, unless ``restart``)."""
        if key in self._windows and not restart:
            raise ValueError(f"Measurement window '{key}' already exists")
        self._windows[key] = self.get_total_energy_consumption()

    def end_window(self, key: str) -> SoCMeasurement:
        """Ends the window ``key`` and returns what was measured in it."""
        try:
            start = self._windows.pop(key)
        except KeyError:
            raise ValueError(f"Measurement window '{key}' does not exist") from None
        return self.get_total_energy_consumption() - start


class EmptySoC(SoC):
    """No SoC: no metric; reading or windowing raises ``ValueError("No SoC is available.")``."""

    def get_available_metrics(self) -> set:
        return set()

    def is_present(self) -> bool:
        return False

    def get_total_energy_consumption(self):  # noqa: ANN201
        raise ValueError("No SoC is available.")

    def begin_window(self, key: str, restart: bool = False) -> None:
        raise ValueError("No SoC is available.")

    def end_window(self, key: str):  # noqa: ANN201
        raise ValueError("No SoC is available.")

    def __repr__(self) -> str:
        return "EmptySoC()"


def _optional_difference(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return None if a is None or b is None else a - b


__all__ = ["SoC", "SoCMeasurement", "EmptySoC", "ZeusSoCInitError"]
