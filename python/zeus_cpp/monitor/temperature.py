"""TemperatureMonitor: GPU temperature timelines, as the reference's ``zeus.monitor.temperature``.

The temperatures are read by the C++ power sampler's background thread (one thread, no spawned
process, so nothing re-imports your main module), and only changes are kept: a timeline is the
list of ``(time.time() seconds, degrees C)`` at which each GPU's reading changed.

    from zeus_cpp.monitor.temperature import TemperatureMonitor

    with TemperatureMonitor(update_period=0.5) as monitor:
        train()
        print(monitor.get_temperature())            # {0: 71, 1: 69}
        timeline = monitor.get_temperature_timeline(gpu_index=0)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from zeus_cpp import _zeus
from zeus_cpp.monitor import _checks
from zeus_cpp.monitor._sampled import SampledMonitor, TimelineResolution, max_samples

__all__ = ["TemperatureMonitor", "TemperatureSample", "TimelineResolution"]


@dataclass(frozen=True)
class TemperatureSample:
    """One temperature change: when (``time.time()`` seconds), which GPU, how hot (degrees C)."""

    timestamp: float
    gpu_index: int
    temperature_c: int


class TemperatureMonitor(SampledMonitor):
    """Samples the temperature of GPUs in the background.

    Args:
        gpu_indices: GPUs to monitor (None: every visible GPU; ``[]`` is a ValueError, as in the
            reference).
        update_period: Seconds between readings (default 1.0; at least 0.001).
        max_samples_per_gpu: Bound on the rows of each GPU's timeline of changes. Past it, the
            oldest changes are compacted into spans (one row each: the span's start and its
            time-weighted mean, rounded), never forgotten. None: a large default (65536) rather
            than the reference's unbounded list.

    The thread stops with :meth:`stop`, at the end of a ``with`` block, or when the monitor is
    garbage collected; what was collected stays queryable after :meth:`stop`.
    """

    def __init__(
        self,
        gpu_indices: Optional[Sequence[int]] = None,
        update_period: float = 1.0,
        max_samples_per_gpu: Optional[int] = None,
    ) -> None:
        gpus = _checks.index_list("gpu_indices", gpu_indices)
        if gpus is not None and not gpus:
            raise ValueError("`gpu_indices` must be either `None` or non-empty")
        period = _checks.optional_number("update_period", update_period)
        if period is None or not period > 0:
            raise ValueError(f"update_period must be a positive number of seconds, not {update_period!r}")
        max_samples_per_gpu = max_samples(max_samples_per_gpu)
        if len(_zeus.get_gpus()) == 0:
            raise ValueError("No GPUs available.")
        self._sampler = _zeus.PowerSampler(gpus, [], period, max_samples_per_gpu, temperature=True)
        self.gpu_indices: List[int] = list(self._sampler.gpu_indices)
        self.update_period: float = self._sampler.period_s

    def get_temperature_timeline(
        self,
        gpu_index: Optional[int] = None,
        start_time: Optional[float] = None,
        end_time: Optional[float] = None,
    ) -> Dict[int, List[Tuple[float, int]]]:
        """{GPU index: [(time, degrees C), ...]} of the changes with start_time <= time <= end_time."""
        start = _checks.optional_number("start_time", start_time)
        end = _checks.optional_number("end_time", end_time)
        return {gpu: self._sampler.temperature_timeline(gpu, start, end) for gpu in self._gpus(gpu_index)}

    def get_temperature(self, time: Optional[float] = None) -> Optional[Dict[int, int]]:  # noqa: A002
        """{GPU index: degrees C} in force at ``time`` (the latest when None): the last change at or
        before it. None when any GPU has no reading by then, as in the reference."""
        when = _checks.optional_number("time", time)
        return self._every_gpu(lambda gpu: self._sampler.temperature(gpu, when))

    def get_timeline_resolution(
        self, gpu_index: Optional[int] = None
    ) -> Dict[int, TimelineResolution]:
        """{GPU index: TimelineResolution}: from when on the timeline is exact, and how coarse
        its compacted past is."""
        return self._resolutions("temperature", gpu_index)
