"""zeus_cpp.metric.PrometheusExporter: /metrics from Python, windows into the histograms."""

from __future__ import annotations

import gc
import re
import socket
import time
import urllib.error
import urllib.request

import pytest

from zeus_cpp.exception import ZeusBaseError
from zeus_cpp.metric import PrometheusExporter
from zeus_cpp.monitor import ZeusMonitor


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return response.read().decode()


def value(text: str, series: str) -> float:
    match = re.search(rf"^{re.escape(series)} (\S+)$", text, re.MULTILINE)
    assert match, f"no sample {series} in:\n{text}"
    return float(match.group(1))


def test_serves_device_metrics_and_window_histograms():
    monitor = ZeusMonitor(gpu_indices=[0, 1], cpu_indices=[])
    with PrometheusExporter(port=0, interval=0.05, monitor=monitor, cpu_indices=[]) as exporter:
        assert exporter.port > 0
        assert exporter.url == f"http://127.0.0.1:{exporter.port}/metrics"
        for _ in range(3):
            exporter.begin_window("step")
            time.sleep(0.02)
            measurement = exporter.end_window("step")
            assert measurement.gpu_energy[0] > 0
        exporter.observe("epoch", measurement)
        time.sleep(0.15)
        text = scrape(exporter.url)
        assert value(text, 'zeus_gpu_energy_joules_total{index="1"}') > 0
        assert value(text, 'zeus_gpu_power_limit_watts{index="0"}') == 250  # V100
        assert value(text, 'energy_monitor_gpu_energy_joules_count{window="step",index="0"}') == 3
        assert value(text, 'zeus_window_duration_seconds_count{window="epoch"}') == 1
        assert '# TYPE energy_monitor_gpu_energy_joules histogram' in text
        assert exporter.render().count("# TYPE zeus_gpu_energy_joules_total counter") == 1
        url = exporter.url
    with pytest.raises(urllib.error.URLError):
        scrape(url)  # closed with the block


def test_custom_buckets_appear_as_le_labels():
    with PrometheusExporter(port=0, gpu_bucket_range=[1, 2.5], cpu_indices=[]) as exporter:
        exporter.observe("w", _one())
        text = exporter.render()
        assert 'energy_monitor_gpu_energy_joules_bucket{window="w",index="0",le="2.5"}' in text


def _one():
    monitor = ZeusMonitor(gpu_indices=[0], cpu_indices=[])
    monitor.begin_window("w")
    return monitor.end_window("w")


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"port": "9464"}, TypeError, "port"),
        ({"port": 70000}, ValueError, "port"),
        ({"interval": 0}, ValueError, "interval"),
        ({"gpu_indices": "0"}, TypeError, "gpu_indices"),
        ({"gpu_bucket_range": []}, ValueError, "gpu_bucket_range"),
        ({"duration_bucket_range": [2, 1]}, ValueError, "duration_bucket_range"),
        ({"monitor": object()}, TypeError, "monitor"),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs, error, words):
    with pytest.raises(error, match=words):
        PrometheusExporter(**{"port": 0, "cpu_indices": [], **kwargs})


def test_unknown_gpu_and_port_in_use_are_zeus_errors():
    with pytest.raises(ZeusBaseError, match="GPU index 7"):
        PrometheusExporter(port=0, gpu_indices=[7], cpu_indices=[])
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    try:
        with pytest.raises(ZeusBaseError, match="already in use"):
            PrometheusExporter(port=holder.getsockname()[1], cpu_indices=[])
    finally:
        holder.close()


def test_observe_and_windows_check_their_arguments():
    with PrometheusExporter(port=0, cpu_indices=[]) as exporter:
        with pytest.raises(TypeError, match="measurement"):
            exporter.observe("w", {"gpu_energy": {0: 1.0}})
        with pytest.raises(TypeError, match="window"):
            exporter.observe(3, _one())
        with pytest.raises(ValueError, match="monitor="):
            exporter.begin_window("w")


class _DuckMonitor:
    """A monitor of the user's own: the reference's method names, fields in a plain object."""

    gpu_indices = [0]

    def __init__(self) -> None:
        self.calls = []

    def begin_window(self, key):
        self.calls.append(("begin", key))

    def end_window(self, key, sync_execution=True):
        self.calls.append(("end", key, sync_execution))
        return type("Plain", (), {"time": 1.5, "gpu_energy": {0: 75.0}})()


def test_any_monitor_with_the_window_methods_is_observed():
    monitor = _DuckMonitor()
    with PrometheusExporter(port=0, monitor=monitor, cpu_indices=[]) as exporter:
        exporter.begin_window("step")
        measurement = exporter.end_window("step")
        assert measurement.gpu_energy == {0: 75.0} and measurement.time == 1.5
        monitor.end_window = lambda key, sync_execution=True: None
        exporter.begin_window("bad")
        with pytest.raises(TypeError, match=r"monitor.end_window\('bad'\) returned NoneType"):
            exporter.end_window("bad")
        text = exporter.render()
        assert value(text, 'energy_monitor_gpu_energy_joules_sum{window="step",index="0"}') == 75.0
    assert monitor.calls[:2] == [("begin", "step"), ("end", "step", True)]


def test_carbon_and_cost_counters_with_providers():
    from zeus_cpp.monitor.carbon import CarbonIntensityProvider, ConstantCarbonIntensity
    from zeus_cpp.monitor.price import ConstantElectricityPrice

    with PrometheusExporter(port=0, interval=0.05, cpu_indices=[],
                            carbon_intensity_provider=ConstantCarbonIntensity(400.0),
                            electricity_price_provider=ConstantElectricityPrice(0.2, "EUR")) as exporter:
        time.sleep(0.4)
        text = scrape(exporter.url)
    joules = value(text, 'zeus_gpu_energy_joules_total{index="0"}')
    grams = value(text, 'zeus_gpu_carbon_emission_grams_total{index="0"}')
    cost = value(text, 'zeus_gpu_energy_cost_total{index="0",currency="EUR"}')
    assert grams > 0
    # Priced at the same reads; the energy may be one read ahead of the pricing.
    assert cost / 0.2 == pytest.approx(grams / 400.0, rel=1e-9)
    assert grams / 400.0 * 3.6e6 <= joules + 1e-6
    assert value(text, "zeus_carbon_intensity_gco2eq_per_kwh") == 400.0
    assert value(text, 'zeus_electricity_price_per_kwh{currency="EUR"}') == 0.2

    class Doubling(CarbonIntensityProvider):
        """A provider written in Python, called from the exporter's reading thread."""

        def intensity_over(self, start, end):
            time.sleep(0.05)  # without the GIL: the exporter is collected meanwhile
            return [(start, end, 800.0)]

    exporter = PrometheusExporter(port=0, interval=0.02, cpu_indices=[],
                                  carbon_intensity_provider=Doubling())
    time.sleep(0.3)
    assert value(exporter.render(), "zeus_carbon_intensity_gco2eq_per_kwh") == 800.0
    del exporter  # collected while its thread may wait for the GIL: must not hang
    gc.collect()

    with pytest.raises(TypeError, match="carbon_intensity_provider must be"):
        PrometheusExporter(port=0, cpu_indices=[], carbon_intensity_provider=400)
    with pytest.raises(TypeError, match="electricity_price_provider must be"):
        PrometheusExporter(port=0, cpu_indices=[], electricity_price_provider="0.2")
