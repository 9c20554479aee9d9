"""Live GPU and CPU power from zeusd daemons over SSE (the reference's
``zeus.monitor.power_streaming``).

:class:`PowerStreamingClient` connects to one or more daemons (:class:`ZeusdConfig`, TCP or
Unix socket) and keeps the latest reading of every streamed device, on the client's clock::

    from zeus_cpp.monitor.power_streaming import PowerStreamingClient
    from zeus_cpp.utils.zeusd import ZeusdConfig

    with PowerStreamingClient([ZeusdConfig.uds("/run/zeusd/zeusd.sock", gpu_indices=[0])]) as c:
        c.get_power()        # {"/run/zeusd/zeusd.sock": PowerReadings(...)}
        for readings in c:   # a snapshot at each update, until stop()
            ...

Each (daemon, device type) has a reader thread on its own connection
(``GET /gpu/stream_power`` or ``/cpu/stream_power``, read by the C++ device layer's
``_zeus._ZeusdEventStream``). A broken or refused stream is reopened after
``reconnect_delay_s``, except on HTTP 401/403, which end that stream with an error in the log;
malformed events are logged as warnings and skipped. :meth:`PowerStreamingClient.stop` (also at
interpreter exit) ends every reader at once, even one waiting on a daemon that never answers.
"""

from __future__ import annotations

import atexit
import json
import logging
import statistics
import threading
import time
import typing
import weakref
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from zeus_cpp import _zeus
from zeus_cpp.exception import ZeusdCapabilityError
from zeus_cpp.utils.zeusd import ZeusdClient, ZeusdConfig

logger = logging.getLogger(__name__)

_V = typing.TypeVar("_V")

# Silence on a stream for this long reopens it (a daemon gone without closing the connection);
# the daemon sends every device's current value on connect, so nothing is lost.
IDLE_TIMEOUT_S = 60.0
# An event longer than this is dropped (with a warning) instead of being buffered.
MAX_EVENT_BYTES = 1 << 20
# How many characters of a bad event a warning quotes.
_QUOTED_CHARS = 100


@dataclass
class CpuPowerReading:
    """One CPU package's power in W (``dram_w`` None without a DRAM reading)."""

    cpu_w: float = 0.0
    dram_w: Optional[float] = None


@dataclass
class PowerReadings:
    """The latest readings of one daemon.

    ``timestamp_s`` is the newest reading's Unix time on this client's clock (the daemon's
    time plus the measured clock offset); ``gpu_power_w`` and ``cpu_power_w`` are keyed by the
    daemon's device ids.
    """

    timestamp_s: float = 0.0
    gpu_power_w: Dict[int, float] = field(default_factory=dict)
    cpu_power_w: Dict[int, CpuPowerReading] = field(default_factory=dict)


# Clients whose readers are still running, stopped at interpreter exit: atexit runs before the
# interpreter tears daemon threads down, so no reader is ever caught inside a native call then.
_LIVE_CLIENTS: "weakref.WeakSet[PowerStreamingClient]" = weakref.WeakSet()


@atexit.register
def _stop_live_clients() -> None:
    for client in list(_LIVE_CLIENTS):
        try:
            client.stop()
        except Exception:  # noqa: BLE001  (exit must go on)
            pass


