"""AMD GPUs (AMD SMI) at the reference's path ``zeus.device.gpu.amd``.

zeus_cpp talks to AMD SMI from C++: :class:`AMDGPUs` is a check on the one GPUs class
(``isinstance(gpus, AMDGPUs)`` holds for GPUs driven by AMD SMI; zeus_cpp.device._vendor).
"""

from __future__ import annotations

from zeus_cpp.device._vendor import vendor_class
from zeus_cpp.device.gpu._probe import gpu_backend, gpus_of_backend, is_gpus_of_backend


def amdsmi_is_available() -> bool:
    """Whether this process's GPUs are AMD GPUs driven through AMD SMI (False for simulated GPUs
    and when no GPU library initialises)."""
    return gpu_backend() == "amdsmi"


AMDGPUs = vendor_class(
    "AMDGPUs",
    "AMD GPUs through AMD SMI: ``isinstance(gpus, AMDGPUs)``; ``AMDGPUs()`` is get_gpus() where "
    "AMD SMI drives the GPUs (else ZeusGPUInitError).",
    lambda value: is_gpus_of_backend(value, "amdsmi"),
    lambda ensure_homogeneous=False: gpus_of_backend("amdsmi", "AMD SMI", ensure_homogeneous),
    __name__,
)

__all__ = ["amdsmi_is_available", "AMDGPUs"]
