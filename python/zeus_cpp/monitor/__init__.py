"""Measurement: :class:`ZeusMonitor` (windows of code) and :class:`PowerMonitor` (power timelines)."""

from __future__ import annotations

from zeus_cpp.monitor.energy import MeasuredWindow, Measurement, ZeusMonitor
from zeus_cpp.monitor.power import PowerDomain, PowerMonitor

__all__ = ["ZeusMonitor", "Measurement", "MeasuredWindow", "PowerMonitor", "PowerDomain"]
