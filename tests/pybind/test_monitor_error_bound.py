"""Issue 29: every Measurement carries its GPU energy's error bound (an addition beside the
reference's fields, which stay as they are), ZeusMonitor.cross_check compares counter and power,
and the zero-energy warning path stays the reference's while costing little."""

from __future__ import annotations

import dataclasses
import pickle
import warnings
from unittest import mock

import pytest

from zeus_cpp import _zeus
from zeus_cpp.monitor import Measurement, ZeusMonitor

# The simulated V100s of conftest (2:v100) are ideal sensors (an exact integral, read in whole
# millijoules): |error| <= 1 mJ. A real GPU's bound adds its counter's refresh period at its peak
# draw (tests/monitor/measurement_error_test.cpp).
V100_BOUND_J = 0.001


def _monitor(**kwargs) -> ZeusMonitor:
    return ZeusMonitor(cpu_indices=[], sync_execution_with=lambda i: None, **kwargs)


def test_a_window_carries_each_gpus_error_bound() -> None:
    monitor = _monitor()
    monitor.begin_window("w")
    measurement = monitor.end_window("w")
    assert measurement.gpu_energy_error == {0: pytest.approx(V100_BOUND_J),
                                            1: pytest.approx(V100_BOUND_J)}
    # A fresh dict on each read: changing it changes nothing.
    measurement.gpu_energy_error[0] = -1.0
    assert measurement.gpu_energy_error[0] == pytest.approx(V100_BOUND_J)


def test_the_references_fields_are_unchanged() -> None:
    monitor = _monitor(gpu_indices=[0])
    monitor.begin_window("w")
    measurement = monitor.end_window("w")
    assert [f.name for f in dataclasses.fields(measurement)] == [
        "time", "gpu_energy", "cpu_energy", "dram_energy", "soc_energy"]
    assert "gpu_energy_error" not in dataclasses.asdict(measurement)
    assert "gpu_energy_error" not in repr(measurement)
    same = Measurement(measurement.time, dict(measurement.gpu_energy))
    assert same == measurement  # the bound is not compared
    copied = dataclasses.replace(measurement)
    assert copied.gpu_energy_error is None  # made by hand: its error is unknown
    assert pickle.loads(pickle.dumps(measurement)).gpu_energy_error is None


def test_measurements_made_otherwise_have_no_bound() -> None:
    assert Measurement(1.0, {0: 5.0}).gpu_energy_error is None
    monitor = _monitor(gpu_indices=[0])
    monitor.begin_window("w")
    assert monitor.end_window("w", cancel=True).gpu_energy_error is None
    with pytest.raises(AttributeError):
        Measurement(1.0, {0: 5.0}).gpu_energy_error = {0: 1.0}


def test_cross_check_agrees_on_the_simulated_gpus() -> None:
    monitor = _monitor()
    checks = monitor.cross_check(duration_s=0.2, poll_period_s=0.01)
    assert [check["gpu_index"] for check in checks] == [0, 1]
    for check in checks:
        assert check["trust"] == "counter"
        assert not check["disagrees"], check
        assert check["duration_s"] >= 0.2
        assert check["power_samples"] >= 2
        assert set(check) == {"gpu_index", "duration_s", "counter_energy_j", "power_energy_j",
                              "power_samples", "difference", "disagrees", "trust", "reason"}
    with pytest.raises(ValueError):
        monitor.cross_check(duration_s=0.0)


# ---- The zero-energy warning (the hot path of windows shorter than the counter's refresh) ----


def _zero_windows(monitor, count: int) -> int:
    zeros = 0
    for _ in range(count):
        monitor.begin_window("tiny", sync_execution=False)
        measurement = monitor.end_window("tiny", sync_execution=False)
        zeros += any(energy == 0.0 for energy in measurement.gpu_energy.values())
    return zeros


def _frozen_monitor(cls=_zeus.ZeusMonitor):
    # Simulated GPUs on a clock that never moves: every window measures 0 J.
    monitor = cls.__new__(cls)
    _zeus.ZeusMonitor.__init__(monitor, None, [], False, None, None, _zeus._benchmark_gpus(2))
    return monitor


@pytest.mark.parametrize("cls", [_zeus.ZeusMonitor, ZeusMonitor])
def test_every_zero_window_calls_warnings_warn_as_the_reference(cls) -> None:
    monitor = _frozen_monitor(cls)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _zero_windows(monitor, 5) == 5
    assert len(caught) == 5
    assert all(w.category is UserWarning and "approx_instant_energy" in str(w.message)
               for w in caught)
    assert all(w.filename == __file__ for w in caught)  # attributed to the caller's line
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        _zero_windows(monitor, 5)
    assert len(caught) == 1  # Python's default filter: once per line


def test_a_patched_warnings_warn_sees_the_zero_energy_warning() -> None:
    monitor = _frozen_monitor()
    with mock.patch("warnings.warn") as warn:
        _zero_windows(monitor, 3)
    assert warn.call_count == 3
    assert warn.call_args.args[1] is UserWarning


def test_an_approximating_attribute_silences_the_warning() -> None:
    monitor = _frozen_monitor(ZeusMonitor)
    monitor.approx_instant_energy = True
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _zero_windows(monitor, 3)

    class Broken(ZeusMonitor):
        @property
        def approx_instant_energy(self):
            raise RuntimeError("unreadable")

    broken = _frozen_monitor(Broken)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _zero_windows(broken, 2)
    assert len(caught) == 2  # an attribute that cannot be read does not approximate
