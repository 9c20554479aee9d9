"""The device exceptions (re-exported from :mod:`zeus_cpp.exception`, as ``zeus.device.exception``)."""

from __future__ import annotations

from zeus_cpp.exception import *  # noqa: F401,F403
from zeus_cpp.exception import __all__  # noqa: F401
