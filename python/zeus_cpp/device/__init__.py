"""The device layer: GPUs (NVML, AMD SMI, simulated) and CPU packages (RAPL)."""

from __future__ import annotations

from zeus_cpp import _zeus
from zeus_cpp.device.cpu import CPUs, CpuDramMeasurement, get_cpus
from zeus_cpp.device.gpu import GPU, GPUs, get_gpus
from zeus_cpp.device.soc import get_soc


def has_sys_admin() -> bool:
    """Whether this process has CAP_SYS_ADMIN (needed to change GPU settings)."""
    return _zeus.has_sys_admin()


__all__ = ["get_gpus", "GPUs", "GPU", "get_cpus", "CPUs", "CpuDramMeasurement", "get_soc",
           "has_sys_admin"]
