"""AMD GPUs (AMD SMI) at the reference's path ``zeus.device.gpu.amd``.

zeus_cpp talks to AMD SMI from C++; this module only offers the reference's availability probe.
"""

from __future__ import annotations

from zeus_cpp.device.gpu._probe import gpu_backend


def amdsmi_is_available() -> bool:
    """Whether this process's GPUs are AMD GPUs driven through AMD SMI (False for simulated GPUs
    and when no GPU library initialises)."""
    return gpu_backend() == "amdsmi"


__all__ = ["amdsmi_is_available"]
