"""GlobalPowerLimitOptimizer on simulated GPUs with a scripted monitor: the state machine, the
candidate limits, the chosen limit, the profile file and argument checking."""

from __future__ import annotations

import inspect
import json

import pytest

from plo_helpers import WINDOW_PREFIX, ScriptedMonitor, current_power_limit_w, power_limit_range_w

from zeus_cpp.callback import Callback
from zeus_cpp.optimizer.power_limit import (
    Done,
    Energy,
    GlobalPowerLimitOptimizer,
    MaxSlowdownConstraint,
    OptimumSelector,
    Profiling,
    Ready,
    Time,
    Warmup,
    ZeusCost,
)


def energy_optimal_at(optimum_w):
    """A profile whose energy is lowest at `optimum_w` and whose time grows as the limit drops."""

    def profile(power_limit_w):
        return 1.0 + (300 - power_limit_w) / 100.0, 100.0 + abs(power_limit_w - optimum_w)

    return profile


@pytest.fixture
def gpu_range():
    low, high = power_limit_range_w(0)
    assert high - low >= 100, "the tests assume a power-limit range of at least 100 W"
    return low, high


def run_steps(optimizer, count):
    for _ in range(count):
        optimizer.on_step_begin()
        optimizer.on_step_end()


def test_is_a_callback_with_the_reference_signature():
    assert issubclass(GlobalPowerLimitOptimizer, Callback)
    parameters = inspect.signature(GlobalPowerLimitOptimizer).parameters
    assert list(parameters) == ["monitor", "optimum_selector", "wait_steps", "warmup_steps",
                                "profile_steps", "pl_step", "profile_path"]  # fmt: skip
    assert [p.default for p in parameters.values()][1:] == [None, 1, 10, 40, 25, None]


