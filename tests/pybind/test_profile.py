"""zeus_cpp.profile: the reference's thermally stable profiling API over the C++ profiler.

The thermal behaviour itself (drift while warming, durations that remove it) is tested in C++
on a manual clock (tests/monitor/profile_test.cpp); these tests use real time, so they keep the
durations tiny and check the API: signatures, result types, the GIL during cooldowns, errors.
"""

from __future__ import annotations

import inspect
import math
import threading
import time

import pytest

from zeus_cpp import _zeus, profile
from zeus_cpp.monitor import Measurement, ZeusMonitor


def _step() -> None:
    time.sleep(0.002)


def test_signatures_are_the_references() -> None:
    names = lambda f: list(inspect.signature(f).parameters)  # noqa: E731
    assert names(profile.measure) == [
        "target_function", "zeus_monitor", "measurement_duration", "cooldown_duration",
        "num_warmup_iterations", "num_calibration_iterations", "warmup_settle_duration",
    ]
    assert names(profile.profile_measurement_duration) == [
        "target_function", "zeus_monitor", "measurement_duration_search_range",
        "cooldown_duration", "num_trials", "num_warmup_trials", "trial_stddev_threshold",
        "num_warmup_iterations", "num_calibration_iterations", "iteration_duration",
    ]
    assert names(profile.profile_cooldown_duration)[2:4] == [
        "cooldown_duration_search_range", "measurement_duration",
    ]
    assert names(profile.profile_parameters) == [
        "target_function", "zeus_monitor", "measurement_duration_search_range",
        "cooldown_duration_search_range", "num_trials", "num_warmup_trials",
        "trial_stddev_threshold", "num_warmup_iterations", "num_calibration_iterations",
    ]


def test_measure_returns_a_trial_result() -> None:
    monitor = ZeusMonitor(gpu_indices=[0])
    calls = []
    trial = profile.measure(lambda: calls.append(_step()), monitor, 0.02, 0.0,
                            num_warmup_iterations=2, num_calibration_iterations=5)
    assert isinstance(trial, profile.TrialResult)
    assert trial.iterations >= 1
    assert len(calls) == 2 + 5 + 2 + trial.iterations  # warm-up and calibration, then the trial
    assert trial.total_time > 0 and trial.total_energy > 0
    assert trial.energy_per_iter == pytest.approx(trial.total_energy / trial.iterations)
    # Simulated V100 at idle: 30 + 55 * 25 / 250 = 35.5, read as a whole degree.
    assert trial.temperature_before == 36.0 and trial.temperature_after == 36.0


def test_warmup_settle_duration_replaces_the_warmup_count() -> None:
    monitor = ZeusMonitor(gpu_indices=[0])
    calls = []
    # 0 s of settling: one warm-up iteration (at least one), the calibration still uses 2 + 5.
    trial = profile.measure(lambda: calls.append(_step()), monitor, 0.02, 0.0,
                            num_warmup_iterations=2, num_calibration_iterations=5,
                            warmup_settle_duration=0.0)  # fmt: skip
    assert len(calls) == 2 + 5 + 1 + trial.iterations
    for bad in (-1.0, float("nan"), float("inf"), "1", True):
        with pytest.raises(ValueError, match="warmup_settle_duration"):
            profile.measure(_step, monitor, 0.02, 0.0, warmup_settle_duration=bad)


def test_sweeps_report_every_candidate() -> None:
    monitor = ZeusMonitor(gpu_indices=[0])
    report = profile.profile_measurement_duration(
        _step, monitor, measurement_duration_search_range=[0.02, 0.01], cooldown_duration=0.0,
        num_trials=2, num_warmup_trials=1, trial_stddev_threshold=1e9, num_warmup_iterations=0,
        iteration_duration=0.005,
    )
    assert isinstance(report, profile.SweepReport)
    assert report.sweep_param == ("measurement_duration", [0.01, 0.02])
    assert report.fixed_param == ("cooldown_duration", 0.0)
    assert [e.measurement_duration for e in report.entries] == [0.01, 0.02]
    assert all(isinstance(e, profile.SweepResult) and e.is_valid for e in report.entries)
    assert [e.trials[0].iterations for e in report.entries] == [2, 4]
    assert "VALID" in str(report) and "measurement_duration=0.0 s" in str(report)

    measurement, cooldown = profile.profile_parameters(
        _step, monitor, [0.01], [0.0, 0.01], num_trials=2, num_warmup_trials=0,
        trial_stddev_threshold=1e-12, num_warmup_iterations=0, num_calibration_iterations=2,
    )
    assert measurement.fixed_param == ("cooldown_duration", 0.01)
    assert cooldown.fixed_param == ("measurement_duration", 0.01)
    assert [e.cooldown_duration for e in cooldown.entries] == [0.0, 0.01]
    assert all(e.energy_std >= 0.0 and len(e.trials) == 2 for e in cooldown.entries)


