"""Which GlobalPowerLimitOptimizer restores the maximum power limit when several manage the same
GPU: re-running a notebook cell (`plo = GlobalPowerLimitOptimizer(...)` again) makes the new one
before the old one is collected, and collecting the old one must not undo the new one's limit.
A limit someone else set since is left alone too."""

from __future__ import annotations

import gc
import json
import textwrap

import pytest

from plo_helpers import current_power_limit_w, power_limit_range_w

from zeus_cpp.device import get_gpus
from zeus_cpp.monitor import ZeusMonitor
from zeus_cpp.optimizer.power_limit import Done, Energy, GlobalPowerLimitOptimizer


def write_profile(path, optimum_w, low_w, high_w):
    """A profile whose energy is lowest at `optimum_w`."""
    limits = sorted({high_w, optimum_w, low_w}, reverse=True)
    measurements = [
        {"power_limit": w, "energy": 100.0 + abs(w - optimum_w), "time": 1.0 + (high_w - w) / 100}
        for w in limits
    ]
    path.write_text(json.dumps({"measurements": measurements}))


@pytest.fixture
def profile(tmp_path):
    low, high = power_limit_range_w(0)
    optimum = high - 75
    path = tmp_path / "profile.json"
    write_profile(path, optimum, low, high)
    return path, optimum, high


def test_rebinding_the_variable_keeps_the_new_optimizers_limit(profile):
    path, optimum, high = profile
    monitor = ZeusMonitor(gpu_indices=[0])
    plo = GlobalPowerLimitOptimizer(monitor, Energy(), profile_path=path)
    assert current_power_limit_w() == optimum
    plo = GlobalPowerLimitOptimizer(monitor, Energy(), profile_path=path)  # the cell, re-run
    gc.collect()
    assert plo.state == Done(optimal_power_limit=optimum * 1000)
    assert current_power_limit_w() == optimum  # was reset to the maximum by the old one
    plo.close()
    assert current_power_limit_w() == high  # the last one restores


def test_closing_the_newer_first_keeps_the_limit_until_the_last_goes(profile):
    path, optimum, high = profile
    monitor = ZeusMonitor(gpu_indices=[0])
    older = GlobalPowerLimitOptimizer(monitor, Energy(), profile_path=path)
    newer = GlobalPowerLimitOptimizer(monitor, Energy(), profile_path=path)
    newer.close()
    assert current_power_limit_w() == optimum
    older.close()
    assert current_power_limit_w() == high


def test_other_gpus_are_restored_as_before(profile):
    path, optimum, high = profile
    on_gpu0 = GlobalPowerLimitOptimizer(ZeusMonitor(gpu_indices=[0]), Energy(), profile_path=path)
    on_gpu1 = GlobalPowerLimitOptimizer(ZeusMonitor(gpu_indices=[1]), Energy(), profile_path=path)
    assert current_power_limit_w(1) == optimum
    del on_gpu1
    gc.collect()
    assert current_power_limit_w(1) == high  # nobody else manages GPU 1
    assert current_power_limit_w(0) == optimum
    on_gpu0.close()
    assert current_power_limit_w(0) == high


def test_a_limit_changed_by_someone_else_is_left_alone(profile):
    path, optimum, high = profile
    plo = GlobalPowerLimitOptimizer(ZeusMonitor(gpu_indices=[0]), Energy(), profile_path=path)
    assert current_power_limit_w() == optimum
    get_gpus().set_power_management_limit(0, (optimum + 25) * 1000)  # nvidia-smi -pl, say
    plo.close()
    assert current_power_limit_w() == optimum + 25
    get_gpus().set_power_management_limit(0, high * 1000)


def test_at_exit_two_live_optimizers_leave_the_maximum(profile, python_runner):
    path, optimum, high = profile
    code = textwrap.dedent(
        f"""
        import atexit
        from zeus_cpp.device import get_gpus
        # Registered first, so it runs after the optimizers' own exit handlers.
        atexit.register(lambda: print("at exit", get_gpus().get_power_management_limit(0)))
        from zeus_cpp.monitor import ZeusMonitor
        from zeus_cpp.optimizer.power_limit import Energy, GlobalPowerLimitOptimizer
        monitor = ZeusMonitor(gpu_indices=[0])
        first = GlobalPowerLimitOptimizer(monitor, Energy(), profile_path={str(path)!r})
        second = GlobalPowerLimitOptimizer(monitor, Energy(), profile_path={str(path)!r})
        print("running", get_gpus().get_power_management_limit(0))
        """
    )
    out = python_runner(code).split("\n")
    assert f"running {optimum * 1000}" in out
    assert f"at exit {high * 1000}" in out
