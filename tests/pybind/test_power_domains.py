"""PowerMonitor(power_domains=None) samples every domain the GPUs report, as the reference."""

from __future__ import annotations

import time
from typing import List

import pytest

from zeus_cpp.exception import ZeusGPUNotSupportedError
from zeus_cpp.monitor import PowerDomain, PowerMonitor
from zeus_cpp.monitor import power as power_module


class _NoMemoryPower:
    """The real GPUs, except that memory power is not reported (as before Hopper on NVML)."""

    def __init__(self, gpus: object, unsupported_on: List[int]) -> None:
        self._gpus = gpus
        self._unsupported_on = unsupported_on

    def __len__(self) -> int:
        return len(self._gpus)

    def __getattr__(self, name: str) -> object:
        return getattr(self._gpus, name)

    def get_average_memory_power_usage(self, index: int) -> int:
        if index in self._unsupported_on:
            raise ZeusGPUNotSupportedError(f"GPU {index}: no memory power")
        return self._gpus.get_average_memory_power_usage(index)


def test_default_samples_every_domain() -> None:
    with PowerMonitor(update_period=0.02) as monitor:
        assert monitor.power_domains == list(PowerDomain)
        time.sleep(0.2)
        timelines = monitor.get_all_power_timeline_arrays()
    assert sorted(timelines) == sorted(d.value for d in PowerDomain)
    for domain in PowerDomain:
        per_gpu = timelines[domain.value]
        assert sorted(per_gpu) == monitor.gpu_indices
        for timeline in per_gpu.values():
            assert timeline.shape[0] >= 1
            assert (timeline[:, 1] > 0).all()


def test_default_energy_still_uses_device_instant() -> None:
    with PowerMonitor(gpu_indices=[0], update_period=0.02) as monitor:
        time.sleep(0.2)
        end = time.time()
        energy = monitor.get_energy(end - 0.1, end)
        power = monitor.get_power()
    assert energy is not None and power is not None
    assert energy[0] == pytest.approx(power[0] * 0.1, rel=0.3)


def test_explicit_domains_are_kept() -> None:
    with PowerMonitor(gpu_indices=[1], update_period=0.02,
                      power_domains=[PowerDomain.DEVICE_AVERAGE]) as monitor:
        assert monitor.power_domains == [PowerDomain.DEVICE_AVERAGE]
        with pytest.raises(ValueError, match="is not being monitored"):
            monitor.get_power_timeline(PowerDomain.MEMORY_AVERAGE)


def test_supported_domains_leaves_out_what_a_gpu_cannot_report() -> None:
    from zeus_cpp import _zeus

    gpus = _NoMemoryPower(_zeus.get_gpus(), unsupported_on=[1])
    assert power_module.supported_domains(gpus, [0]) == list(PowerDomain)
    # Every monitored GPU must report a domain for it to be sampled.
    assert power_module.supported_domains(gpus, [0, 1]) == [
        PowerDomain.DEVICE_INSTANT, PowerDomain.DEVICE_AVERAGE
    ]


def test_unsupported_domain_is_left_out_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real = power_module._zeus.get_gpus()
    monkeypatch.setattr(power_module._zeus, "get_gpus", lambda: _NoMemoryPower(real, [0, 1]))
    with PowerMonitor(update_period=0.02) as monitor:
        assert monitor.power_domains == [PowerDomain.DEVICE_INSTANT, PowerDomain.DEVICE_AVERAGE]
        assert sorted(monitor.get_all_power_timelines()) == ["device_average", "device_instant"]
        with pytest.raises(ValueError, match="is not being monitored"):
            monitor.get_power_timeline(PowerDomain.MEMORY_AVERAGE)


def test_bad_gpu_index_is_still_the_samplers_error() -> None:
    with pytest.raises(Exception, match="7"):
        PowerMonitor(gpu_indices=[7], update_period=0.02)
