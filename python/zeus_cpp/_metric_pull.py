"""Prometheus pull export: :class:`PrometheusExporter` serves ``/metrics`` from this process.

Imported from :mod:`zeus_cpp.metric` (its home for users; docs/prometheus.md).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from zeus_cpp import _zeus
from zeus_cpp.utils._checks import check_float, check_int

_DEFAULT_GPU_BUCKETS = (50.0, 100.0, 200.0, 500.0, 1000.0)
_DEFAULT_CPU_BUCKETS = (10.0, 50.0, 100.0, 500.0, 1000.0)
_DEFAULT_DRAM_BUCKETS = (5.0, 10.0, 20.0, 50.0, 150.0)
_DEFAULT_DURATION_BUCKETS = (0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0, 1800.0, 3600.0)


def _indices(name: str, value: Any) -> Optional[list[int]]:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a list of int or None, not {type(value).__name__}")
    return [check_int(f"{name}[{i}]", v, minimum=0) for i, v in enumerate(value)]


def _buckets(name: str, value: Any) -> list[float]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a list of numbers, not {type(value).__name__}")
    bounds = [check_float(f"{name}[{i}]", v) for i, v in enumerate(value)]
    if not bounds:
        raise ValueError(f"{name} must not be empty")
    if any(b <= a for a, b in zip(bounds, bounds[1:])):
        raise ValueError(f"{name} must be strictly increasing, got {bounds}")
    return bounds


class PrometheusExporter:
    """Serves ``http://host:port/metrics`` until :meth:`close` (or the end of a ``with`` block).

    Args:
        gpu_indices: GPUs to export (as this process sees them); None: all.
        cpu_indices: RAPL CPU packages to export; None: all that can be read, [] none.
        port: TCP port; 0 picks a free one (see :attr:`port`).
        host: address to listen on; "0.0.0.0" for a Prometheus on another machine.
        interval: seconds between device reads (at least 0.001).
        monitor: a ZeusMonitor for :meth:`begin_window` / :meth:`end_window`.
        gpu_bucket_range, cpu_bucket_range, dram_bucket_range: energy histogram bucket upper
            bounds in joules (the reference's defaults).
        duration_bucket_range: window duration bucket upper bounds in seconds.
        carbon_intensity_provider: a :mod:`zeus_cpp.monitor.carbon` provider: adds the per-device
            carbon emission counters and the intensity gauge (docs/prometheus.md).
        electricity_price_provider: a :mod:`zeus_cpp.monitor.price` provider: adds the per-device
            electricity cost counters and the price gauge.

    Raises:
        TypeError, ValueError: a bad argument (named in the message).
        ZeusGPUInvalidArgError: an unknown GPU index or CPU package.
        ZeusBaseError subclass (OSError-like message): the port is in use or cannot be bound.
    """

    def __init__(
        self,
        gpu_indices: Optional[Sequence[int]] = None,
        cpu_indices: Optional[Sequence[int]] = None,
        port: int = 9464,
        host: str = "127.0.0.1",
        interval: float = 1.0,
        monitor: Any = None,
        gpu_bucket_range: Sequence[float] = _DEFAULT_GPU_BUCKETS,
        cpu_bucket_range: Sequence[float] = _DEFAULT_CPU_BUCKETS,
        dram_bucket_range: Sequence[float] = _DEFAULT_DRAM_BUCKETS,
        duration_bucket_range: Sequence[float] = _DEFAULT_DURATION_BUCKETS,
        *,
        carbon_intensity_provider: Any = None,
        electricity_price_provider: Any = None,
    ) -> None:
        """Start serving (see the class documentation)."""
        port = check_int("port", port, minimum=0)
        if port > 65535:
            raise ValueError(f"port must be at most 65535, got {port}")
        if not isinstance(host, str) or not host:
            raise TypeError(f"host must be a non-empty str, not {host!r}")
        interval = check_float("interval", interval, minimum=0.001)
        if monitor is not None:
            # Any monitor the optimizers take (docs/python.md, "Monitors of your own").
            _zeus._check_window_monitor(monitor, "monitor")
        self._monitor = monitor
        if carbon_intensity_provider is not None and not isinstance(
                carbon_intensity_provider, _zeus.CarbonIntensityProvider):
            raise TypeError(
                "carbon_intensity_provider must be a zeus_cpp.monitor.carbon "
                f"CarbonIntensityProvider, not {type(carbon_intensity_provider).__name__}")
        if electricity_price_provider is not None:
            from zeus_cpp.monitor.price import _as_provider  # imports the monitors: only when used
            electricity_price_provider = _as_provider(electricity_price_provider)
        # Kept alive with the exporter: its reading thread calls them.
        self._providers = (carbon_intensity_provider, electricity_price_provider)
        self._native = _zeus.PrometheusExporter(
            gpu_indices=_indices("gpu_indices", gpu_indices),
            cpu_indices=_indices("cpu_indices", cpu_indices),
            host=host,
            port=port,
            interval=interval,
            gpu_buckets=_buckets("gpu_bucket_range", gpu_bucket_range),
            cpu_buckets=_buckets("cpu_bucket_range", cpu_bucket_range),
            dram_buckets=_buckets("dram_bucket_range", dram_bucket_range),
            duration_buckets=_buckets("duration_bucket_range", duration_bucket_range),
            carbon_intensity_provider=carbon_intensity_provider,
            electricity_price_provider=electricity_price_provider,
        )
        self._closed = False

    @property
    def port(self) -> int:
        """The port listened on (useful with ``port=0``)."""
        return self._native.port

    @property
    def url(self) -> str:
        """``http://host:port/metrics``."""
        return f"http://{self._native.host}:{self._native.port}/metrics"

    def observe(self, window: str, measurement: Any) -> None:
        """Adds a window's measurement (from ``ZeusMonitor.end_window``) to the histograms."""
        if not isinstance(window, str):
            raise TypeError(f"window must be a str, not {type(window).__name__}")
        if not isinstance(measurement, _zeus.Measurement):
            raise TypeError(
                f"measurement must be a Measurement (what ZeusMonitor.end_window returns), "
                f"not {type(measurement).__name__}"
            )
        self._native.observe(window, measurement)

    def begin_window(self, name: str, sync_execution: bool = True) -> None:
        """Begins window `name` on the monitor given at construction."""
        self._require_monitor("begin_window")
        if sync_execution:
            self._monitor.begin_window(name)
        else:
            self._monitor.begin_window(name, sync_execution=False)

    def end_window(self, name: str, sync_execution: bool = True) -> Any:
        """Ends window `name` on the monitor, observes it, and returns its Measurement."""
        self._require_monitor("end_window")
        if sync_execution:
            result = self._monitor.end_window(name)
        else:
            result = self._monitor.end_window(name, sync_execution=False)
        measurement = _zeus._as_measurement(result, f"monitor.end_window({name!r})")
        self.observe(name, measurement)
        return measurement

    def render(self) -> str:
        """What a scrape of /metrics returns now."""
        return self._native.render()

    def close(self) -> None:
        """Stops serving (idempotent)."""
        if not self._closed:
            self._closed = True
            self._native.close()

    def __enter__(self) -> "PrometheusExporter":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _require_monitor(self, method: str) -> None:
        if self._monitor is None:
            raise ValueError(
                f"{method} needs the monitor= argument of PrometheusExporter; "
                "or call observe(name, monitor.end_window(name)) yourself"
            )
