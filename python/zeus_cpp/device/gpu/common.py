"""The GPU interface at the reference's path ``zeus.device.gpu.common``: :class:`GPU`,
:class:`GPUs` and the GPU exceptions (the same objects as :mod:`zeus_cpp.device.gpu`)."""

from __future__ import annotations

from zeus_cpp.device.gpu import *  # noqa: F401,F403
from zeus_cpp.device.gpu import __all__  # noqa: F401
