"""What PowerMonitor and TemperatureMonitor share: a native PowerSampler (``self._sampler``) over
``self.gpu_indices``, its lifetime, and the checks of their common arguments."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class TimelineResolution:
    """How finely a GPU's timeline keeps its past (``get_timeline_resolution``).

    A timeline keeps at most ``max_samples_per_gpu`` rows. Once a run outgrows them, its oldest
    samples are compacted, never forgotten: each older row is then the time-weighted mean over a
    span (held until the next row, so integrating the rows is exact at every row), and energies
    whose ends fall inside such a span are within a bound (docs/monitor.md).
    """

    exact_since: Optional[float]
    """``time.time()`` seconds of the oldest exact sample; rows before it are compacted spans.
    None while every sample since the first is kept exactly."""
    longest_span_s: float
    """The longest compacted span (0.0 when none): the coarsest resolution of the old rows."""
    rows: int
    """Rows kept now (at most ``max_samples_per_gpu``)."""


def max_samples(value: object) -> Optional[int]:
    """``max_samples_per_gpu``: None or a positive int."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"max_samples_per_gpu must be an int or None, not {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"max_samples_per_gpu must be positive, not {value}")
    return value


class SampledMonitor:
    """Base of the sampler-backed monitors; subclasses set ``_sampler`` and ``gpu_indices``."""

    _sampler: object
    gpu_indices: List[int]

    def _gpus(self, gpu_index: Optional[int]) -> List[int]:
        """The GPUs a query is about: all, or the one asked for (which must be monitored)."""
        if gpu_index is None:
            return self.gpu_indices
        if isinstance(gpu_index, bool) or not isinstance(gpu_index, int):
            raise TypeError(f"gpu_index must be an int or None, not {type(gpu_index).__name__}")
        if gpu_index not in self.gpu_indices:
            raise ValueError(
                f"GPU index {gpu_index} is not being monitored. Monitored GPUs: {self.gpu_indices}"
            )
        return [gpu_index]

    def _every_gpu(self, read: Callable[[int], Optional[T]]) -> Optional[Dict[int, T]]:
        """{GPU: read(GPU)} over every monitored GPU, or None as soon as one has no value."""
        result: Dict[int, T] = {}
        for gpu in self.gpu_indices:
            value = read(gpu)
            if value is None:
                return None
            result[gpu] = value
        return result

    def _resolutions(self, series: str, gpu_index: Optional[int]) -> Dict[int, TimelineResolution]:
        """{GPU: TimelineResolution} of ``series`` (a power domain's name, or "temperature")."""
        sampler = self._sampler
        return {
            gpu: TimelineResolution(*sampler.resolution(series, gpu))  # type: ignore[attr-defined]
            for gpu in self._gpus(gpu_index)
        }

    def stop(self) -> None:
        """Stops sampling (idempotent); what was collected stays queryable."""
        self._sampler.stop()  # type: ignore[attr-defined]

    def __enter__(self):  # noqa: ANN204  (the subclass)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __del__(self) -> None:
        sampler = getattr(self, "_sampler", None)
        if sampler is not None:
            sampler.stop()
