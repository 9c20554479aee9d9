"""The CPU interface at the reference's path ``zeus.device.cpu.common``: :class:`CPU`,
:class:`CPUs`, :class:`CpuDramMeasurement` and the CPU exceptions (the same objects as
:mod:`zeus_cpp.device.cpu`)."""

from __future__ import annotations

from zeus_cpp.device.cpu import *  # noqa: F401,F403
from zeus_cpp.device.cpu import __all__  # noqa: F401
