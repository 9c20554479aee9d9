"""PowerMonitor and TemperatureMonitor over a run of days (issue 29, item 2): bounded rows, the
whole run kept (its oldest part compacted), and get_energy answering over any interval.

The monitors' native sampler is swapped for the test hook ``_zeus._manual_power_sampler``: the
same sampler over simulated a100s on a manual clock, driven sweep by sweep by ``_drive`` (no
sleeps), which returns each GPU's exact energy counter at the end of the stretch it drove.
"""

from __future__ import annotations

from typing import List

import pytest

from zeus_cpp import _zeus
from zeus_cpp.monitor import PowerDomain, PowerMonitor
from zeus_cpp.monitor.power import TimelineResolution
from zeus_cpp.monitor.temperature import TemperatureMonitor

HOUR = 3600.0
LOADS = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]  # the a100: 55 W idle to 400 W, whole milliwatts
IDLE_W, BUSY_W = 55.0, 400.0


@pytest.fixture
def manual_samplers(monkeypatch: pytest.MonkeyPatch) -> List[object]:
    created: List[object] = []

    def factory(gpus, domains, period_s, max_samples, temperature=False):  # noqa: ANN001
        sampler = _zeus._manual_power_sampler(
            2, "a100", domains, period_s, max_samples, temperature
        )
        created.append(sampler)
        return sampler

    monkeypatch.setattr(_zeus, "PowerSampler", factory)
    return created


def test_three_days_at_ten_hertz_answer_every_interval(manual_samplers: List[object]) -> None:
    monitor = PowerMonitor(update_period=0.1, power_domains=[PowerDomain.DEVICE_INSTANT])
    (sampler,) = manual_samplers
    truth = [[0.0, 0.0]]  # each GPU's exact energy at every 6 hours
    for _ in range(12):
        truth.append(sampler._drive(6 * HOUR, LOADS, 37.0))
    timelines = monitor.get_power_timeline_array()
    start = timelines[0][0, 0]  # the run's first sample is still the first row

    resolutions = monitor.get_timeline_resolution()
    for gpu in (0, 1):
        resolution = resolutions[gpu]
        assert isinstance(resolution, TimelineResolution)
        assert resolution.rows == len(timelines[gpu]) <= 65536
        assert resolution.exact_since is not None
        # At least the last 32,768 samples (55 minutes at 10 Hz) are exact.
        assert resolution.exact_since <= start + 72 * HOUR - 32768 * 0.1 + 1e-3
        assert 0.0 < resolution.longest_span_s < 60.0
        assert timelines[gpu][0, 0] == pytest.approx(start, abs=1e-6)

    # The whole run: exact. Any 6-hour edges: within the documented bound of each end inside a
    # compacted span, (busy - idle) x longest span / 4; exact once both ends are exact.
    whole = monitor.get_energy(start, start + 72 * HOUR)
    assert whole is not None
    for gpu in (0, 1):
        assert whole[gpu] == pytest.approx(truth[-1][gpu], rel=1e-9, abs=1e-3)
    for first in range(13):
        for last in range(first, 13):
            energy = monitor.get_energy(start + first * 6 * HOUR, start + last * 6 * HOUR)
            assert energy is not None
            for gpu in (0, 1):
                bound = 2 * (BUSY_W - IDLE_W) * resolutions[gpu].longest_span_s / 4 + 1e-3
                assert abs(energy[gpu] - (truth[last][gpu] - truth[first][gpu])) <= bound

    # The rows read as a held signal: the compacted ones hold their span's mean power.
    assert IDLE_W - 1e-6 <= monitor.get_power(start + 24 * HOUR)[0] <= BUSY_W + 1e-6
    monitor.stop()


def test_a_short_run_is_exact_and_says_so(manual_samplers: List[object]) -> None:
    monitor = PowerMonitor(update_period=0.1, power_domains=[PowerDomain.DEVICE_INSTANT],
                           max_samples_per_gpu=1000)
    (sampler,) = manual_samplers
    sampler._drive(60.0, LOADS, 7.0)
    resolution = monitor.get_timeline_resolution(gpu_index=1)
    assert list(resolution) == [1]
    assert resolution[1] == TimelineResolution(exact_since=None, longest_span_s=0.0, rows=600)
    sampler._drive(HOUR, LOADS, 7.0)
    assert monitor.get_timeline_resolution()[1].rows <= 1000
    with pytest.raises(ValueError, match="power_domain"):
        monitor.get_timeline_resolution(PowerDomain.MEMORY_AVERAGE)
    monitor.stop()


def test_temperature_over_two_days_keeps_the_whole_run(manual_samplers: List[object]) -> None:
    monitor = TemperatureMonitor(update_period=1.0, max_samples_per_gpu=64)
    (sampler,) = manual_samplers
    sampler._drive(48 * HOUR, LOADS, 13.0)
    timelines = monitor.get_temperature_timeline()
    resolutions = monitor.get_timeline_resolution()
    for gpu in (0, 1):
        assert len(timelines[gpu]) == resolutions[gpu].rows <= 64
        assert resolutions[gpu].exact_since is not None
        assert resolutions[gpu].longest_span_s > 0
        first_time, first_temperature = timelines[gpu][0]
        assert isinstance(first_temperature, int)
        # The first hours are still answered (a compacted span's rounded mean).
        assert monitor.get_temperature(first_time + HOUR) is not None
    monitor.stop()
