"""TemperatureMonitor (zeus_cpp.monitor.temperature): the reference's API over the C++ sampler's
temperature channel, on simulated GPUs (changes are kept once; the C++ tests drive the load)."""

from __future__ import annotations

import gc
import inspect
import threading
import time

import pytest

from zeus_cpp.device import get_gpus
from zeus_cpp.monitor import TemperatureMonitor as Exported
from zeus_cpp.monitor.temperature import TemperatureMonitor, TemperatureSample


def wait_for_reading(monitor: TemperatureMonitor, timeout_s: float = 5.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        reading = monitor.get_temperature()
        if reading is not None:
            return reading
        time.sleep(0.005)
    raise AssertionError("no temperature reading")


def test_signatures_are_the_references() -> None:
    assert Exported is TemperatureMonitor  # zeus.monitor exports it too
    assert list(inspect.signature(TemperatureMonitor).parameters) == [
        "gpu_indices", "update_period", "max_samples_per_gpu"
    ]
    assert [p.default for p in inspect.signature(TemperatureMonitor).parameters.values()] == [
        None, 1.0, None
    ]
    assert list(inspect.signature(TemperatureMonitor.get_temperature_timeline).parameters) == [
        "self", "gpu_index", "start_time", "end_time"
    ]
    assert list(inspect.signature(TemperatureMonitor.get_temperature).parameters) == ["self", "time"]
    sample = TemperatureSample(timestamp=1.0, gpu_index=0, temperature_c=40)
    assert (sample.timestamp, sample.gpu_index, sample.temperature_c) == (1.0, 0, 40)


def test_readings_match_the_gpus_and_only_changes_are_kept() -> None:
    gpus = get_gpus()
    with TemperatureMonitor(update_period=0.005) as monitor:
        assert monitor.gpu_indices == list(range(len(gpus)))
        assert monitor.update_period == pytest.approx(0.005)
        before = time.time()
        reading = wait_for_reading(monitor)
        time.sleep(0.1)  # about 20 more sweeps of an unchanging (idle) temperature
        assert reading == {i: gpus.get_gpu_temperature(i) for i in monitor.gpu_indices}
        timelines = monitor.get_temperature_timeline()
        assert sorted(timelines) == monitor.gpu_indices
        for index, timeline in timelines.items():
            assert len(timeline) == 1, timeline  # the idle GPU never changed
            stamp, celsius = timeline[0]
            assert isinstance(celsius, int) and celsius == reading[index]
            assert before - 1.0 <= stamp <= time.time()  # time.time() seconds
        stamp = timelines[0][0][0]
        assert monitor.get_temperature(stamp + 10.0) == reading  # the last change holds
        assert monitor.get_temperature(stamp - 10.0) is None  # before any reading
        assert monitor.get_temperature_timeline(gpu_index=0, start_time=stamp + 1.0) == {0: []}
        assert monitor.get_temperature_timeline(gpu_index=1) == {1: timelines[1]}
    # Stopped: what was collected stays.
    assert monitor.get_temperature() == reading
    monitor.stop()  # idempotent


def test_a_gpu_subset() -> None:
    monitor = TemperatureMonitor(gpu_indices=[1], update_period=0.01)
    try:
        assert monitor.gpu_indices == [1]
        assert list(wait_for_reading(monitor)) == [1]
        with pytest.raises(ValueError, match=r"GPU index 0 is not being monitored"):
            monitor.get_temperature_timeline(gpu_index=0)
    finally:
        monitor.stop()


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (dict(gpu_indices=[]), ValueError, "must be either `None` or non-empty"),
        (dict(gpu_indices=[99]), ValueError, "99"),
        (dict(gpu_indices="0"), TypeError, "gpu_indices"),
        (dict(update_period=0), ValueError, "update_period must be a positive"),
        (dict(update_period=-1.0), ValueError, "update_period must be a positive"),
        (dict(update_period=float("nan")), ValueError, "update_period must be a positive"),
        (dict(update_period="1"), TypeError, "update_period"),
        (dict(update_period=0.0001), ValueError, "below the minimum of 1 ms"),
        (dict(update_period=float("inf")), ValueError, "above the maximum of 86400 s"),
        (dict(update_period=1e12), ValueError, "above the maximum of 86400 s"),
        (dict(max_samples_per_gpu=0), ValueError, "max_samples_per_gpu must be positive"),
        (dict(max_samples_per_gpu=1.5), TypeError, "max_samples_per_gpu"),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs, error, message) -> None:
    with pytest.raises(error, match=message):
        TemperatureMonitor(**kwargs)


def test_bad_query_arguments() -> None:
    with TemperatureMonitor(update_period=0.01) as monitor:
        with pytest.raises(TypeError, match="gpu_index"):
            monitor.get_temperature_timeline(gpu_index="0")
        with pytest.raises(TypeError, match="start_time"):
            monitor.get_temperature_timeline(start_time="now")
        with pytest.raises(TypeError, match="time"):
            monitor.get_temperature(time="now")


def test_garbage_collection_stops_the_thread() -> None:
    threads_before = threading.active_count()
    monitor = TemperatureMonitor(update_period=0.001)
    wait_for_reading(monitor)
    del monitor
    gc.collect()
    # The sampler's thread is a C++ thread (not in threading's count); the monitor must simply
    # go away without hanging, and Python's threads are untouched.
    assert threading.active_count() == threads_before
