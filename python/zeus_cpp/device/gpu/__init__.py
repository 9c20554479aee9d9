"""GPUs: :func:`get_gpus` and the :class:`GPUs` / :class:`GPU` classes.

Method names and units follow the reference (power mW, energy mJ, clocks MHz). The old camelCase
names (``getName``, ``setPowerManagementLimit``, ...) still work and warn once
(DeprecationWarning), as in the reference.
"""

from __future__ import annotations

import re
import warnings
from typing import Callable, Set

from zeus_cpp import _zeus
from zeus_cpp.device._vendor import vendor_class
from zeus_cpp.exception import (  # noqa: F401  (re-exported, as zeus.device.gpu.common)
    ZeusBaseGPUError,
    ZeusGPUAlreadyInitializedError,
    ZeusGPUCorruptedInfoROMError,
    ZeusGPUDriverNotLoadedError,
    ZeusGPUFunctionNotFoundError,
    ZeusGPUHeterogeneousError,
    ZeusGPUInitError,
    ZeusGPUInsufficientPowerError,
    ZeusGPUInsufficientSizeError,
    ZeusGPUInvalidArgError,
    ZeusGPUIRQError,
    ZeusGPULibraryNotFoundError,
    ZeusGPULibRMVersionMismatchError,
    ZeusGPULostError,
    ZeusGPUMemoryError,
    ZeusGPUNoPermissionError,
    ZeusGPUNotFoundError,
    ZeusGPUNotSupportedError,
    ZeusGPUOperatingSystemError,
    ZeusGPUResetRequiredError,
    ZeusGPUTimeoutError,
    ZeusGPUUnknownError,
)

GPUs = _zeus.GPUs
GPU = _zeus.GPU

_warned: Set[str] = set()


def _camel_case(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _deprecated_alias(old: str, new: str) -> Callable[..., object]:
    def alias(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if old not in _warned:
            _warned.add(old)
            warnings.warn(
                f"{old} is deprecated; use {new}", DeprecationWarning, stacklevel=2
            )
        return getattr(self, new)(*args, **kwargs)

    alias.__name__ = old
    alias.__doc__ = f"Deprecated alias of :meth:`{new}`."
    return alias


def _add_aliases() -> None:
    for cls in (GPUs, GPU):
        for name in list(vars(cls)):
            if re.fullmatch(r"(get|set|reset|supports)_[a-z_]+", name):
                old = _camel_case(name)
                if not hasattr(cls, old):
                    setattr(cls, old, _deprecated_alias(old, name))


_add_aliases()


def get_gpus(ensure_homogeneous: bool = False) -> GPUs:
    """The GPUs of this process (one object per process).

    Simulated GPUs when ``ZEUS_SIMULATED_GPUS`` is set (``<count>[:<model>]``), else NVML, else
    AMD SMI, else none (an empty GPUs, whose methods raise ``ValueError("No GPUs available.")``).
    ``ensure_homogeneous=True`` raises :class:`ZeusGPUHeterogeneousError` when the models differ.
    """
    if not isinstance(ensure_homogeneous, bool):
        raise TypeError(
            f"ensure_homogeneous must be a bool, not {type(ensure_homogeneous).__name__}"
        )
    return _zeus.get_gpus(ensure_homogeneous)


def _empty_gpus(ensure_homogeneous: bool = False) -> GPUs:
    gpus = get_gpus(ensure_homogeneous)
    if len(gpus) != 0:
        raise TypeError(
            f"EmptyGPUs() stands for a process without GPUs, and this one has {len(gpus)}; use "
            "isinstance(gpus, EmptyGPUs) to ask"
        )
    return gpus


#: The reference's GPUs of a process without GPUs: ``isinstance(get_gpus(), EmptyGPUs)`` holds
#: when there is none (its methods raise ``ValueError("No GPUs available.")``).
EmptyGPUs = vendor_class(
    "EmptyGPUs",
    "No GPU: ``isinstance(gpus, EmptyGPUs)`` holds for a GPUs with none.",
    lambda value: isinstance(value, GPUs) and len(value) == 0,
    _empty_gpus,
    "zeus_cpp.device.gpu.common",
)

# The reference's availability probes and vendor classes, at its paths too
# (zeus.device.gpu.nvml_is_available, zeus.device.gpu.nvidia.NVIDIAGPUs).
from zeus_cpp.device.gpu.amd import AMDGPUs, amdsmi_is_available  # noqa: E402
from zeus_cpp.device.gpu.nvidia import NVIDIAGPUs, nvml_is_available  # noqa: E402

__all__ = ["get_gpus", "GPUs", "GPU", "nvml_is_available", "amdsmi_is_available", "EmptyGPUs",
           "NVIDIAGPUs", "AMDGPUs"] + sorted(
    name for name in dir() if name.startswith("Zeus") and name.endswith("Error")
)
