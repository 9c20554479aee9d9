"""PowerMonitor: GPU power timelines sampled by a background thread.

Timelines come back as the reference's lists of ``(time, watts)`` tuples (``time.time()``
seconds, W). The same data as numpy arrays of shape ``(n, 2)`` (column 0 the time, column 1 the
power; no tuple per sample, for long timelines) come from :meth:`PowerMonitor.get_power_timeline_array`
and :meth:`PowerMonitor.get_all_power_timeline_arrays`. Energies integrate the sampled power as a
held (piecewise-constant) signal over exactly the interval asked for.

A timeline keeps a whole run in bounded memory: past ``max_samples_per_gpu`` rows its oldest
samples are compacted into spans (one row each: the span's start and mean power) rather than
forgotten, so ``get_energy`` answers over any interval of a run of days, exactly among the kept
samples and within a bound inside a compacted span (``get_timeline_resolution``; docs/python.md).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from zeus_cpp import _zeus
from zeus_cpp.exception import ZeusGPUNotSupportedError
from zeus_cpp.monitor import _checks
from zeus_cpp.monitor._sampled import SampledMonitor, TimelineResolution, max_samples


class PowerDomain(enum.Enum):
    """What a power sample measures."""

    DEVICE_INSTANT = "device_instant"
    """The GPU's instantaneous power draw."""
    DEVICE_AVERAGE = "device_average"
    """The GPU's power averaged by the driver (about 1 s)."""
    MEMORY_AVERAGE = "memory_average"
    """The GPU memory's average power (where the GPU reports it)."""


@dataclass(frozen=True)
class PowerSample:
    """One sample: when (``time.time()`` seconds), which GPU, how much (mW)."""

    timestamp: float
    gpu_index: int
    power_mw: float


DomainLike = Union[PowerDomain, str]

# The GPU method that reads each domain (mW), as the sampler reads it.
_DOMAIN_READERS = {
    PowerDomain.DEVICE_INSTANT: "get_instant_power_usage",
    PowerDomain.DEVICE_AVERAGE: "get_average_power_usage",
    PowerDomain.MEMORY_AVERAGE: "get_average_memory_power_usage",
}


def supported_domains(gpus: object, gpu_indices: Sequence[int]) -> List[PowerDomain]:
    """The domains (in :class:`PowerDomain` order) that every GPU in ``gpu_indices`` reports.

    A domain is probed by reading it once on each GPU; one that raises
    :class:`~zeus_cpp.exception.ZeusGPUNotSupportedError` on any of them is left out (the sampler
    reads every domain on every monitored GPU). Other errors propagate.
    """
    result: List[PowerDomain] = []
    for domain, reader in _DOMAIN_READERS.items():
        try:
            for index in gpu_indices:
                getattr(gpus, reader)(index)
        except ZeusGPUNotSupportedError:
            continue
        result.append(domain)
    return result


def infer_counter_update_period(gpu_indicies: Sequence[int]) -> float:
    """The sampling period a PowerMonitor without ``update_period`` uses, as the reference's
    function of that name (and its parameter's spelling): for each distinct GPU model among
    ``gpu_indicies``, the power reading (instant, else average) is polled back to back and half
    its shortest interval between changes taken; the result is the smallest over the models,
    within [1 ms, 0.1 s] (0.1 s when a reading never changes or no GPU reports power).
    """
    indices = _checks.index_list("gpu_indicies", gpu_indicies) or []
    gpus = _zeus.get_gpus()
    period = 0.1
    models = set()
    for index in indices:
        model = gpus.get_name(index)
        if model in models:
            continue
        models.add(model)
        for domain in (PowerDomain.DEVICE_INSTANT, PowerDomain.DEVICE_AVERAGE):
            try:
                period = min(period, _zeus._infer_power_update_period(index, domain.value))
                break
            except ZeusGPUNotSupportedError:
                continue
    return period


