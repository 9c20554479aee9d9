"""The power-limit optimizer's profile file and its warnings (issue 31, items 6 and 4): a window
that measured 0 J is measured again, never written; a profile with a bad entry is reported
(naming the file and the entry) and that limit profiled again, never a crash at construction;
epochs too short to profile one limit are named once. Scripted monitor on simulated GPUs; the
warnings are the library's log lines (records of the `zeus_cpp.*` loggers: caplog)."""

from __future__ import annotations

import json

import pytest

from plo_helpers import WINDOW_PREFIX, ScriptedMonitor, current_power_limit_w, power_limit_range_w

from zeus_cpp.optimizer.power_limit import (
    Done,
    Energy,
    GlobalPowerLimitOptimizer,
    PowerLimitMeasurement,
    load_profile,
    save_profile,
)


def run_steps(optimizer, count):
    for _ in range(count):
        optimizer.on_step_begin()


def energy_optimal_at(optimum_w, empty=lambda limit_w, attempt: False):
    """Energy lowest at `optimum_w`; the window at W measures 0 J when `empty(W, attempt)`."""
    attempts: dict[int, int] = {}

    def profile(power_limit_w):
        attempt = attempts[power_limit_w] = attempts.get(power_limit_w, 0) + 1
        time = 1.0 + (300 - power_limit_w) / 100.0
        return time, 0.0 if empty(power_limit_w, attempt) else 100.0 + abs(power_limit_w - optimum_w)

    return profile


@pytest.fixture
def limits():
    low, high = power_limit_range_w(0)
    limits = list(range(high, low - 1, -50))
    return limits if limits[-1] == low else limits + [low]


def profile_until_done(plo, steps_per_limit, count):
    run_steps(plo, steps_per_limit * count + 1)


def test_a_window_that_measured_nothing_is_measured_again_and_the_profile_loads(limits, tmp_path, caplog):
    low, high = limits[-1], limits[0]
    # The second limit's first window measures 0 J (a counter that had not advanced yet).
    monitor = ScriptedMonitor(energy_optimal_at(low, empty=lambda w, attempt: w == limits[1] and attempt == 1))
    path = tmp_path / "profile.json"
    plo = GlobalPowerLimitOptimizer(monitor, Energy(), wait_steps=0, warmup_steps=1, profile_steps=2, pl_step=50,
                                    profile_path=path)  # fmt: skip
    try:
        profile_until_done(plo, 3, len(limits) + 1)
        assert plo.state == Done(optimal_power_limit=low * 1000)
        assert [m.power_limit for m in plo.measurements] == limits
        assert all(m.energy > 0 for m in plo.measurements)
    finally:
        plo.close()
    err = caplog.text
    assert f"the profiling window at {limits[1]} W (2 steps) measured 0 J" in err, err
    assert "measuring it again" in err and "raise profile_steps" in err
    # What was written loads back, and the next run starts done.
    assert [m.power_limit for m in load_profile(path)] == limits
    again = GlobalPowerLimitOptimizer(ScriptedMonitor(energy_optimal_at(low)), Energy(), profile_path=path)
    try:
        assert again.state == Done(optimal_power_limit=low * 1000)
    finally:
        again.close()
    assert current_power_limit_w() == high


def test_a_limit_that_never_measures_anything_is_left_out(limits, tmp_path, caplog):
    low = limits[-1]
    monitor = ScriptedMonitor(energy_optimal_at(low, empty=lambda w, attempt: w == low))
    path = tmp_path / "profile.json"
    plo = GlobalPowerLimitOptimizer(monitor, Energy(), wait_steps=0, warmup_steps=0, profile_steps=2, pl_step=50,
                                    profile_path=path)  # fmt: skip
    try:
        run_steps(plo, 3 * (len(limits) + 2) + 1)
        assert isinstance(plo.state, Done)
        assert [m.power_limit for m in plo.measurements] == limits[:-1]
    finally:
        plo.close()
    err = caplog.text
    assert f"at {low} W (2 steps) measured 0 J in" in err and "(3 of 3 tries)" in err, err
    assert "leaving this limit out of the profile" in err
    assert [m.power_limit for m in load_profile(path)] == limits[:-1]


def test_a_bad_entry_is_reported_skipped_and_profiled_again(limits, tmp_path, caplog):
    low, high = limits[-1], limits[0]
    path = tmp_path / "profile.json"
    entries = [{"power_limit": w, "energy": 100.0 + abs(w - low), "time": 1.0} for w in limits]
    entries[1]["energy"] = 0.0  # what an earlier version wrote for a window that measured 0 J
    path.write_text(json.dumps({"measurements": entries}))
    monitor = ScriptedMonitor(energy_optimal_at(low))
    plo = GlobalPowerLimitOptimizer(monitor, Energy(), wait_steps=0, warmup_steps=1, profile_steps=2, pl_step=50,
                                    profile_path=path)  # fmt: skip
    try:
        err = caplog.text
        assert f"power-limit profile {path}: measurement 1: energy (0 J) and time (1 s) must be positive" in err, err
        assert "skipped" in err and f"profiling {limits[1]} W again" in err
        assert not isinstance(plo.state, Done)
        run_steps(plo, 4)  # set, warm up, two profiling steps: only the missing limit
        assert plo.state == Done(optimal_power_limit=low * 1000)
        assert [c for c in monitor.calls if c[0] == "begin"] == [("begin", f"{WINDOW_PREFIX}{limits[1]}")]
        assert [m.power_limit for m in plo.measurements] == limits
    finally:
        plo.close()
    assert [m.power_limit for m in load_profile(path)] == limits  # rewritten, readable
    assert current_power_limit_w() == high


def test_a_file_that_is_not_a_profile_says_to_delete_it(tmp_path):
    path = tmp_path / "profile.json"
    path.write_text("not json")
    with pytest.raises(ValueError, match=rf"{path}: not valid JSON.*delete the file"):
        GlobalPowerLimitOptimizer(ScriptedMonitor(energy_optimal_at(200)), profile_path=path)


def test_save_profile_writes_only_what_loads(tmp_path):
    path = tmp_path / "profile.json"
    with pytest.raises(ValueError, match=r"measurement 1: energy \(0 J\).*nothing is written"):
        save_profile(path, [PowerLimitMeasurement(300, 10.0, 1.0), PowerLimitMeasurement(250, 0.0, 1.0)])
    assert not path.exists()


def test_epochs_too_short_to_profile_are_named_once(caplog):
    monitor = ScriptedMonitor(energy_optimal_at(200))
    plo = GlobalPowerLimitOptimizer(monitor, wait_steps=1, warmup_steps=10, profile_steps=40)
    try:
        for _ in range(4):  # epochs of 30 steps: 1 + 10 + 40 never fit
            run_steps(plo, 30)
            plo.on_epoch_end()
        assert not isinstance(plo.state, Done)
    finally:
        plo.close()
    err = caplog.text
    assert err.count("this epoch had 30 steps, but profiling one power limit needs 51") == 1, err
    assert "(1 + warmup_steps 10 + profile_steps 40)" in err and "Lower warmup_steps and profile_steps" in err
