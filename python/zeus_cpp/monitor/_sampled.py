"""What PowerMonitor and TemperatureMonitor share: a native PowerSampler (``self._sampler``) over
``self.gpu_indices``, its lifetime, and the checks of their common arguments."""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, TypeVar

T = TypeVar("T")


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
