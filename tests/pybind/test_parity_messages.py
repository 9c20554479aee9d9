"""Reference-parity messages (issue 18, difference 5): a zero-energy window is a
warnings.warn UserWarning, and duplicate/unknown windows and unmonitored power domains raise the
reference's ValueError with the reference's wording."""

from __future__ import annotations

import warnings

import pytest

from zeus_cpp.monitor import PowerDomain, PowerMonitor, ZeusMonitor


def _zero_energy_window(monitor: ZeusMonitor):
    # A window of a few microseconds: the simulated V100's counter does not tick in it.
    for _ in range(50):
        monitor.begin_window("tiny", sync_execution=False)
        measurement = monitor.end_window("tiny", sync_execution=False)
        if any(e == 0.0 for e in measurement.gpu_energy.values()):
            return measurement
    pytest.skip("no zero-energy window on this machine")


def test_zero_energy_window_is_a_python_warning():
    monitor = ZeusMonitor(gpu_indices=[0], cpu_indices=[], sync_execution_with=lambda i: None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _zero_energy_window(monitor)
    messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert any("approx_instant_energy" in m and "zero" in m for m in messages), messages


def test_zero_energy_warning_can_be_an_error():
    monitor = ZeusMonitor(gpu_indices=[0], cpu_indices=[], sync_execution_with=lambda i: None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="approx_instant_energy"):
            _zero_energy_window(monitor)
    assert monitor.open_windows() == []


def test_no_warning_with_approx_or_cancel():
    approx = ZeusMonitor(gpu_indices=[0], cpu_indices=[], approx_instant_energy=True,
                         sync_execution_with=lambda i: None)
    plain = ZeusMonitor(gpu_indices=[0], cpu_indices=[], sync_execution_with=lambda i: None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(20):
            approx.begin_window("w")
            approx.end_window("w")
            plain.begin_window("c")
            plain.end_window("c", cancel=True)


def test_window_messages_are_the_references():
    monitor = ZeusMonitor(gpu_indices=[0], cpu_indices=[], sync_execution_with=lambda i: None)
    monitor.begin_window("w")
    with pytest.raises(ValueError, match=r"^Measurement window 'w' already exists.*restart=True"):
        monitor.begin_window("w")
    with pytest.raises(ValueError, match=r"^Measurement window 'x' does not exist \(open windows: 'w'\)"):
        monitor.end_window("x")
    monitor.end_window("w")


def test_unmonitored_domain_and_gpu_messages():
    power = PowerMonitor(gpu_indices=[0], power_domains=[PowerDomain.DEVICE_INSTANT],
                         update_period=0.05)
    try:
        with pytest.raises(ValueError, match="is not being monitored. Available domains"):
            power.get_power_timeline(PowerDomain.MEMORY_AVERAGE)
        with pytest.raises(ValueError, match="GPU index 1 is not being monitored"):
            power.get_power_timeline(gpu_index=1)
    finally:
        power.stop()