def _domain(name: str, value: object) -> PowerDomain:
    if isinstance(value, PowerDomain):
        return value
    if isinstance(value, str):
        try:
            return PowerDomain(value)
        except ValueError:
            pass
        raise ValueError(
            f"{name} must be one of {[d.value for d in PowerDomain]}, not {value!r}"
        )
    raise TypeError(f"{name} must be a PowerDomain, not {type(value).__name__}")


class PowerMonitor(SampledMonitor):
    """Samples the power of GPUs in the background.

    Args:
        gpu_indices: GPUs to sample (None: every visible GPU; ``[]`` is a ValueError).
        update_period: Seconds between samples; None infers it from how often the reading
            changes (half the shortest change interval, at most 0.1 s).
        max_samples_per_gpu: Bound on the rows of each (domain, GPU) timeline. Past it, the
            oldest samples are compacted into spans (at most half the rows), never forgotten.
            None: a large default (65536; about 2 MiB a timeline).
        power_domains: Domains to sample (default None: every domain all the monitored GPUs
            report, as the reference; one they cannot report is left out; ``[]`` is a
            ValueError). An explicitly listed domain the GPUs cannot report raises
            :class:`~zeus_cpp.exception.ZeusGPUNotSupportedError`.

    The sampler thread stops with :meth:`stop`, at exit from a ``with`` block, or when the
    monitor is garbage collected.
    """

    def __init__(
        self,
        gpu_indices: Optional[Sequence[int]] = None,
        update_period: Optional[float] = None,
        max_samples_per_gpu: Optional[int] = None,
        power_domains: Optional[Sequence[DomainLike]] = None,
    ) -> None:
        gpus = _checks.index_list("gpu_indices", gpu_indices)
        if gpus is not None and not gpus:
            raise ValueError("gpu_indices must not be empty (None means every GPU)")
        period = _checks.optional_number("update_period", update_period)
        if period is not None and period <= 0:
            raise ValueError(f"update_period must be positive, not {update_period!r}")
        max_samples_per_gpu = max_samples(max_samples_per_gpu)
        native_gpus = _zeus.get_gpus()
        if len(native_gpus) == 0:
            raise ValueError("No GPUs available.")
        if power_domains is None:
            probed = gpus if gpus is not None else list(range(len(native_gpus)))
            # A bad index is left for the sampler to report (with the valid ones).
            valid = [index for index in probed if 0 <= index < len(native_gpus)]
            domains = supported_domains(native_gpus, valid) if valid else list(PowerDomain)
            if not domains:
                raise ZeusGPUNotSupportedError(
                    f"GPUs {probed} report no power domain ({[d.value for d in PowerDomain]}); "
                    "no power can be sampled on them"
                )
        else:
            if isinstance(power_domains, (str, PowerDomain)):
                raise TypeError("power_domains must be a list of PowerDomain")
            domains = [_domain("power_domains", d) for d in power_domains]
            if not domains:
                raise ValueError("power_domains must not be empty")
        self._sampler = _zeus.PowerSampler(
            gpus, [d.value for d in domains], period, max_samples_per_gpu
        )
        self.gpu_indices: List[int] = list(self._sampler.gpu_indices)
        self.power_domains: List[PowerDomain] = domains
        self.update_period: float = self._sampler.period_s

    def _check_domain(self, domain: DomainLike) -> PowerDomain:
        parsed = _domain("power_domain", domain)
        if parsed not in self.power_domains:
            # The reference's wording (same class), then what to do.
            raise ValueError(
                f"Power domain {parsed.value} is not being monitored. Available domains: "
                f"{[d.value for d in self.power_domains]} (pass power_domains=[...] to "
                f"PowerMonitor to sample it)"
            )
        return parsed

    def get_power_timeline(
        self,
        power_domain: DomainLike = PowerDomain.DEVICE_INSTANT,
        gpu_index: Optional[int] = None,
        start_time: Optional[float] = None,
        end_time: Optional[float] = None,
    ) -> Dict[int, List[Tuple[float, float]]]:
        """{GPU index: [(time, W), ...]} with start_time <= time <= end_time, sorted by time (the
        reference's lists of tuples; :meth:`get_power_timeline_array` for numpy arrays)."""
        return {
            gpu: list(map(tuple, timeline.tolist()))
            for gpu, timeline in self.get_power_timeline_array(
                power_domain, gpu_index, start_time, end_time
            ).items()
        }

    def get_power_timeline_array(
        self,
        power_domain: DomainLike = PowerDomain.DEVICE_INSTANT,
        gpu_index: Optional[int] = None,
        start_time: Optional[float] = None,
        end_time: Optional[float] = None,
    ) -> Dict[int, np.ndarray]:
        """{GPU index: (n, 2) float64 array of (time, W)} with start_time <= time <= end_time:
        :meth:`get_power_timeline`'s samples without a Python tuple each."""
        domain = self._check_domain(power_domain)
        start = _checks.optional_number("start_time", start_time)
        end = _checks.optional_number("end_time", end_time)
        return {
            gpu: self._sampler.timeline(domain.value, gpu, start, end)
            for gpu in self._gpus(gpu_index)
        }

    def get_all_power_timelines(
        self,
        gpu_index: Optional[int] = None,
        start_time: Optional[float] = None,
        end_time: Optional[float] = None,
    ) -> Dict[str, Dict[int, List[Tuple[float, float]]]]:
        """{domain name: get_power_timeline(domain, ...)} for every sampled domain."""
        return {
            domain.value: self.get_power_timeline(domain, gpu_index, start_time, end_time)
            for domain in self.power_domains
        }

    def get_all_power_timeline_arrays(
        self,
        gpu_index: Optional[int] = None,
        start_time: Optional[float] = None,
        end_time: Optional[float] = None,
    ) -> Dict[str, Dict[int, np.ndarray]]:
        """{domain name: get_power_timeline_array(domain, ...)} for every sampled domain."""
        return {
            domain.value: self.get_power_timeline_array(domain, gpu_index, start_time, end_time)
            for domain in self.power_domains
        }

    @property
    def measurement_domains(self) -> List[PowerDomain]:
        """The reference's name of :attr:`power_domains` (the domains sampled)."""
        return self.power_domains

    def get_energy(
        self,
        start_time: float,
        end_time: float,
        power_domain: Optional[DomainLike] = None,
    ) -> Optional[Dict[int, float]]:
        """{GPU index: J} over [start_time, end_time] (``time.time()`` seconds).

        The domain defaults to device_instant when sampled, else device_average.
        """
        start = _checks.optional_number("start_time", start_time)
        end = _checks.optional_number("end_time", end_time)
        if start is None or end is None:
            raise TypeError("start_time and end_time must be numbers")
        if power_domain is None:
            domain = (
                PowerDomain.DEVICE_INSTANT
                if PowerDomain.DEVICE_INSTANT in self.power_domains
                else PowerDomain.DEVICE_AVERAGE
            )
        else:
            domain = _domain("power_domain", power_domain)
        domain = self._check_domain(domain)
        return {gpu: self._sampler.energy(domain.value, gpu, start, end) for gpu in self.gpu_indices}

    def get_timeline_resolution(
        self,
        power_domain: DomainLike = PowerDomain.DEVICE_INSTANT,
        gpu_index: Optional[int] = None,
    ) -> Dict[int, TimelineResolution]:
        """{GPU index: TimelineResolution}: from when on the timeline is exact, and how coarse
        its compacted past is."""
        domain = self._check_domain(power_domain)
        return self._resolutions(domain.value, gpu_index)

    def get_power(
        self,
        time: Optional[float] = None,  # noqa: A002  (the reference's name)
        power_domain: DomainLike = PowerDomain.DEVICE_INSTANT,
    ) -> Optional[Dict[int, float]]:
        """{GPU index: W} in force at ``time`` (the latest when None); None if a GPU has none."""
        domain = self._check_domain(power_domain)
        when = _checks.optional_number("time", time)
        return self._every_gpu(lambda gpu: self._sampler.power(domain.value, gpu, when))


__all__ = ["PowerMonitor", "PowerDomain", "PowerSample", "TimelineResolution",
           "infer_counter_update_period"]
