"""Shared device helpers at the reference's path ``zeus.device.common``."""

from __future__ import annotations

from zeus_cpp.device import has_sys_admin

__all__ = ["has_sys_admin"]
