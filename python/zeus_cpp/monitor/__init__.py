"""Measurement: :class:`ZeusMonitor` (windows of code), :class:`PowerMonitor` (power timelines)
and :class:`TemperatureMonitor` (temperature timelines)."""

from __future__ import annotations

from zeus_cpp.monitor.energy import MeasuredWindow, Measurement, ZeusMonitor
from zeus_cpp.monitor.power import PowerDomain, PowerMonitor
from zeus_cpp.monitor.temperature import TemperatureMonitor

__all__ = [
    "ZeusMonitor",
    "Measurement",
    "MeasuredWindow",
    "PowerMonitor",
    "PowerDomain",
    "TemperatureMonitor",
]
