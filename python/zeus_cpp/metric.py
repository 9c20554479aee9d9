"""Prometheus export: pull (``/metrics`` served from this process) and push (Pushgateway).

Pull, :class:`PrometheusExporter`: serves the window histograms (``energy_monitor_gpu_energy_joules``
etc., labels ``window`` and ``index``) plus the devices' energy counters, power, power limits and
temperatures, for Prometheus to scrape:

    from zeus_cpp.metric import PrometheusExporter
    from zeus_cpp.monitor import ZeusMonitor

    monitor = ZeusMonitor()
    with PrometheusExporter(port=9464, monitor=monitor) as exporter:
        for epoch in range(epochs):
            exporter.begin_window("epoch")
            train_one_epoch()
            exporter.end_window("epoch")      # observed into the histograms

or, with windows measured elsewhere: ``exporter.observe("step", monitor.end_window("step"))``.

Push, the reference's ``zeus.metric`` classes with its signatures: :class:`EnergyHistogram`
(pushed at every ``end_window``), :class:`EnergyCumulativeCounter` and :class:`PowerGauge`
(pushed every ``update_period`` seconds by one C++ thread per object, not a subprocess):

    from zeus_cpp.metric import EnergyHistogram, PowerGauge

    histogram = EnergyHistogram(cpu_indices=[0], gpu_indices=[0], job="train",
                                pushgateway_url="http://localhost:9091")
    power = PowerGauge(gpu_indices=[0], update_period=1, job="train-power",
                       pushgateway_url="http://localhost:9091")
    power.begin_window("epoch")
    histogram.begin_window("step"); train_one_step(); histogram.end_window("step")
    power.end_window("epoch")

Each object PUTs its whole state to the group ``job`` (plus ``grouping_key``): give objects
that push at the same time different jobs (or grouping keys), as with the reference. Metric names,
failure behaviour and units: docs/prometheus.md.
"""

from __future__ import annotations

from zeus_cpp._metric_pull import PrometheusExporter
from zeus_cpp._metric_push import (
    EnergyCumulativeCounter,
    EnergyHistogram,
    Metric,
    PowerGauge,
    PushgatewayError,
)

__all__ = [
    "Metric",
    "EnergyHistogram",
    "EnergyCumulativeCounter",
    "PowerGauge",
    "PushgatewayError",
    "PrometheusExporter",
]

# The classes live in zeus_cpp._metric_pull (pull) and zeus_cpp._metric_push (push); they are
# zeus_cpp.metric's, as before the split (repr, pickling, help()).
for _public in (Metric, EnergyHistogram, EnergyCumulativeCounter, PowerGauge, PushgatewayError,
                PrometheusExporter):  # fmt: skip
    _public.__module__ = __name__
del _public