class PowerStreamingClient:
    """Streams GPU and CPU power from zeusd daemons.

    Args:
        servers: The daemons, each with the devices to stream (``gpu_indices`` /
            ``cpu_indices``: None streams every device the daemon has and may be read with
            the token, silently skipping a type there is none of; ``[]`` streams none; a list
            must name existing devices, else ValueError, and the token must have the scope,
            else ZeusdCapabilityError).
        reconnect_delay_s: Wait before reopening a stream that broke or was refused.

    Raises:
        ValueError: Two servers have the same endpoint, or unknown indices are requested.
        ZeusdConnectionError: A daemon cannot be reached (readers already started for the
            other daemons are stopped).
        ZeusdCapabilityError: See `servers`.
    """

    def __init__(self, servers: Sequence[ZeusdConfig], reconnect_delay_s: float = 1.0) -> None:
        self._servers = list(servers)
        if (
            isinstance(reconnect_delay_s, bool)
            or not isinstance(reconnect_delay_s, (int, float))
            or not 0 <= reconnect_delay_s <= 3600
        ):
            # NaN and inf fail the range too; a day-long wait would only hide a broken stream.
            raise ValueError(
                f"reconnect_delay_s must be a number of seconds from 0 to 3600, not {reconnect_delay_s!r}"
            )
        self._reconnect_delay = float(reconnect_delay_s)
        endpoints = [server.endpoint for server in self._servers]
        duplicates = sorted({e for e in endpoints if endpoints.count(e) > 1})
        if duplicates:
            raise ValueError(f"Duplicate server endpoints: {duplicates}")

        self._lock = threading.Lock()
        self._condition = threading.Condition(self._lock)
        self._readings: Dict[str, PowerReadings] = {}
        self._clock_offsets: Dict[str, float] = {}
        self._daemon_clients: Dict[str, ZeusdClient] = {}
        self._threads: List[threading.Thread] = []
        self._streams: List[Any] = []
        self._stop_event = threading.Event()

        _LIVE_CLIENTS.add(self)
        try:
            for server in self._servers:
                stream_gpu, stream_cpu = self._init_server(server)
                endpoint = server.endpoint
                self._clock_offsets[endpoint] = self._estimate_clock_offset(endpoint)
                if stream_gpu:
                    self._start(server, "GPU", self._process_gpu_event)
                if stream_cpu:
                    self._start(server, "CPU", self._process_cpu_event)
        except BaseException:
            self.stop()
            raise
        if not self._threads:
            logger.warning(
                "No GPU or CPU power streaming threads were started. Check that the zeusd "
                "endpoints have the expected devices available."
            )

    # ---- Access -------------------------------------------------------------------------------

    def get_power(self) -> Dict[str, PowerReadings]:
        """A copy of the latest readings, keyed by endpoint (a daemon appears once it sent)."""
        with self._lock:
            return {
                endpoint: PowerReadings(
                    timestamp_s=reading.timestamp_s,
                    gpu_power_w=dict(reading.gpu_power_w),
                    cpu_power_w={
                        i: CpuPowerReading(cpu_w=r.cpu_w, dram_w=r.dram_w)
                        for i, r in reading.cpu_power_w.items()
                    },
                )
                for endpoint, reading in self._readings.items()
            }

    def __iter__(self) -> Iterator[Dict[str, PowerReadings]]:
        """Yields a :meth:`get_power` snapshot after each update, until :meth:`stop`."""
        while not self._stop_event.is_set():
            with self._condition:
                notified = self._condition.wait(timeout=1.0)
            if self._stop_event.is_set():
                break
            if notified:
                yield self.get_power()

    async def __aiter__(self) -> AsyncIterator[Dict[str, PowerReadings]]:
        """:meth:`__iter__` for asyncio: the waits run in the loop's executor."""
        import asyncio

        loop = asyncio.get_running_loop()
        while not self._stop_event.is_set():
            notified = await loop.run_in_executor(None, self._wait_for_update)
            if self._stop_event.is_set():
                break
            if notified:
                yield self.get_power()

    def _wait_for_update(self) -> bool:
        with self._condition:
            return self._condition.wait(timeout=1.0)

    def stop(self) -> None:
        """Ends every reader (promptly, also one blocked on a silent daemon) and wakes the
        iterators. Idempotent."""
        self._stop_event.set()
        with self._condition:
            self._condition.notify_all()
        for stream in list(getattr(self, "_streams", [])):
            stream.cancel()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=5.0)
        self._threads.clear()
        _LIVE_CLIENTS.discard(self)
        logger.info("All power streaming threads stopped")

    close = stop

    def __enter__(self) -> "PowerStreamingClient":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ---- Setup --------------------------------------------------------------------------------

    def _init_server(self, server: ZeusdConfig) -> Tuple[bool, bool]:
        """Connects to `server` and decides whether to stream its GPUs and its CPUs."""
        client = ZeusdClient(server)
        endpoint = server.endpoint
        self._daemon_clients[endpoint] = client
        stream_gpu = self._resolve_streaming(
            server.gpu_indices, set(client.gpu_ids), client.can_read_gpu, "gpu-read", "GPU",
            endpoint,
        )  # fmt: skip
        stream_cpu = self._resolve_streaming(
            server.cpu_indices, set(client.cpu_ids), client.can_read_cpu, "cpu-read", "CPU",
            endpoint,
        )  # fmt: skip
        return stream_gpu, stream_cpu

    @staticmethod
    def _resolve_streaming(
        user_indices: Optional[List[int]],
        available_ids: set,
        has_permission: bool,
        scope_name: str,
        device_type: str,
        endpoint: str,
    ) -> bool:
        if user_indices is not None:
            if not user_indices:
                return False
            missing = set(user_indices) - available_ids
            if missing:
                raise ValueError(
                    f"{device_type} indices {sorted(missing)} requested for {endpoint} but only "
                    f"{sorted(available_ids)} are available"
                )
            if not has_permission:
                raise ZeusdCapabilityError(
                    f"Token for {endpoint} lacks required scope '{scope_name}' (explicitly "
                    f"requested {device_type.lower()}_indices={list(user_indices)})"
                )
            return True
        if not available_ids:
            logger.info("No %ss available on %s; skipping %s power streaming", device_type,
                        endpoint, device_type)  # fmt: skip
            return False
        if not has_permission:
            logger.info("Token for %s lacks '%s' scope; skipping %s streaming", endpoint,
                        scope_name, device_type)  # fmt: skip
            return False
        return True

    def _estimate_clock_offset(self, endpoint: str, num_samples: int = 5) -> float:
        """Median over `num_samples` ``GET /time`` round trips of (client time at the round
        trip's midpoint - daemon time), in s: add it to daemon timestamps."""
        client = self._daemon_clients[endpoint]
        offsets = []
        for _ in range(num_samples):
            before_s = time.time()
            daemon_s = client.get_time()
            after_s = time.time()
            offsets.append((before_s + after_s) / 2.0 - daemon_s)
        offset = statistics.median(offsets)
        logger.info("Clock offset for %s: %.4f s (median of %d samples)", endpoint, offset,
                    num_samples)  # fmt: skip
        return offset

    def _start(self, server: ZeusdConfig, label: str,
               process_fn: Callable[[str, str], None]) -> None:
        endpoint = server.endpoint
        indices = server.gpu_indices if label == "GPU" else server.cpu_indices
        path = "/gpu/stream_power" if label == "GPU" else "/cpu/stream_power"
        if indices is not None:
            path += ("?gpu_ids=" if label == "GPU" else "?cpu_ids=") + ",".join(
                str(i) for i in indices
            )
        stream = _zeus._ZeusdEventStream(
            idle_timeout_s=IDLE_TIMEOUT_S,
            max_event_bytes=MAX_EVENT_BYTES,
            **server._transport_args(),
        )
        self._streams.append(stream)
        thread = threading.Thread(
            target=self._stream_loop,
            args=(stream, path, endpoint, process_fn, label),
            name=f"{label.lower()}-power-stream-{endpoint}",
            daemon=True,
        )
        thread.start()
        self._threads.append(thread)
        logger.info("Started %s power streaming thread for %s", label, endpoint)

    # ---- Reader threads -----------------------------------------------------------------------

    def _stream_loop(self, stream: Any, path: str, endpoint: str,
                     process_fn: Callable[[str, str], None], label: str) -> None:
        """Reads one stream until stop(), reopening it after a break."""

        def on_event(raw: bytes) -> None:
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                logger.warning("Invalid UTF-8 in %s SSE event from %s: %r", label, endpoint,
                               raw[:_QUOTED_CHARS])  # fmt: skip
                return
            try:
                process_fn(text, endpoint)
            except Exception:  # noqa: BLE001  (a bad event must not end the stream)
                logger.warning("Cannot process %s SSE event from %s: %s", label, endpoint,
                               text[:_QUOTED_CHARS], exc_info=True)  # fmt: skip

        def on_oversized(size: int) -> None:
            logger.warning("Dropped a %d-byte %s SSE event from %s (more than %d bytes)", size,
                           label, endpoint, MAX_EVENT_BYTES)  # fmt: skip

        while not self._stop_event.is_set():
            logger.info("Connecting to SSE at %s%s", endpoint, path)
            end, status, body, error = stream.run(path, on_event, on_oversized)
            if end == "cancelled" or self._stop_event.is_set():
                return
            text = body.decode("utf-8", errors="replace")
            if end == "refused" and status in (401, 403):
                logger.error("%s SSE connection to %s failed with HTTP %d: %s", label, endpoint,
                             status, text)  # fmt: skip
                return
            if end == "idle":
                logger.info("%s SSE stream from %s was silent (%s); reconnecting", label,
                            endpoint, error)  # fmt: skip
                continue
            if end == "refused":
                logger.warning("%s SSE connection to %s rejected (HTTP %d: %s), reconnecting in "
                               "%.1fs", label, endpoint, status, text[:200],
                               self._reconnect_delay)  # fmt: skip
            elif end == "ended":
                logger.info("%s SSE stream from %s ended, reconnecting in %.1fs", label,
                            endpoint, self._reconnect_delay)  # fmt: skip
            else:
                logger.warning("%s SSE connection to %s lost (%s: %s), reconnecting in %.1fs",
                               label, endpoint, end, error, self._reconnect_delay)  # fmt: skip
            self._stop_event.wait(timeout=self._reconnect_delay)

    def _iter_event_data(self, event_text: str, endpoint: str,
                         device: str) -> Iterator[Tuple[str, Dict[str, Any]]]:
        """(raw JSON, object) of each ``data: `` line of one event; other lines are ignored."""
        for line in event_text.strip().split("\n"):
            if not line.startswith("data: "):
                continue
            data_str = line[len("data: "):]
            try:
                data = json.loads(data_str)
            except ValueError:
                logger.warning("Invalid JSON in %s SSE event from %s: %s", device, endpoint,
                               data_str[:_QUOTED_CHARS])  # fmt: skip
                continue
            if not isinstance(data, dict):
                logger.warning("Malformed %s SSE event from %s: %s", device, endpoint,
                               data_str[:_QUOTED_CHARS])  # fmt: skip
                continue
            yield data_str, data

    def _store_reading(self, endpoint: str, timestamp_s: float,
                       device_dict: Callable[[PowerReadings], Dict[int, _V]], device_id: int,
                       value: _V) -> None:
        with self._condition:
            readings = self._readings.get(endpoint)
            if readings is None:
                readings = PowerReadings(timestamp_s=timestamp_s)
                self._readings[endpoint] = readings
            else:
                readings.timestamp_s = max(readings.timestamp_s, timestamp_s)
            device_dict(readings)[device_id] = value
            self._condition.notify_all()

    def _process_gpu_event(self, event_text: str, endpoint: str) -> None:
        """One GPU event: ``{"timestamp_ms": N, "gpu_id": N, "power_mw": N}``."""
        for data_str, data in self._iter_event_data(event_text, endpoint, "GPU"):
            try:
                gpu_id = _integer(data["gpu_id"])
                power_w = _number(data["power_mw"]) / 1000.0
                timestamp_s = _number(data["timestamp_ms"]) / 1000.0 + self._clock_offsets[endpoint]
            except (KeyError, TypeError, ValueError):
                logger.warning("Malformed GPU SSE event from %s: %s", endpoint,
                               data_str[:_QUOTED_CHARS])  # fmt: skip
                continue
            self._store_reading(endpoint, timestamp_s, lambda r: r.gpu_power_w, gpu_id, power_w)

    def _process_cpu_event(self, event_text: str, endpoint: str) -> None:
        """One CPU event: ``{"timestamp_ms": N, "cpu_id": N, "cpu_mw": N, "dram_mw": N|null}``."""
        for data_str, data in self._iter_event_data(event_text, endpoint, "CPU"):
            try:
                cpu_id = _integer(data["cpu_id"])
                cpu_w = _number(data["cpu_mw"]) / 1000.0
                dram_mw = data.get("dram_mw")
                dram_w = None if dram_mw is None else _number(dram_mw) / 1000.0
                timestamp_s = _number(data["timestamp_ms"]) / 1000.0 + self._clock_offsets[endpoint]
            except (KeyError, TypeError, ValueError):
                logger.warning("Malformed CPU SSE event from %s: %s", endpoint,
                               data_str[:_QUOTED_CHARS])  # fmt: skip
                continue
            reading = CpuPowerReading(cpu_w=cpu_w, dram_w=dram_w)
            self._store_reading(endpoint, timestamp_s, lambda r: r.cpu_power_w, cpu_id, reading)


def _integer(value: Any) -> int:
    """An id: an int, or a string or float holding one (never a bool)."""
    if isinstance(value, bool):
        raise TypeError("a boolean is not an id")
    number = float(value)
    if not number.is_integer():
        raise ValueError(f"{value!r} is not an integer")
    return int(number)


def _number(value: Any) -> float:
    """A finite number (never a bool)."""
    if isinstance(value, bool) or value is None:
        raise TypeError(f"{value!r} is not a number")
    number = float(value)
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError(f"{value!r} is not finite")
    return number
