"""The optimizers take any monitor with the window methods, as the reference's do: a class of the
user's own (duck-typed, not deriving from anything of ours), a ZeusMonitor subclass overriding
begin_window/end_window (the C++ optimizer must call the override, not the native method), and a
unittest.mock MagicMock(spec=ZeusMonitor)."""

from __future__ import annotations

import dataclasses
from unittest import mock

import pytest

from plo_helpers import WINDOW_PREFIX, current_power_limit_w, power_limit_range_w

from zeus_cpp import _zeus
from zeus_cpp.monitor import Measurement, ZeusMonitor
from zeus_cpp.optimizer.power_limit import Done, Energy, GlobalPowerLimitOptimizer


@dataclasses.dataclass
class PlainMeasurement:
    """The reference's Measurement fields, in a class of the user's own."""

    time: float
    gpu_energy: dict


class DuckMonitor:
    """A monitor of the user's own: the reference's method names and the fewest parameters."""

    def __init__(self, optimum_w: int, gpu_indices=(0,)) -> None:
        self.gpu_indices = list(gpu_indices)
        self.optimum_w = optimum_w
        self.calls: list[tuple] = []

    def begin_window(self, key, sync_execution=True):
        self.calls.append(("begin", key, sync_execution))

    def end_window(self, key, sync_execution=True, cancel=False):
        self.calls.append(("cancel" if cancel else "end", key, sync_execution))
        watts = int(key[len(WINDOW_PREFIX):]) if key.startswith(WINDOW_PREFIX) else 0
        energy = 100.0 + abs(watts - self.optimum_w)
        return PlainMeasurement(time=1.0, gpu_energy={i: energy for i in self.gpu_indices})


def run_until_done(plo, limit=10_000):
    for _ in range(limit):
        if isinstance(plo.state, Done):
            return
        plo.on_step_begin()
        plo.on_step_end()
    raise AssertionError(f"not done after {limit} steps: {plo.state}")


def test_a_duck_typed_monitor_drives_the_power_limit_optimizer():
    low, high = power_limit_range_w(0)
    optimum = high - 50
    monitor = DuckMonitor(optimum)
    plo = GlobalPowerLimitOptimizer(monitor, optimum_selector=Energy(), warmup_steps=1,
                                    profile_steps=2)  # fmt: skip
    try:
        run_until_done(plo)
        assert plo.state == Done(optimal_power_limit=optimum * 1000)
        assert current_power_limit_w() == optimum
        ends = [call for call in monitor.calls if call[0] == "end"]
        assert ends and all(call[1].startswith(WINDOW_PREFIX) for call in ends)
        assert ends[0] == ("end", f"{WINDOW_PREFIX}{high}", True)
    finally:
        plo.close()


