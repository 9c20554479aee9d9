"""Prometheus push export: the reference's ``zeus.metric`` classes, pushed to a Pushgateway
(:class:`EnergyHistogram`, :class:`EnergyCumulativeCounter`, :class:`PowerGauge`).

Imported from :mod:`zeus_cpp.metric` (its home for users; docs/prometheus.md).
"""

from __future__ import annotations

import abc
import math
import numbers
import urllib.error
import warnings
from typing import Any, Mapping, Optional, Sequence

from zeus_cpp import _zeus
from zeus_cpp._metric_pull import _buckets
from zeus_cpp.utils._checks import check_float, check_int


class PushgatewayError(urllib.error.URLError):
    """A push to the Pushgateway failed: unreachable, timed out, or refused with an HTTP status.

    The message names the group URL and, for a refusal, the status and the gateway's answer. A
    subclass of ``urllib.error.URLError`` (so an ``OSError``), what the reference's
    ``push_to_gateway`` raises, so that ``except URLError`` written for the reference still works.
    """

    def __str__(self) -> str:
        return str(self.reason)


class _UnknownWindowError(ValueError, KeyError):
    """end_window for a window that is not open: a ValueError (the reference's class for the
    counter) that is also a KeyError (what the reference's PowerGauge raised)."""

    def __str__(self) -> str:
        return str(self.args[0])


class Metric(abc.ABC):
    """The reference's base: a metric measured over named windows."""

    @abc.abstractmethod
    def begin_window(self, name: str, sync_execution: bool = True) -> None:
        """Begins window `name` (after the GPUs' queued work when `sync_execution`)."""

    @abc.abstractmethod
    def end_window(self, name: str, sync_execution: bool = True) -> Any:
        """Ends window `name` and reports it."""


def _index_list(name: str, value: Any) -> Optional[list[int]]:
    # Not zeus_cpp.monitor's check: importing that package needs numpy, which PowerGauge and
    # EnergyCumulativeCounter do not.
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(f"{name} must be a list of int or None, not {type(value).__name__}")
    indices = [check_int(f"{name}[{i}]", v, minimum=0) for i, v in enumerate(value)]
    if len(set(indices)) != len(indices):
        raise ValueError(f"{name} lists an index twice: {indices}")
    return indices


def _push_target(pushgateway_url: Any, job: Any, grouping_key: Any, timeout: Any):
    if not isinstance(pushgateway_url, str):
        raise TypeError(f"pushgateway_url must be a str, not {type(pushgateway_url).__name__}")
    if not isinstance(job, str):
        raise TypeError(f"job must be a str, not {type(job).__name__}")
    if not job:
        raise ValueError("job must not be empty (any other text, '/' included, is fine)")
    grouping: list[tuple[str, str]] = []
    if grouping_key is not None:
        if not isinstance(grouping_key, Mapping):
            raise TypeError(f"grouping_key must be a dict, not {type(grouping_key).__name__}")
        grouping = [(str(k), str(v)) for k, v in grouping_key.items()]
    timeout = check_float("timeout", timeout, positive=True)
    # Connecting to a gateway that is up takes milliseconds; a longer wait means it is down.
    return pushgateway_url, job, grouping, min(timeout, 5.0), timeout


