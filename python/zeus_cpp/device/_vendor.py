"""The reference's vendor classes (``NVIDIAGPUs``, ``AMDGPUs``, ``EmptyGPUs``, ``RAPLCPUs``,
``RAPLCPU``, ``ZeusdRAPLCPU``, ``EmptyCPUs``) for ``isinstance``.

zeus_cpp has one GPUs class and one CPUs class, whatever drives them (the C++ device layer picks
NVML, AMD SMI, simulated GPUs, local RAPL or zeusd). So that code written for the reference
(``isinstance(monitor.gpus, NVIDIAGPUs)``) still works, each vendor class here is a check on the
one object: ``isinstance(x, NVIDIAGPUs)`` holds when ``x`` is a GPUs driven by NVML. Calling a
vendor class gives the process's object when it is of that kind, and raises the reference's init
error otherwise (``NVIDIAGPUs()`` on a machine without NVML raises ZeusGPUInitError).
"""

from __future__ import annotations

from typing import Any, Callable


class VendorClass(type):
    """Metaclass of the vendor classes: ``isinstance`` asks the class's ``_matches``, and calling
    the class asks its ``_instance``."""

    _matches: Callable[[Any], bool]
    _instance: Callable[..., Any]

    def __instancecheck__(cls, instance: Any) -> bool:
        try:
            return bool(cls._matches(instance))
        except Exception:  # noqa: BLE001  (a failing probe means "not of this kind")
            return False

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return cls._instance(*args, **kwargs)


def vendor_class(name: str, doc: str, matches: Callable[[Any], bool],
                 instance: Callable[..., Any], module: str) -> VendorClass:
    """A vendor class named ``name`` in ``module`` (its reference path)."""
    cls = VendorClass(name, (), {"__doc__": doc, "__module__": module,
                                 "_matches": staticmethod(matches),
                                 "_instance": staticmethod(instance)})
    return cls


__all__ = ["VendorClass", "vendor_class"]
