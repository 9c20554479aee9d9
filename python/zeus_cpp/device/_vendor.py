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

import inspect
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
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        # Never called (calling the class goes to `instance`): it shows the reference's
        # constructor parameters, which are `instance`'s, to inspect.signature.
        pass

    parameters = list(inspect.signature(instance).parameters.values())
    self_parameter = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    __init__.__signature__ = inspect.Signature([self_parameter, *parameters])  # type: ignore[attr-defined]
    return VendorClass(name, (), {"__doc__": doc, "__module__": module, "__init__": __init__,
                                  "_matches": staticmethod(matches),
                                  "_instance": staticmethod(instance)})


__all__ = ["VendorClass", "vendor_class"]
