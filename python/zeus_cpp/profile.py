"""Thermally stable profiling, as the reference's ``zeus.profile``.

Short energy measurements follow the GPU's temperature: a cold GPU leaks less power than a warm
one, so energy per iteration drifts while it warms. These functions sweep the measurement and
cooldown durations of a workload until the energy per iteration of repeated trials agrees
(sample standard deviation below ``trial_stddev_threshold`` joules), then ``measure`` runs one
trial with chosen durations.

    from zeus_cpp.monitor import ZeusMonitor
    from zeus_cpp.profile import measure, profile_parameters

    monitor = ZeusMonitor(gpu_indices=[0])
    measurement_report, cooldown_report = profile_parameters(step, monitor)
    print(measurement_report)
    trial = measure(step, monitor, measurement_duration=5.0, cooldown_duration=3.0)

The trials run in C++ (``zeus/monitor/profile.hpp``) and call ``target_function`` and the
monitor with the GIL held; cooldown sleeps release it. Each process measures its own monitor's
GPUs; when ``torch.distributed`` is initialised, every rank's trial figures are all-reduced as
the reference's are: energy summed, time the maximum, temperatures averaged (and the calibrated
iteration time is the slowest rank's, so that every rank runs as many iterations). Every rank
must then make the same calls.
"""

from __future__ import annotations

import math

from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple

from zeus_cpp import _zeus
from zeus_cpp.utils.framework import TorchDistributedReducer, is_distributed

__all__ = [
    "TrialResult",
    "SweepResult",
    "SweepReport",
    "measure",
    "profile_measurement_duration",
    "profile_cooldown_duration",
    "profile_parameters",
]

_DEFAULT_SEARCH_RANGE = [float(x) for x in range(1, 11)]


@dataclass
class TrialResult:
    """One measurement trial: energy (J) and time (s) per iteration and in all, the number of
    iterations, and the mean GPU temperature (deg C) before and after."""

    energy_per_iter: float
    time_per_iter: float
    total_energy: float
    total_time: float
    iterations: int
    temperature_before: float
    temperature_after: float


@dataclass
class SweepResult:
    """The trials of one swept value and their statistics (``energy_std``: sample standard
    deviation of ``energy_per_iter``; ``is_valid``: ``energy_std < trial_stddev_threshold``)."""

    measurement_duration: float
    cooldown_duration: float
    trials: List[TrialResult]
    energy_mean: float
    energy_std: float
    avg_temperature_before: float
    avg_temperature_after: float
    avg_total_time: float
    avg_total_energy: float
    is_valid: bool

    def __str__(self) -> str:
        tag = "VALID" if self.is_valid else "INVALID"
        return (
            f"measurement={self.measurement_duration:.1f} s  "
            f"cooldown={self.cooldown_duration:.1f} s  "
            f"mean={self.energy_mean:.4f} J  std={self.energy_std:.4f} J  "
            f"temp_before={self.avg_temperature_before:.1f} \u00b0C  "
            f"temp_after={self.avg_temperature_after:.1f} \u00b0C  [{tag}]"
        )


@dataclass
class SweepReport:
    """A sweep: ``sweep_param`` is ``(name, values)``, ``fixed_param`` ``(name, value)``,
    ``entries`` one :class:`SweepResult` per swept value."""

    sweep_param: Tuple[str, List[float]]
    fixed_param: Tuple[str, float]
    entries: List[SweepResult]

    def __str__(self) -> str:
        sweep_name, _ = self.sweep_param
        fixed_name, fixed_value = self.fixed_param
        lines = [f"Sweep {sweep_name} (fixed {fixed_name}={fixed_value:.1f} s):"]
        for entry in self.entries:
            tag = "VALID" if entry.is_valid else "INVALID"
            lines.append(
                f"  {sweep_name}={getattr(entry, sweep_name):.1f} s  "
                f"mean={entry.energy_mean:.4f} J  std={entry.energy_std:.4f} J  "
                f"temp_before={entry.avg_temperature_before:.1f} \u00b0C  "
                f"temp_after={entry.avg_temperature_after:.1f} \u00b0C  [{tag}]"
            )
        return "\n".join(lines)


def _reducer() -> Optional[_zeus.Reducer]:
    """How the ranks' figures combine: over torch.distributed when it is initialised (as the
    reference's all_reduce), else None (one process)."""
    return TorchDistributedReducer() if is_distributed() else None


def _candidates(search_range: Optional[List[float]]) -> List[float]:
    """The swept values in seconds: the ones given, or (None or empty, as the reference) 1..10 s."""
    return [float(v) for v in (search_range or _DEFAULT_SEARCH_RANGE)]


def _trial(values: dict) -> TrialResult:
    return TrialResult(**values)


def _report(swept: str, fixed: str, fixed_value: float, values: List[float], raw: dict) -> SweepReport:
    entries = []
    for entry in raw["entries"]:
        fields = dict(entry)
        fields["trials"] = [_trial(t) for t in entry["trials"]]
        entries.append(SweepResult(**fields))
    return SweepReport(sweep_param=(swept, list(values)), fixed_param=(fixed, fixed_value), entries=entries)


def _sweep(
    swept: str,
    target_function: Callable[[], Any],
    zeus_monitor: Any,
    search_range: Optional[List[float]],
    fixed_value: float,
    num_trials: int,
    num_warmup_trials: int,
    trial_stddev_threshold: float,
    num_warmup_iterations: int,
    num_calibration_iterations: int,
    iteration_duration: Optional[float],
) -> SweepReport:
    values = _candidates(search_range)
    raw = _zeus._profile_sweep(
        swept,
        target_function,
        zeus_monitor,
        values,
        float(fixed_value),
        num_trials,
        num_warmup_trials,
        float(trial_stddev_threshold),
        num_warmup_iterations,
        num_calibration_iterations,
        iteration_duration,
        reducer=_reducer(),
    )
    fixed = "cooldown_duration" if swept == "measurement_duration" else "measurement_duration"
    return _report(swept, fixed, float(fixed_value), sorted(values), raw)


