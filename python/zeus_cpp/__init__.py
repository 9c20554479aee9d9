"""zeus_cpp: GPU energy measurement and optimization, a C++ port of Zeus with Python bindings.

The module layout mirrors the reference's ``zeus`` package:

- :mod:`zeus_cpp.monitor`: :class:`~zeus_cpp.monitor.ZeusMonitor`,
  :class:`~zeus_cpp.monitor.Measurement`, :class:`~zeus_cpp.monitor.PowerMonitor`.
- :mod:`zeus_cpp.device`: :func:`~zeus_cpp.device.get_gpus`, :func:`~zeus_cpp.device.get_cpus`.
- :mod:`zeus_cpp.exception`: the exception classes.
- :mod:`zeus_cpp.optimizer`, :mod:`zeus_cpp.callback`: the optimizers and callbacks.

Simulated GPUs (no hardware needed) are selected with the environment variable
``ZEUS_SIMULATED_GPUS=<count>[:<model>]`` set before the first device access.
"""

from __future__ import annotations

from zeus_cpp import exception  # noqa: F401  (the native module imports it too)
from zeus_cpp import _zeus  # noqa: F401  (fails early, clearly, when the extension is missing)
from zeus_cpp import _logging

# The native log lines become records of Python's logging (docs/python.md, "Logging").
_logging.install()

__version__ = "0.1.0"

__all__ = ["__version__"]