def _update_period(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"update_period must be a number of seconds, not {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value) or not 0.001 <= value <= 86400:
        raise ValueError(
            f"update_period must be a finite number of seconds from 0.001 to 86400 (one day), got {value}"
        )
    return value


def _histogram_buckets(what: str, name: str, value: Any) -> list[float]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a list of numbers, not {type(value).__name__}")
    if len(value) == 0:
        raise ValueError(
            f"{what} bucket range cannot be empty. Please provide a valid range or omit the "
            "argument to use defaults."
        )
    return _buckets(name, value)


def _sync(sync_execution: bool, gpu_indices: Optional[Sequence[int]]) -> None:
    if sync_execution:
        from zeus_cpp.utils.framework import sync_execution as sync_execution_fn

        if gpu_indices is None:
            from zeus_cpp.device import get_gpus

            gpu_indices = list(range(len(get_gpus())))
        sync_execution_fn(gpu_indices)


class EnergyHistogram(Metric):
    """Energy of each window as Prometheus histograms, pushed to a Pushgateway at every end.

    Families (labels ``window`` = the name given, ``index`` = the device): ``energy_monitor_gpu_energy_joules``,
    ``energy_monitor_cpu_energy_joules``, ``energy_monitor_dram_energy_joules`` (and
    ``zeus_window_duration_seconds``), every window observed so far, PUT to the group ``job``.

    Args:
        cpu_indices, gpu_indices: devices to measure (None: all, [] none), as ZeusMonitor.
        pushgateway_url: ``http://host:port`` (a bare ``host:port`` means http).
        job: the job label of the pushed series (any non-empty text).
        gpu_bucket_range, cpu_bucket_range, dram_bucket_range: bucket upper bounds in joules,
            strictly increasing (the reference's defaults).
        grouping_key: more grouping labels (e.g. ``{"instance": "node1"}``); an extension.
        timeout: seconds a push may take (the reference's 30 s).

    Raises:
        ValueError: an empty bucket list (the reference's message), a malformed URL, an empty job.

    A window whose push fails raises :class:`PushgatewayError` from :meth:`end_window`, as the
    reference does; the observation is kept, so the next successful push carries it.
    """

    def __init__(
        self,
        cpu_indices: Optional[Sequence[int]],
        gpu_indices: Optional[Sequence[int]],
        pushgateway_url: str,
        job: str,
        gpu_bucket_range: Sequence[float] = [50.0, 100.0, 200.0, 500.0, 1000.0],
        cpu_bucket_range: Sequence[float] = [10.0, 50.0, 100.0, 500.0, 1000.0],
        dram_bucket_range: Sequence[float] = [5.0, 10.0, 20.0, 50.0, 150.0],
        *,
        grouping_key: Optional[Mapping[str, str]] = None,
        timeout: float = 30.0,
    ) -> None:
        from zeus_cpp.monitor import ZeusMonitor  # here: zeus_cpp.monitor need not import this

        self.gpu_bucket_range = _histogram_buckets("GPU", "gpu_bucket_range", gpu_bucket_range)
        self.cpu_bucket_range = _histogram_buckets("CPU", "cpu_bucket_range", cpu_bucket_range)
        self.dram_bucket_range = _histogram_buckets("DRAM", "dram_bucket_range", dram_bucket_range)
        self.cpu_indices = _index_list("cpu_indices", cpu_indices)
        self.gpu_indices = _index_list("gpu_indices", gpu_indices)
        url, job, grouping, connect_timeout, timeout = _push_target(
            pushgateway_url, job, grouping_key, timeout
        )
        self.pushgateway_url = url
        self.job = job
        self._native = _zeus.PushgatewayHistograms(
            url=url,
            job=job,
            grouping=grouping,
            gpu_buckets=self.gpu_bucket_range,
            cpu_buckets=self.cpu_bucket_range,
            dram_buckets=self.dram_bucket_range,
            connect_timeout=connect_timeout,
            timeout=timeout,
        )
        self.min_gpu_bucket, self.max_gpu_bucket = self.gpu_bucket_range[0], self.gpu_bucket_range[-1]
        self.min_cpu_bucket, self.max_cpu_bucket = self.cpu_bucket_range[0], self.cpu_bucket_range[-1]
        self.min_dram_bucket, self.max_dram_bucket = (
            self.dram_bucket_range[0],
            self.dram_bucket_range[-1],
        )
        self.energy_monitor = ZeusMonitor(cpu_indices=self.cpu_indices, gpu_indices=self.gpu_indices)

    @property
    def group_url(self) -> str:
        """The URL pushed to (``<pushgateway_url>/metrics/job/<job>...``)."""
        return self._native.group_url

    def begin_window(self, name: str, sync_execution: bool = True) -> None:
        """Begins the monitor's window ``__EnergyHistogram_<name>``."""
        self.energy_monitor.begin_window(f"__EnergyHistogram_{name}", sync_execution=sync_execution)

    def end_window(self, name: str, sync_execution: bool = True) -> Any:
        """Ends the window, observes each device's energy, pushes, and returns the Measurement.

        Warns (UserWarning) for an energy outside the bucket range; raises PushgatewayError when
        the push fails (after observing)."""
        measurement = self.energy_monitor.end_window(
            f"__EnergyHistogram_{name}", sync_execution=sync_execution
        )
        gpu = dict(measurement.gpu_energy or {})
        cpu = dict(measurement.cpu_energy or {})
        dram = dict(measurement.dram_energy or {})
        self._native.observe(name, float(measurement.time), gpu, cpu, dram)
        for what, energies, low, high in (
            ("GPU", gpu, self.min_gpu_bucket, self.max_gpu_bucket),
            ("CPU", cpu, self.min_cpu_bucket, self.max_cpu_bucket),
            ("DRAM", dram, self.min_dram_bucket, self.max_dram_bucket),
        ):
            for index, joules in energies.items():
                if joules > high:
                    warnings.warn(
                        f"{what} {index} energy {joules} J exceeds the maximum bucket value of "
                        f"{high}",
                        stacklevel=2,
                    )
                elif joules < low:
                    warnings.warn(
                        f"{what} {index} energy {joules} J is below the minimum bucket value of "
                        f"{low}",
                        stacklevel=2,
                    )
        error = self._native.push()
        if error is not None:
            raise PushgatewayError(error)
        return measurement

    def render(self) -> str:
        """The body the next push sends."""
        return self._native.render()


class _PeriodicPush(Metric):
    """What EnergyCumulativeCounter and PowerGauge share: a native pusher whose one thread samples
    every open window each period and pushes; a failed push warns at end_window, never raises."""

    _kind = ""
    _native: Any
    _closed = False

    def _duplicate(self, name: str) -> str:
        return f"{self._kind} window '{name}' is already open; end it first"

    def _unknown(self, name: str) -> str:
        return f"No active monitoring process found for '{name}'."

    def _begin(self, name: str, sync_execution: bool) -> None:
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, not {type(name).__name__}")
        if self._closed:
            raise RuntimeError(f"this {self._kind} was closed; create a new one")
        if name in self._native.open_windows():
            raise ValueError(self._duplicate(name))
        _sync(sync_execution, self.gpu_indices)
        stats = self._native.stats()
        self._failures_at_begin[name] = (stats["pushes"], stats["failures"])
        self._native.begin_window(name)

    def _end(self, name: str, sync_execution: bool) -> None:
        if name not in self._native.open_windows():
            raise _UnknownWindowError(self._unknown(name))
        _sync(sync_execution, self.gpu_indices)
        self._native.end_window(name)
        pushes_0, failures_0 = self._failures_at_begin.pop(name, (0, 0))
        stats = self._native.stats()
        failed = stats["failures"] - failures_0
        if failed > 0:
            warnings.warn(
                f"{failed} of {stats['pushes'] - pushes_0} pushes to {self._native.group_url} "
                f"failed during window '{name}' (measuring went on); last: {stats['last_error']}",
                RuntimeWarning,
                stacklevel=3,
            )

    @property
    def update_period(self) -> float:
        """Seconds between samples (and pushes)."""
        return self._native.period

    @property
    def group_url(self) -> str:
        """The URL pushed to."""
        return self._native.group_url

    def open_windows(self) -> list[str]:
        """The windows being pushed now."""
        return list(self._native.open_windows())

    @property
    def window_state(self) -> dict[str, None]:
        """{open window: None}: the reference's per-window process states, whose keys are the
        open windows (here one thread serves them all, so there is no per-window state)."""
        return dict.fromkeys(self._native.open_windows())

    def push_stats(self) -> dict:
        """Pushes attempted and failed so far, device reads that failed, and the last error."""
        return dict(self._native.stats())

    def render(self) -> str:
        """The body the next push sends."""
        return self._native.render()

    def close(self) -> None:
        """Stops the thread at once without a final push (also what garbage collection does);
        the object cannot begin windows afterwards."""
        self._closed = True
        self._native.close()


class EnergyCumulativeCounter(_PeriodicPush):
    """Energy since each window began as Prometheus counters, pushed every ``update_period`` s.

    Families (labels ``window``, ``index``): ``energy_monitor_gpu_energy_joules_total``,
    ``energy_monitor_cpu_energy_joules_total``, ``energy_monitor_dram_energy_joules_total``. One
    C++ thread per object measures every open window (a ZeusMonitor window
    ``__EnergyCumulativeCounter_<name>`` restarted each period) and PUTs to the group ``job``.
    ``end_window`` samples once more, pushes, stops the thread when no window is left and returns
    within a push. A failed push is retried next period and reported by a RuntimeWarning at
    ``end_window``.

    Raises:
        ValueError: update_period not a finite number from 0.001 to 86400 s, a malformed URL, an empty job;
            ZeusGPUInvalidArgError / ZeusCPU...Error for devices that cannot be measured.
    """

    _kind = "EnergyCumulativeCounter"

    def __init__(
        self,
        cpu_indices: Optional[Sequence[int]],
        gpu_indices: Optional[Sequence[int]],
        update_period: float,
        pushgateway_url: str,
        job: str,
        *,
        grouping_key: Optional[Mapping[str, str]] = None,
        timeout: float = 30.0,
    ) -> None:
        self.cpu_indices = _index_list("cpu_indices", cpu_indices)
        self.gpu_indices = _index_list("gpu_indices", gpu_indices)
        period = _update_period(update_period)
        url, job, grouping, connect_timeout, timeout = _push_target(
            pushgateway_url, job, grouping_key, timeout
        )
        self.pushgateway_url = url
        self.job = job
        self._failures_at_begin: dict[str, tuple[int, int]] = {}
        self._native = _zeus.EnergyCounterPusher(
            gpu_indices=self.gpu_indices,
            cpu_indices=self.cpu_indices,
            period=period,
            url=url,
            job=job,
            grouping=grouping,
            connect_timeout=connect_timeout,
            timeout=timeout,
        )

    def begin_window(self, name: str, sync_execution: bool = False) -> None:
        """Starts counting window `name` (the thread starts with the first open window)."""
        self._begin(name, sync_execution)

    def end_window(self, name: str, sync_execution: bool = False) -> None:
        """Counts the window's last period, pushes, and forgets the window."""
        self._end(name, sync_execution)

    def value(self, kind: str, name: str, index: int) -> Optional[float]:
        """Joules counted so far for an open window; kind is "gpu", "cpu" or "dram"."""
        return self._native.value(kind, name, index)


class PowerGauge(_PeriodicPush):
    """GPU power during each window as a Prometheus gauge, pushed every ``update_period`` s.

    Family ``power_monitor_gpu_power_watts{window,index}``: each GPU's instant power, read by one
    C++ thread per object (no PowerMonitor, no sample history) and PUT to the group ``job``. A
    second ``begin_window`` of an open name raises ValueError, as the reference does.
    """

    _kind = "PowerGauge"

    def __init__(
        self,
        gpu_indices: Optional[Sequence[int]],
        update_period: float,
        pushgateway_url: str,
        job: str,
        *,
        grouping_key: Optional[Mapping[str, str]] = None,
        timeout: float = 30.0,
    ) -> None:
        self.gpu_indices = _index_list("gpu_indices", gpu_indices)
        period = _update_period(update_period)
        url, job, grouping, connect_timeout, timeout = _push_target(
            pushgateway_url, job, grouping_key, timeout
        )
        self.pushgateway_url = url
        self.job = job
        self._failures_at_begin: dict[str, tuple[int, int]] = {}
        self._native = _zeus.PowerGaugePusher(
            gpu_indices=self.gpu_indices,
            period=period,
            url=url,
            job=job,
            grouping=grouping,
            connect_timeout=connect_timeout,
            timeout=timeout,
        )

    def _duplicate(self, name: str) -> str:
        return f"PowerGauge metric '{name}' already exists."

    def begin_window(self, name: str, sync_execution: bool = False) -> None:
        """Starts pushing the GPUs' power under window `name`."""
        self._begin(name, sync_execution)

    def end_window(self, name: str, sync_execution: bool = False) -> None:
        """Pushes the window's last power reading and stops pushing it."""
        self._end(name, sync_execution)

    def value(self, name: str, index: int) -> Optional[float]:
        """The watts last read for GPU `index` in an open window."""
        return self._native.value(name, index)