def profile_measurement_duration(
    target_function: Callable[[], Any],
    zeus_monitor: Any,
    measurement_duration_search_range: Optional[List[float]] = None,
    cooldown_duration: float = 10.0,
    num_trials: int = 10,
    num_warmup_trials: int = 2,
    trial_stddev_threshold: float = 0.01,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
    iteration_duration: Optional[float] = None,
) -> SweepReport:
    """Sweeps the measurement duration (default 1..10 s) with the cooldown fixed."""
    return _sweep(
        "measurement_duration",
        target_function,
        zeus_monitor,
        measurement_duration_search_range,
        cooldown_duration,
        num_trials,
        num_warmup_trials,
        trial_stddev_threshold,
        num_warmup_iterations,
        num_calibration_iterations,
        iteration_duration,
    )


def profile_cooldown_duration(
    target_function: Callable[[], Any],
    zeus_monitor: Any,
    cooldown_duration_search_range: Optional[List[float]] = None,
    measurement_duration: float = 10.0,
    num_trials: int = 10,
    num_warmup_trials: int = 2,
    trial_stddev_threshold: float = 0.01,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
    iteration_duration: Optional[float] = None,
) -> SweepReport:
    """Sweeps the cooldown (default 1..10 s) with the measurement duration fixed."""
    return _sweep(
        "cooldown_duration",
        target_function,
        zeus_monitor,
        cooldown_duration_search_range,
        measurement_duration,
        num_trials,
        num_warmup_trials,
        trial_stddev_threshold,
        num_warmup_iterations,
        num_calibration_iterations,
        iteration_duration,
    )


def profile_parameters(
    target_function: Callable[[], Any],
    zeus_monitor: Any,
    measurement_duration_search_range: Optional[List[float]] = None,
    cooldown_duration_search_range: Optional[List[float]] = None,
    num_trials: int = 10,
    num_warmup_trials: int = 2,
    trial_stddev_threshold: float = 0.01,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
) -> Tuple[SweepReport, SweepReport]:
    """Both sweeps, as the reference: the measurement duration with the cooldown at the largest
    cooldown candidate, then the cooldown with the measurement duration at the largest
    measurement candidate (no warm-up trials: the GPU is warm). One calibration for both.
    Returns ``(measurement_report, cooldown_report)``."""
    m_range = _candidates(measurement_duration_search_range)
    c_range = _candidates(cooldown_duration_search_range)
    iteration_duration = _zeus._profile_calibrate(
        target_function, zeus_monitor, num_warmup_iterations, num_calibration_iterations,
        reducer=_reducer(),
    )
    measurement_report = profile_measurement_duration(
        target_function,
        zeus_monitor,
        m_range,
        cooldown_duration=max(c_range),
        num_trials=num_trials,
        num_warmup_trials=num_warmup_trials,
        trial_stddev_threshold=trial_stddev_threshold,
        num_warmup_iterations=num_warmup_iterations,
        num_calibration_iterations=num_calibration_iterations,
        iteration_duration=iteration_duration,
    )
    cooldown_report = profile_cooldown_duration(
        target_function,
        zeus_monitor,
        c_range,
        measurement_duration=max(m_range),
        num_trials=num_trials,
        num_warmup_trials=0,
        trial_stddev_threshold=trial_stddev_threshold,
        num_warmup_iterations=num_warmup_iterations,
        num_calibration_iterations=num_calibration_iterations,
        iteration_duration=iteration_duration,
    )
    return measurement_report, cooldown_report


def measure(
    target_function: Callable[[], Any],
    zeus_monitor: Any,
    measurement_duration: float,
    cooldown_duration: float,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
    warmup_settle_duration: Optional[float] = None,
) -> TrialResult:
    """One trial: calibrate the iteration time, sleep the cooldown, warm up, measure.

    ``warmup_settle_duration`` (seconds), as in the reference: when given, the warm-up before the
    measurement runs that long (at least one iteration) instead of ``num_warmup_iterations``,
    which the calibration still uses."""
    if warmup_settle_duration is None:
        return _trial(
            _zeus._profile_measure(
                target_function,
                zeus_monitor,
                float(measurement_duration),
                float(cooldown_duration),
                num_warmup_iterations,
                num_calibration_iterations,
                reducer=_reducer(),
            )
        )
    if (
        isinstance(warmup_settle_duration, bool)
        or not isinstance(warmup_settle_duration, (int, float))
        or not 0 <= warmup_settle_duration < float("inf")
    ):
        raise ValueError(
            f"warmup_settle_duration must be a non-negative number of seconds, not {warmup_settle_duration!r}"
        )
    iteration_duration = _zeus._profile_calibrate(
        target_function, zeus_monitor, num_warmup_iterations, num_calibration_iterations,
        reducer=_reducer(),
    )
    # A monitor that reports 0 s for the calibration window: the profiler refuses that iteration
    # time with its own message (instead of a ZeroDivisionError here).
    settle_iterations = (
        max(1, math.ceil(warmup_settle_duration / iteration_duration)) if iteration_duration > 0 else 1
    )
    return _trial(
        _zeus._profile_measure(
            target_function,
            zeus_monitor,
            float(measurement_duration),
            float(cooldown_duration),
            settle_iterations,
            num_calibration_iterations,
            iteration_duration=iteration_duration,
            reducer=_reducer(),
        )
    )
