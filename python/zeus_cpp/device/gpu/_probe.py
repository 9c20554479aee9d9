"""Which GPU library get_gpus() uses, for the reference's ``*_is_available`` probes."""

from __future__ import annotations


def gpu_backend() -> str:
    """The backend of get_gpus() ("nvml", "amdsmi", "simulated"), or "" when none."""
    from zeus_cpp.device.gpu import get_gpus

    try:
        gpus = get_gpus()
    except Exception:  # noqa: BLE001  (a failing discovery means "not available")
        return ""
    return gpus.backend if len(gpus) > 0 else ""
