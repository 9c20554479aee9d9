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


def gpus_of_backend(backend: str, label: str, ensure_homogeneous: bool = False):  # noqa: ANN201
    """get_gpus() when its backend is ``backend``, else the reference's ZeusGPUInitError naming
    ``label`` (calling ``NVIDIAGPUs()`` where NVML drives no GPU)."""
    from zeus_cpp.device.gpu import get_gpus
    from zeus_cpp.exception import ZeusGPUInitError

    found = gpu_backend()
    if found != backend:
        raise ZeusGPUInitError(
            f"{label} is not available: this process's GPUs are "
            f"{found or 'none'} (zeus_cpp.device.get_gpus() picks the backend)"
        )
    return get_gpus(ensure_homogeneous)


def is_gpus_of_backend(value: object, backend: str) -> bool:
    """Whether ``value`` is a GPUs (zeus_cpp.device.gpu.GPUs) driven by ``backend``."""
    from zeus_cpp import _zeus

    return isinstance(value, _zeus.GPUs) and len(value) > 0 and value.backend == backend
