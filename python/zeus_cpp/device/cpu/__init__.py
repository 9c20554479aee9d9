"""CPU packages (Linux RAPL): :func:`get_cpus`, :class:`CPUs`, :class:`CpuDramMeasurement`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from zeus_cpp import _zeus
from zeus_cpp.exception import (  # noqa: F401  (re-exported, as zeus.device.cpu)
    ZeusBaseCPUError,
    ZeusCPUInitError,
    ZeusCPUNoPermissionError,
    ZeusCPUNotFoundError,
    ZeusRAPLFileInitError,
    ZeusRAPLNotSupportedError,
    ZeusRAPLPermissionError,
)


@dataclass
class CpuDramMeasurement:
    """Cumulative package and DRAM energy (mJ); ``dram_mj`` is None without a DRAM zone."""

    cpu_mj: float
    dram_mj: Optional[float] = None

    def __sub__(self, other: "CpuDramMeasurement") -> "CpuDramMeasurement":
        dram = None
        if self.dram_mj is not None and other.dram_mj is not None:
            dram = self.dram_mj - other.dram_mj
        return CpuDramMeasurement(self.cpu_mj - other.cpu_mj, dram)

    def __truediv__(self, divisor: Union[int, float]) -> "CpuDramMeasurement":
        if not isinstance(divisor, (int, float)) or isinstance(divisor, bool):
            return NotImplemented
        dram = None if self.dram_mj is None else self.dram_mj / divisor
        return CpuDramMeasurement(self.cpu_mj / divisor, dram)


class CPUs:
    """The CPU packages, by package index (RAPL zone ``intel-rapl:N`` is index N)."""

    def __init__(self, native: "_zeus.CPUs") -> None:
        self._native = native

    @property
    def indices(self) -> list:
        return list(self._native.indices)

    def get_total_energy_consumption(self, index: int) -> CpuDramMeasurement:
        """Cumulative energy of package ``index`` and its DRAM (mJ)."""
        cpu_mj, dram_mj = self._native.get_total_energy_consumption(index)
        return CpuDramMeasurement(cpu_mj, dram_mj)

    def supports_get_dram_energy_consumption(self, index: int) -> bool:
        return self._native.supports_get_dram_energy_consumption(index)

    def __len__(self) -> int:
        return len(self._native)


_cpus: Optional[CPUs] = None


def get_cpus() -> CPUs:
    """The CPU packages of this machine (one object per process).

    Raises :class:`ZeusCPUNoPermissionError` when the RAPL files exist but cannot be read, and
    :class:`ZeusCPUInitError` when there is no RAPL.
    """
    global _cpus
    if _cpus is None:
        _cpus = CPUs(_zeus.get_cpus())
    return _cpus


__all__ = ["get_cpus", "CPUs", "CpuDramMeasurement"] + sorted(
    name for name in dir() if name.startswith("Zeus") and name.endswith("Error")
)
