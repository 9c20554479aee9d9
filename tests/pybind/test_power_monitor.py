"""PowerMonitor: background power sampling; timelines as numpy arrays (get_power_timeline_array;
test_reference_shapes.py: the reference's lists of tuples)."""

from __future__ import annotations

import inspect
import time

import numpy as np
import pytest

from zeus_cpp.exception import ZeusGPUInvalidArgError
from zeus_cpp.monitor import PowerDomain, PowerMonitor


@pytest.fixture(scope="module")
def power_monitor():
    # Only device_instant (the default samples every domain: test_power_domains.py).
    monitor = PowerMonitor(update_period=0.01, power_domains=[PowerDomain.DEVICE_INSTANT])
    time.sleep(0.3)
    yield monitor
    monitor.stop()


def test_signature() -> None:
    assert list(inspect.signature(PowerMonitor).parameters) == [
        "gpu_indices", "update_period", "max_samples_per_gpu", "power_domains"
    ]


def test_timeline_is_a_numpy_array(power_monitor: PowerMonitor) -> None:
    timelines = power_monitor.get_power_timeline_array(PowerDomain.DEVICE_INSTANT)
    assert sorted(timelines) == power_monitor.gpu_indices
    for timeline in timelines.values():
        assert isinstance(timeline, np.ndarray)
        assert timeline.dtype == np.float64
        assert timeline.ndim == 2 and timeline.shape[1] == 2
        assert timeline.shape[0] >= 5
        assert np.all(np.diff(timeline[:, 0]) >= 0)  # sorted by time
        assert np.all(timeline[:, 1] > 0)  # W
        # wall-clock seconds, like time.time()
        assert abs(timeline[-1, 0] - time.time()) < 5.0


def test_timeline_filters(power_monitor: PowerMonitor) -> None:
    full = power_monitor.get_power_timeline_array("device_instant", gpu_index=0)[0]
    middle = full[len(full) // 2, 0]
    later = power_monitor.get_power_timeline_array(gpu_index=0, start_time=middle)[0]
    assert later[0, 0] >= middle
    earlier = power_monitor.get_power_timeline_array(gpu_index=0, end_time=middle)[0]
    assert earlier[-1, 0] <= middle


def test_all_timelines(power_monitor: PowerMonitor) -> None:
    all_timelines = power_monitor.get_all_power_timelines()
    assert list(all_timelines) == ["device_instant"]


def test_energy_and_power(power_monitor: PowerMonitor) -> None:
    end = time.time()
    start = end - 0.2
    energy = power_monitor.get_energy(start, end)
    assert sorted(energy) == power_monitor.gpu_indices
    power = power_monitor.get_power()
    assert power is not None
    for gpu, joules in energy.items():
        # a constant draw: energy = power x time
        assert joules == pytest.approx(power[gpu] * 0.2, rel=0.2)


def test_unsampled_domain_is_a_value_error(power_monitor: PowerMonitor) -> None:
    with pytest.raises(ValueError, match="power_domain"):
        power_monitor.get_power_timeline(PowerDomain.MEMORY_AVERAGE)
    with pytest.raises(ValueError, match="power_domain"):
        power_monitor.get_power_timeline("bogus")


def test_several_domains() -> None:
    with PowerMonitor(
        gpu_indices=[0], update_period=0.01,
        power_domains=[PowerDomain.DEVICE_INSTANT, PowerDomain.DEVICE_AVERAGE],
    ) as monitor:
        time.sleep(0.1)
        timelines = monitor.get_all_power_timelines()
    assert set(timelines) == {"device_instant", "device_average"}
    assert list(timelines["device_average"]) == [0]


def test_bounded_timeline() -> None:
    with PowerMonitor(gpu_indices=[0], update_period=0.002, max_samples_per_gpu=5) as monitor:
        time.sleep(0.1)
        assert len(monitor.get_power_timeline()[0]) <= 5


def test_stop_is_idempotent_and_keeps_data() -> None:
    monitor = PowerMonitor(gpu_indices=[0], update_period=0.01)
    time.sleep(0.05)
    monitor.stop()
    count = len(monitor.get_power_timeline()[0])
    time.sleep(0.05)
    monitor.stop()
    assert len(monitor.get_power_timeline()[0]) == count


def test_inferred_period() -> None:
    with PowerMonitor(gpu_indices=[0]) as monitor:
        assert 0.001 <= monitor.update_period <= 0.1


@pytest.mark.parametrize(
    "kwargs, error, name",
    [
        ({"gpu_indices": []}, ValueError, "gpu_indices"),
        ({"gpu_indices": "0"}, TypeError, "gpu_indices"),
        ({"power_domains": []}, ValueError, "power_domains"),
        ({"power_domains": ["nope"]}, ValueError, "power_domains"),
        ({"power_domains": [3]}, TypeError, "power_domains"),
        ({"update_period": "fast"}, TypeError, "update_period"),
        ({"update_period": -1.0}, ValueError, "update_period"),
        ({"max_samples_per_gpu": 1.5}, TypeError, "max_samples_per_gpu"),
    ],
)
def test_bad_arguments(kwargs: dict, error: type, name: str) -> None:
    with pytest.raises(error, match=name):
        PowerMonitor(**kwargs)


def test_invalid_gpu_index() -> None:
    with pytest.raises(ZeusGPUInvalidArgError):
        PowerMonitor(gpu_indices=[99], update_period=0.01)
