"""NVIDIA GPUs (NVML) at the reference's path ``zeus.device.gpu.nvidia``.

zeus_cpp talks to NVML from C++ (loading ``libnvidia-ml.so.1`` at run time); there is no
per-vendor Python class, so this module only offers the reference's availability probe.
"""

from __future__ import annotations

from zeus_cpp.device.gpu._probe import gpu_backend


def nvml_is_available() -> bool:
    """Whether this process's GPUs are NVIDIA GPUs driven through NVML (False for simulated
    GPUs and when no GPU library initialises)."""
    return gpu_backend() == "nvml"


__all__ = ["nvml_is_available"]
