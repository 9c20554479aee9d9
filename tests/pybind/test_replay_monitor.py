"""zeus_cpp.utils.testing.ReplayZeusMonitor: a ZeusMonitor CSV log played back (the native
monitor::ReplayMonitor), from Python and inside the power-limit optimizer."""

from __future__ import annotations

import time

import pytest

from plo_helpers import WINDOW_PREFIX, power_limit_range_w

from zeus_cpp import _zeus
from zeus_cpp.monitor import Measurement, ZeusMonitor
from zeus_cpp.optimizer.power_limit import Done, Energy, GlobalPowerLimitOptimizer
from zeus_cpp.utils.testing import ReplayZeusMonitor

HEADER = "start_time,window_name,elapsed_time,gpu0_energy,gpu1_energy\n"


def write_log(tmp_path, rows, header=HEADER):
    path = tmp_path / "log.csv"
    path.write_text(header + "".join(rows))
    return path


def test_replays_a_log_that_zeus_monitor_wrote(tmp_path):
    path = tmp_path / "recorded.csv"
    recorder = ZeusMonitor(log_file=path)
    recorded = []
    for name in ("first", "second"):
        recorder.begin_window(name)
        time.sleep(0.02)
        recorded.append(recorder.end_window(name))
    replay = ReplayZeusMonitor(log_file=path)
    assert list(replay.gpu_indices) == list(recorder.gpu_indices)
    assert replay.rows_left == 2
    for name, original in zip(("first", "second"), recorded):
        replay.begin_window(name)
        played = replay.end_window(name)
        assert isinstance(played, Measurement)
        assert played.time == pytest.approx(original.time, rel=1e-6, abs=1e-9)
        for gpu, energy in original.gpu_energy.items():
            assert played.gpu_energy[gpu] == pytest.approx(energy, rel=1e-6, abs=1e-9)
    assert replay.rows_left == 0


def test_rows_cancel_and_the_reference_signature(tmp_path):
    path = write_log(tmp_path, ["1.0,a,2.5,10,20\n", "2.0,b,1.5,30,40\n"])
    replay = ReplayZeusMonitor(gpu_indices=[0, 1], approx_instant_energy=True, log_file=str(path),
                               ignore_sync_execution=True, match_window_name=True)
    assert isinstance(replay, _zeus.WindowMonitor)
    replay.begin_window("a", sync_execution=False)
    cancelled = replay.end_window("a", cancel=True)
    assert cancelled.gpu_energy == {0: 0.0, 1: 0.0}
    assert replay.rows_left == 2
    replay.begin_window("a")
    measurement = replay.end_window("a")
    assert (measurement.time, measurement.gpu_energy) == (2.5, {0: 10.0, 1: 20.0})
    assert "rows_left=1" in repr(replay)


def test_errors_are_the_references(tmp_path):
    path = write_log(tmp_path, ["1.0,a,2.5,10,20\n"])
    with pytest.raises(ValueError, match="log_file"):
        ReplayZeusMonitor()
    with pytest.raises(FileNotFoundError):
        ReplayZeusMonitor(log_file=tmp_path / "absent.csv")
    with pytest.raises(ValueError, match="do not match"):
        ReplayZeusMonitor(gpu_indices=[0], log_file=path)
    with pytest.raises(ValueError, match=r"log\.csv:2"):
        ReplayZeusMonitor(log_file=write_log(tmp_path, ["1.0,a,2.5,10\n"]))

    replay = ReplayZeusMonitor(log_file=write_log(tmp_path, ["1.0,a,2.5,10,20\n"]))
    replay.begin_window("b")
    with pytest.raises(RuntimeError):
        replay.begin_window("b")  # already open
    with pytest.raises(RuntimeError):
        replay.end_window("c")  # never opened
    with pytest.raises(RuntimeError):
        replay.end_window("b")  # the row is "a"
    replay.begin_window("a")
    replay.end_window("a")
    replay.begin_window("a")
    with pytest.raises(RuntimeError):
        replay.end_window("a")  # the log is exhausted

    loose = ReplayZeusMonitor(log_file=write_log(tmp_path, ["1.0,a,2.5,10,20\n"]),
                              match_window_name=False)
    loose.begin_window("anything")
    assert loose.end_window("anything").time == 2.5


def test_drives_the_power_limit_optimizer(tmp_path):
    low, high = power_limit_range_w(0)
    limits = list(range(high, low - 1, -50))
    assert len(limits) >= 3
    best = limits[len(limits) // 2]
    rows = [f"{i}.0,{WINDOW_PREFIX}{w},1.0,{100 + abs(w - best)}\n" for i, w in enumerate(limits)]
    path = write_log(tmp_path, rows, header="start_time,window_name,elapsed_time,gpu0_energy\n")
    replay = ReplayZeusMonitor(log_file=path, ignore_sync_execution=True)
    assert list(replay.gpu_indices) == [0]
    plo = GlobalPowerLimitOptimizer(replay, optimum_selector=Energy(), wait_steps=0,
                                    warmup_steps=0, profile_steps=1, pl_step=50)
    try:
        for _ in range(3 * len(limits)):
            plo.on_step_begin()
        assert isinstance(plo.state, Done)
        assert plo.optimal_power_limit == best * 1000
        assert replay.rows_left == 0
    finally:
        plo.close()