class CountingZeusMonitor(ZeusMonitor):
    """A ZeusMonitor subclass that overrides the window methods and counts the calls."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.begun: list[str] = []
        self.ended: list[str] = []

    def begin_window(self, key, sync_execution=True, restart=False):
        self.begun.append(key)
        return super().begin_window(key, sync_execution, restart)

    def end_window(self, key, sync_execution=True, cancel=False):
        self.ended.append(key)
        return super().end_window(key, sync_execution, cancel)


def test_a_zeus_monitor_subclass_override_is_called_not_bypassed():
    monitor = CountingZeusMonitor(gpu_indices=[0], approx_instant_energy=True)
    plo = GlobalPowerLimitOptimizer(monitor, warmup_steps=1, profile_steps=2)
    try:
        run_until_done(plo)
        # Every window the C++ optimizer opened went through the Python override.
        assert monitor.begun and monitor.begun == monitor.ended
        assert all(key.startswith(WINDOW_PREFIX) for key in monitor.begun)
    finally:
        plo.close()


def test_the_roundtrip_through_cxx_calls_each_kind_of_monitor():
    duck = DuckMonitor(200, gpu_indices=[1])
    indices, measurement = _zeus._window_roundtrip(duck, "plain")
    assert indices == [1]
    assert isinstance(measurement, Measurement)
    assert measurement.gpu_energy == {1: 300.0} and measurement.time == 1.0
    assert duck.calls == [("begin", "plain", True), ("end", "plain", True)]

    counting = CountingZeusMonitor(gpu_indices=[0], approx_instant_energy=True)
    _zeus._window_roundtrip(counting, "native")
    assert counting.begun == ["native"] and counting.ended == ["native"]

    plain = ZeusMonitor(gpu_indices=[0])  # the native path: nothing overridden
    indices, measurement = _zeus._window_roundtrip(plain, "fast")
    assert indices == [0] and 0 in measurement.gpu_energy


def test_a_magicmock_with_the_zeus_monitor_spec_is_accepted():
    monitor = mock.MagicMock(spec=ZeusMonitor)
    monitor.gpu_indices = [0]
    monitor.end_window.return_value = Measurement(time=2.0, gpu_energy={0: 50.0})
    plo = GlobalPowerLimitOptimizer(monitor, warmup_steps=1, profile_steps=2)
    try:
        run_until_done(plo)
        assert monitor.begin_window.call_args_list[0] == mock.call(
            f"{WINDOW_PREFIX}{power_limit_range_w(0)[1]}")
        assert monitor.end_window.called
    finally:
        plo.close()


def test_a_cancelled_window_passes_cancel_to_the_monitor():
    duck = DuckMonitor(200)
    plo = GlobalPowerLimitOptimizer(duck, warmup_steps=1, profile_steps=5)
    try:
        for _ in range(4):  # into the first measurement
            plo.on_step_begin()
        plo.on_epoch_end()  # interrupts it: the window is cancelled
        assert any(call[0] == "cancel" for call in duck.calls), duck.calls
    finally:
        plo.close()


@pytest.mark.parametrize("monitor", [object(), 42, "monitor", None])
def test_an_object_without_window_methods_is_a_type_error(monitor):
    with pytest.raises(TypeError, match="monitor must be a monitor: an object with begin_window"):
        GlobalPowerLimitOptimizer(monitor)


class BadResult(DuckMonitor):
    def __init__(self, result) -> None:
        super().__init__(200)
        self.result = result

    def end_window(self, key, sync_execution=True, cancel=False):
        return self.result


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (None, r"end_window\('k'\) returned NoneType: a Measurement"),
        (PlainMeasurement(time=float("nan"), gpu_energy={0: 1.0}), "time must be a finite"),
        (PlainMeasurement(time=-1.0, gpu_energy={0: 1.0}), "time must be a finite"),
        (PlainMeasurement(time=True, gpu_energy={0: 1.0}), "time must be a finite"),
        (PlainMeasurement(time=1.0, gpu_energy=[1.0]), "gpu_energy must be a dict"),
        (PlainMeasurement(time=1.0, gpu_energy={"0": 1.0}), "keys must be device indices"),
        (PlainMeasurement(time=1.0, gpu_energy={0: "lots"}), r"gpu_energy\[0\] must be a finite"),
        (PlainMeasurement(time=1.0, gpu_energy={0: float("inf")}), "must be a finite number"),
    ],
)
def test_a_bad_end_window_result_names_what_is_wrong(result, message):
    with pytest.raises(TypeError, match=message):
        _zeus._window_roundtrip(BadResult(result), "k")


def test_bad_gpu_indices_name_the_attribute():
    duck = BadResult(PlainMeasurement(time=1.0, gpu_energy={0: 1.0}))
    duck.gpu_indices = "zero"
    with pytest.raises(TypeError, match=r"gpu_indices must be a list of GPU indices"):
        _zeus._window_roundtrip(duck, "k")


def test_exceptions_from_the_monitor_propagate_unchanged():
    class Failing(DuckMonitor):
        def begin_window(self, key, sync_execution=True):
            raise RuntimeError("the monitor's own failure")

    with pytest.raises(RuntimeError, match="the monitor's own failure"):
        _zeus._window_roundtrip(Failing(200), "k")