def test_cooldown_releases_the_gil() -> None:
    monitor = ZeusMonitor(gpu_indices=[0])
    ticks = []
    stop = threading.Event()

    def ticker() -> None:
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.005)

    thread = threading.Thread(target=ticker)
    thread.start()
    try:
        profile.measure(_step, monitor, 0.005, 0.3, num_warmup_iterations=0,
                        num_calibration_iterations=1)
    finally:
        stop.set()
        thread.join()
    assert len(ticks) > 20


def test_errors_from_the_workload_and_bad_arguments_propagate() -> None:
    monitor = ZeusMonitor(gpu_indices=[0])

    def broken() -> None:
        raise RuntimeError("workload failed")

    with pytest.raises(RuntimeError, match="workload failed"):
        profile.measure(broken, monitor, 0.01, 0.0)
    with pytest.raises(TypeError, match="callable"):
        profile.measure(42, monitor, 0.01, 0.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="zeus_monitor"):
        profile.measure(_step, object(), 0.01, 0.0)
    with pytest.raises(Exception, match="num_trials"):
        profile.profile_cooldown_duration(_step, monitor, [0.0], num_trials=1,
                                          iteration_duration=0.01)


def test_thermal_simulated_gpus_start_at_ambient(python_runner) -> None:
    out = python_runner(
        "import time\n"
        "from zeus_cpp import profile\n"
        "from zeus_cpp.monitor import ZeusMonitor\n"
        "m = ZeusMonitor(gpu_indices=[0])\n"
        "t = profile.measure(lambda: time.sleep(0.001), m, 0.005, 0.0, 0, 1)\n"
        "print(t.temperature_before, t.temperature_after)\n",
        env={"ZEUS_SIMULATED_GPUS": "1:h200:thermal"},
    )
    before, after = (float(x) for x in out.split())
    assert before == 30.0 and after == 30.0 and not math.isnan(before)


def test_a_monitor_that_reports_no_time_is_refused_with_or_without_settling() -> None:
    class Timeless:
        """A duck monitor whose windows last 0 s: the calibrated iteration time is 0."""

        gpu_indices = [0]

        def begin_window(self, key, sync_execution=True, **_):  # noqa: ANN001, ANN003
            pass

        def end_window(self, key, sync_execution=True, cancel=False, **_):  # noqa: ANN001, ANN003
            return type("M", (), {"time": 0.0, "gpu_energy": {0: 0.0}, "cpu_energy": None,
                                  "dram_energy": None})()

    for settle in (None, 1.0):
        with pytest.raises(ValueError, match="iteration duration"):
            profile.measure(lambda: None, Timeless(), 0.01, 0.0, 2, 5,
                            warmup_settle_duration=settle)


# ---- Ranks: the reference all-reduces a trial (energy summed, time the maximum, temperatures
# averaged); here through a Reducer, torch.distributed's when it is initialised. ----


class _ScriptedGpus:
    def __init__(self, temperature_c: float) -> None:
        self.temperature_c = temperature_c

    def get_gpu_temperature(self, index: int) -> float:  # noqa: ARG002
        return self.temperature_c


class RankMonitor(_zeus.WindowMonitor):
    """One rank's monitor: every window takes `time_s` and uses `energy_j` on GPU 0; the GPU is
    at `temperature_c`."""

    def __init__(self, time_s: float, energy_j: float, temperature_c: float) -> None:
        super().__init__()
        self.gpu_indices = [0]
        self.time_s, self.energy_j = time_s, energy_j
        self.gpus = _ScriptedGpus(temperature_c)

    def begin_window(self, key, sync_execution=True, restart=False):  # noqa: ANN001, ANN201
        pass

    def end_window(self, key, sync_execution=True, cancel=False):  # noqa: ANN001, ANN201
        return Measurement(time=self.time_s, gpu_energy={0: 0.0 if cancel else self.energy_j})


