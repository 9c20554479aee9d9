"""NVIDIA GPUs (NVML) at the reference's path ``zeus.device.gpu.nvidia``.

zeus_cpp talks to NVML from C++ (loading ``libnvidia-ml.so.1`` at run time): there is one GPUs
class for every backend, and :class:`NVIDIAGPUs` is a check on it (``isinstance(gpus,
NVIDIAGPUs)`` holds for GPUs driven by NVML; zeus_cpp.device._vendor).
"""

from __future__ import annotations

from zeus_cpp.device._vendor import vendor_class
from zeus_cpp.device.gpu._probe import gpu_backend, gpus_of_backend, is_gpus_of_backend


def nvml_is_available() -> bool:
    """Whether this process's GPUs are NVIDIA GPUs driven through NVML (False for simulated
    GPUs and when no GPU library initialises)."""
    return gpu_backend() == "nvml"


NVIDIAGPUs = vendor_class(
    "NVIDIAGPUs",
    "NVIDIA GPUs through NVML: ``isinstance(gpus, NVIDIAGPUs)``; ``NVIDIAGPUs()`` is get_gpus() "
    "where NVML drives the GPUs (else ZeusGPUInitError).",
    lambda value: is_gpus_of_backend(value, "nvml"),
    lambda ensure_homogeneous=False: gpus_of_backend("nvml", "NVML", ensure_homogeneous),
    __name__,
)

__all__ = ["nvml_is_available", "NVIDIAGPUs"]
