"""The SoC interface at the reference's path ``zeus.device.soc.common`` (the same objects as
:mod:`zeus_cpp.device.soc`)."""

from __future__ import annotations

from zeus_cpp.device.soc import *  # noqa: F401,F403
from zeus_cpp.device.soc import __all__  # noqa: F401