class ThreeRanks(_zeus.Reducer):
    """This rank and two scripted others: each other adds 100 to a sum; the slowest takes 7 s."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list = []

    def sum(self, value: float) -> float:
        self.calls.append(("sum", value))
        return value + 200.0

    def max(self, value: float) -> float:
        self.calls.append(("max", value))
        return max(value, 7.0)

    def world_size(self) -> int:
        return 3


def test_one_process_combines_nothing() -> None:
    assert profile._reducer() is None  # no torch.distributed process group here


def test_a_trial_is_combined_across_ranks_as_the_references(monkeypatch: pytest.MonkeyPatch) -> None:
    ranks = ThreeRanks()
    monkeypatch.setattr(profile, "_reducer", lambda: ranks)
    monitor = RankMonitor(time_s=0.1, energy_j=5.0, temperature_c=40.0)
    trial = profile.measure(lambda: None, monitor, measurement_duration=1.0, cooldown_duration=0.0,
                            num_warmup_iterations=0, num_calibration_iterations=2)  # fmt: skip
    # The calibration takes the slowest rank's time (7 s over 2 iterations), so every rank runs
    # ceil(1.0 / 3.5) = 1 iteration; then energy summed, time the maximum, temperatures averaged.
    assert ranks.calls == [("max", 0.1), ("sum", 5.0), ("max", 0.1), ("sum", 40.0), ("sum", 40.0)]
    assert trial.iterations == 1
    assert trial.total_energy == 205.0 and trial.energy_per_iter == 205.0
    assert trial.total_time == 7.0 and trial.time_per_iter == 7.0
    assert trial.temperature_before == trial.temperature_after == pytest.approx(80.0)

    # A sweep combines every trial the same way.
    ranks.calls.clear()
    report = profile.profile_measurement_duration(
        lambda: None, monitor, measurement_duration_search_range=[1.0], cooldown_duration=0.0,
        num_trials=2, num_warmup_trials=0, trial_stddev_threshold=1e9, num_warmup_iterations=0,
        iteration_duration=0.5,
    )
    (entry,) = report.entries
    assert [t.total_energy for t in entry.trials] == [205.0, 205.0]
    assert [t.iterations for t in entry.trials] == [2, 2]  # ceil(1.0 / 0.5)
    assert entry.avg_total_time == 7.0
    assert len(ranks.calls) == 2 * 4


def test_iterations_fill_the_measurement_as_the_references() -> None:
    monitor = RankMonitor(time_s=0.1, energy_j=1.0, temperature_c=40.0)
    trial = profile.measure(lambda: None, monitor, measurement_duration=0.25, cooldown_duration=0.0,
                            num_warmup_iterations=0, num_calibration_iterations=1)  # fmt: skip
    assert trial.iterations == 3  # ceil(0.25 / 0.1): the window lasts at least 0.25 s


def test_a_long_sweep_says_how_long_when_it_starts(caplog) -> None:
    # profile_parameters with its defaults runs for most of an hour: it says so at level warn
    # before the first trial (the target stops the run right after the calibration).
    monitor = ZeusMonitor(gpu_indices=[0])
    calls = []

    def target() -> None:
        calls.append(1)
        if len(calls) > 10 + 100:  # the default warm-up and calibration iterations
            raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        profile.profile_parameters(target, monitor)
    err = caplog.text
    assert "profile: sweeping the measurement duration over [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] s" in err, err
    assert "(10 trials each, 2 warm-up trials) takes up to about 15" in err and "ZEUS_LOG_LEVEL=info" in err


def test_each_candidate_is_logged_at_level_info() -> None:
    import subprocess
    import sys

    from conftest import subprocess_env

    code = (
        "import time\n"
        "from zeus_cpp import profile\n"
        "from zeus_cpp.monitor import ZeusMonitor\n"
        "profile.profile_parameters(lambda: time.sleep(0.002), ZeusMonitor(gpu_indices=[0]), [0.01], [0.0, 0.01],\n"
        "    num_trials=2, num_warmup_trials=0, trial_stddev_threshold=1e9, num_warmup_iterations=0,\n"
        "    num_calibration_iterations=2)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], env=subprocess_env({"ZEUS_LOG_LEVEL": "info"}),
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "profile: measurement duration 0.01 s, candidate 1 of 1: 2 trials" in result.stderr, result.stderr
    assert "profile: cooldown duration 0 s, candidate 1 of 2" in result.stderr
    assert "profile: cooldown duration 0.01 s, candidate 2 of 2" in result.stderr
    assert "profile: cooldown duration 0.01 s: spread of energy per iteration" in result.stderr
