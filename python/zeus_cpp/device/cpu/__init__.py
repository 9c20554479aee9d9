"""CPU packages (Linux RAPL): :func:`get_cpus`, :class:`CPUs`, :class:`CpuDramMeasurement`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from zeus_cpp import _zeus
from zeus_cpp.device._vendor import vendor_class
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


class CPU:
    """One CPU package (an element of :attr:`CPUs.cpus`, as in the reference)."""

    def __init__(self, cpus: "CPUs", index: int) -> None:
        self._cpus = cpus
        #: The package index (RAPL zone ``intel-rapl:N`` is index N).
        self.index = index

    def get_total_energy_consumption(self) -> CpuDramMeasurement:
        """Cumulative energy of this package and its DRAM (mJ)."""
        return self._cpus.get_total_energy_consumption(self.index)

    def supports_get_dram_energy_consumption(self) -> bool:
        return self._cpus.supports_get_dram_energy_consumption(self.index)

    def __repr__(self) -> str:
        return f"CPU(index={self.index})"


class CPUs:
    """The CPU packages, by package index (RAPL zone ``intel-rapl:N`` is index N)."""

    def __init__(self, native: "_zeus.CPUs") -> None:
        self._native = native

    @property
    def cpus(self) -> list:
        """One :class:`CPU` per package, in index order (the reference's ``CPUs.cpus``)."""
        return [CPU(self, index) for index in self.indices]

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


class _NoCPUs:
    # The native CPUs' interface with no package, behind empty_cpus().
    indices: list = []

    def __len__(self) -> int:
        return 0

    def get_total_energy_consumption(self, index: int):  # noqa: ANN201
        raise ValueError("No CPUs available.")

    def supports_get_dram_energy_consumption(self, index: int) -> bool:
        raise ValueError("No CPUs available.")


def empty_cpus() -> CPUs:
    """A CPUs with no package (the reference's ``EmptyCPUs``: where RAPL cannot be read)."""
    return CPUs(_NoCPUs())  # type: ignore[arg-type]


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


#: The reference's CPUs of a machine without readable RAPL: ``isinstance(cpus, EmptyCPUs)`` holds
#: for a CPUs with no package (ZeusMonitor(...).cpus there); ``EmptyCPUs()`` is empty_cpus().
EmptyCPUs = vendor_class(
    "EmptyCPUs",
    "No CPU package: ``isinstance(cpus, EmptyCPUs)`` holds for a CPUs with none.",
    lambda value: isinstance(value, CPUs) and len(value) == 0,
    empty_cpus,
    "zeus_cpp.device.cpu.common",
)

from zeus_cpp.device.cpu.rapl import (  # noqa: E402  (the reference's)
    RAPLCPU,
    RAPLCPUs,
    ZeusdRAPLCPU,
    get_current_rapl_zone_id,
)

__all__ = ["get_cpus", "empty_cpus", "CPU", "CPUs", "CpuDramMeasurement", "EmptyCPUs",
           "RAPLCPUs", "RAPLCPU", "ZeusdRAPLCPU", "get_current_rapl_zone_id"] + sorted(
    name for name in dir() if name.startswith("Zeus") and name.endswith("Error")
)
