"""Systems-on-chip at the reference's path ``zeus.device.soc``.

zeus_cpp measures NVIDIA Jetson boards (their INA3221 power rails; docs/devices.md, "Jetson"):
:func:`get_soc` returns a :class:`~zeus_cpp.device.soc.jetson.Jetson` where the board has
readable rails, and raises :class:`~zeus_cpp.exception.ZeusSoCInitError` with the reason
elsewhere. Apple silicon is out of scope (docs/python.md). :class:`EmptySoC` is what
:attr:`zeus_cpp.monitor.ZeusMonitor.soc` holds without a SoC (``soc_is_present`` False).
"""

from __future__ import annotations

import threading
from typing import Optional

from zeus_cpp.device.soc.common import EmptySoC, SoC, SoCMeasurement
from zeus_cpp.device.soc.jetson import Jetson, JetsonMeasurement, ZeusJetsonInitError
from zeus_cpp.exception import ZeusSoCInitError

_soc: Optional[SoC] = None
_soc_lock = threading.Lock()


def get_soc() -> SoC:
    """The process's SoC (one instance, opened at the first call): a Jetson, or
    :class:`ZeusSoCInitError` saying why there is none."""
    global _soc
    with _soc_lock:
        if _soc is None:
            _soc = Jetson()  # ZeusJetsonInitError (a ZeusSoCInitError) without rails
        return _soc


__all__ = ["SoC", "SoCMeasurement", "EmptySoC", "Jetson", "JetsonMeasurement", "get_soc",
           "ZeusSoCInitError", "ZeusJetsonInitError"]