def test_profiles_every_limit_then_applies_the_optimum(gpu_range, tmp_path):
    low, high = gpu_range
    optimum = high - 50
    monitor = ScriptedMonitor(energy_optimal_at(optimum))
    profile_path = tmp_path / "plo" / "profile.json"
    plo = GlobalPowerLimitOptimizer(monitor, optimum_selector=Energy(), wait_steps=1,
                                    warmup_steps=2, profile_steps=3, pl_step=25,
                                    profile_path=profile_path)  # fmt: skip
    try:
        expected = list(range(high * 1000, low * 1000 - 1, -25_000))
        if expected[-1] != low * 1000:
            expected.append(low * 1000)
        assert plo.power_limits == expected
        assert plo.pl_step == 25_000
        assert plo.state == Ready(next_power_limit=high * 1000, steps=2)
        assert current_power_limit_w() == high

        run_steps(plo, 2)  # wait_steps=1: the second step begins the warm-up at the maximum
        assert plo.state == Warmup(current_power_limit=high * 1000, steps=2)
        run_steps(plo, 2)
        assert plo.state == Profiling(current_power_limit=high * 1000, steps=3)
        assert monitor.calls[-1] == ("begin", f"{WINDOW_PREFIX}{high}")
        run_steps(plo, 3)
        assert isinstance(plo.state, Warmup)
        assert plo.state.current_power_limit == expected[1]
        assert current_power_limit_w() == expected[1] // 1000

        run_steps(plo, 5 * (len(expected) - 1))
        assert plo.state == Done(optimal_power_limit=optimum * 1000)
        assert plo.optimal_power_limit == optimum * 1000
        assert current_power_limit_w() == optimum
        assert [m.power_limit for m in plo.measurements] == [pl // 1000 for pl in expected]
        run_steps(plo, 10)  # nothing changes once done
        plo.on_epoch_end()
        assert plo.state == Done(optimal_power_limit=optimum * 1000)

        saved = json.loads(profile_path.read_text())
        assert [m["power_limit"] for m in saved["measurements"]] == [pl // 1000 for pl in expected]
        assert saved["measurements"][0]["energy"] == pytest.approx(100.0 + abs(high - optimum))
    finally:
        plo.close()
    assert current_power_limit_w() == high  # close() restores the maximum

    # The next run loads the profile: no profiling, the optimum at once.
    monitor2 = ScriptedMonitor(energy_optimal_at(optimum))
    plo2 = GlobalPowerLimitOptimizer(monitor2, optimum_selector=Energy(), profile_path=str(profile_path))
    try:
        assert plo2.state == Done(optimal_power_limit=optimum * 1000)
        assert current_power_limit_w() == optimum
        run_steps(plo2, 20)
        assert monitor2.calls == []
        assert len(plo2.measurements) == len(expected)
    finally:
        plo2.close()


def test_an_epoch_end_interrupts_and_retries_the_limit(gpu_range):
    low, high = gpu_range
    monitor = ScriptedMonitor(energy_optimal_at(low))
    plo = GlobalPowerLimitOptimizer(monitor, wait_steps=0, warmup_steps=1, profile_steps=4, pl_step=50)
    try:
        run_steps(plo, 3)  # warm-up at max, then 2 profiling steps
        assert isinstance(plo.state, Profiling)
        plo.on_epoch_end()
        assert plo.state == Ready(next_power_limit=high * 1000, steps=1)
        assert monitor.calls[-1] == ("cancel", f"{WINDOW_PREFIX}{high}")
        assert current_power_limit_w() == high
        assert plo.measurements == []
        run_steps(plo, 1 + 1 + 4)
        assert [m.power_limit for m in plo.measurements] == [high]
    finally:
        plo.close()


def test_selectors_and_the_default_selector(gpu_range):
    low, high = gpu_range
    # Time grows as the limit drops; energy is lowest at the minimum.
    profile = lambda w: (1.0 + (high - w) / 1000.0, 100.0 + (w - low))  # noqa: E731
    for selector, expected in ((Time(), high), (Energy(), low), (MaxSlowdownConstraint(1.0), high)):
        plo = GlobalPowerLimitOptimizer(ScriptedMonitor(profile), optimum_selector=selector,
                                        wait_steps=0, warmup_steps=0, profile_steps=1, pl_step=50)  # fmt: skip
        try:
            run_steps(plo, 20)
            assert plo.optimal_power_limit == expected * 1000, selector
        finally:
            plo.close()
    plo = GlobalPowerLimitOptimizer(ScriptedMonitor(profile, gpu_indices=[0, 1]))
    try:
        assert isinstance(plo.optimum_selector, ZeusCost)
        assert (plo.optimum_selector.eta_knob, plo.optimum_selector.world_size) == (0.5, 2)
    finally:
        plo.close()


def test_a_python_selector_drives_the_optimizer(gpu_range):
    low, high = gpu_range
    seen = []

    class Lowest(OptimumSelector):
        def select(self, measurements):
            seen.append([m.power_limit for m in measurements])
            return min(m.power_limit for m in measurements)

    plo = GlobalPowerLimitOptimizer(ScriptedMonitor(energy_optimal_at(high)), optimum_selector=Lowest(),
                                    wait_steps=0, warmup_steps=0, profile_steps=1, pl_step=50)  # fmt: skip
    try:
        run_steps(plo, 20)
        assert plo.optimal_power_limit == low * 1000
        assert seen and seen[0][0] == high
    finally:
        plo.close()


def test_errors_in_a_python_selector_propagate(gpu_range):
    class Broken(OptimumSelector):
        def select(self, measurements):
            raise KeyError("broken selector")

    plo = GlobalPowerLimitOptimizer(ScriptedMonitor(energy_optimal_at(200)), optimum_selector=Broken(),
                                    wait_steps=0, warmup_steps=0, profile_steps=1, pl_step=50)  # fmt: skip
    try:
        with pytest.raises(KeyError, match="broken selector"):
            run_steps(plo, 20)
    finally:
        plo.close()


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"wait_steps": -1}, ValueError, "wait_steps"),
        ({"wait_steps": "1"}, TypeError, "wait_steps"),
        ({"warmup_steps": -1}, ValueError, "warmup_steps"),
        ({"warmup_steps": 1.5}, TypeError, "warmup_steps"),
        ({"profile_steps": 0}, ValueError, "profile_steps"),
        ({"pl_step": 0}, ValueError, "pl_step"),
        ({"pl_step": True}, TypeError, "pl_step"),
        ({"profile_path": 3}, TypeError, "profile_path"),
        ({"optimum_selector": "Energy"}, TypeError, "optimum_selector"),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs, error, name):
    with pytest.raises(error, match=name):
        GlobalPowerLimitOptimizer(ScriptedMonitor(energy_optimal_at(200)), **kwargs)


def test_bad_monitor():
    with pytest.raises(TypeError, match="monitor"):
        GlobalPowerLimitOptimizer(object())


def test_a_bad_gpu_index_is_a_value_error():
    with pytest.raises(ValueError):
        GlobalPowerLimitOptimizer(ScriptedMonitor(energy_optimal_at(200), gpu_indices=[99]))


def test_a_corrupt_profile_is_a_value_error(tmp_path):
    path = tmp_path / "profile.json"
    path.write_text("not json")
    with pytest.raises(ValueError, match="profile.json"):
        GlobalPowerLimitOptimizer(ScriptedMonitor(energy_optimal_at(200)), profile_path=path)


def test_closed_optimizer_refuses_hooks():
    plo = GlobalPowerLimitOptimizer(ScriptedMonitor(energy_optimal_at(200)))
    plo.close()
    plo.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        plo.on_step_begin()
