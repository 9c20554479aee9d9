"""zeus_cpp.monitor.power_streaming.PowerStreamingClient against our real zeusd (readings, clock
offset, index selection, a daemon killed mid-stream and restarted, a 401 that ends a stream) and
against hostile peers (streams that never answer, huge and malformed events)."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import threading
import time
from typing import Callable

import pytest

from zeus_cpp.exception import ZeusdCapabilityError, ZeusdConnectionError
from zeus_cpp.monitor.power_streaming import CpuPowerReading, PowerReadings, PowerStreamingClient
from zeusd_daemon import (  # noqa: F401  (daemons: a fixture)
    StubServer,
    daemons,
    discover_body,
    reply,
    sse,
    time_route,
)

LOGGER = "zeus_cpp.monitor.power_streaming"


def wait_for(condition: Callable[[], bool], timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def stream_threads(client: PowerStreamingClient) -> list:
    return [thread.name for thread in client._threads]


# ---- Against our daemon ---------------------------------------------------------------------


@pytest.mark.parametrize("tcp", [False, True], ids=["uds", "tcp"])
def test_readings_and_clock_offset(daemons, tcp: bool) -> None:
    daemon = daemons(tcp=tcp)
    endpoint = daemon.config().endpoint
    with PowerStreamingClient([daemon.config()]) as client:
        assert abs(client._clock_offsets[endpoint]) < 1.0  # same machine, same clock
        assert sorted(stream_threads(client)) == [f"cpu-power-stream-{endpoint}",
                                                  f"gpu-power-stream-{endpoint}"]  # fmt: skip

        def complete() -> bool:
            reading = client.get_power().get(endpoint)
            return reading is not None and sorted(reading.gpu_power_w) == [0, 1] and 0 in (
                reading.cpu_power_w
            )

        assert wait_for(complete), client.get_power()
        reading = client.get_power()[endpoint]
        assert isinstance(reading, PowerReadings)
        assert all(watts > 0 for watts in reading.gpu_power_w.values())
        assert isinstance(reading.cpu_power_w[0], CpuPowerReading)
        assert reading.cpu_power_w[0].dram_w is not None  # the package has a DRAM zone
        assert abs(reading.timestamp_s - time.time()) < 5
        # A copy: changing it changes nothing inside.
        reading.gpu_power_w.clear()
        assert client.get_power()[endpoint].gpu_power_w
        # The iterator yields a snapshot at an update (the CPU stream reports every 100 ms).
        for snapshot in client:
            assert endpoint in snapshot
            break
    assert client._threads == []


def test_indices_select_devices(daemons) -> None:
    daemon = daemons()
    endpoint = daemon.config().endpoint
    with PowerStreamingClient([daemon.config(gpu_indices=[1], cpu_indices=[])]) as client:
        assert stream_threads(client) == [f"gpu-power-stream-{endpoint}"]
        assert wait_for(lambda: endpoint in client.get_power())
        time.sleep(0.3)
        assert list(client.get_power()[endpoint].gpu_power_w) == [1]
        assert client.get_power()[endpoint].cpu_power_w == {}
    with pytest.raises(ValueError, match=r"GPU indices \[7\] requested for .* only \[0, 1\]"):
        PowerStreamingClient([daemon.config(gpu_indices=[0, 7])])
    with pytest.raises(ValueError, match="Duplicate server endpoints"):
        PowerStreamingClient([daemon.config(), daemon.config(gpu_indices=[0])])


def test_a_daemon_without_cpu_read(daemons, caplog: pytest.LogCaptureFixture) -> None:
    daemon = daemons(enable="gpu-read")
    endpoint = daemon.config().endpoint
    with caplog.at_level(logging.INFO, logger=LOGGER):
        with PowerStreamingClient([daemon.config()]) as client:  # cpu_indices=None: skipped
            assert stream_threads(client) == [f"gpu-power-stream-{endpoint}"]
    assert "No CPUs available" in caplog.text
    with PowerStreamingClient([daemon.config(gpu_indices=[], cpu_indices=[])]) as client:
        assert client._threads == []


def test_a_token_without_the_scope(daemons) -> None:
    daemon = daemons(auth=True)
    config = daemon.config(token=daemon.token("gpu-read"))
    with PowerStreamingClient([config]) as client:  # cpu_indices=None: CPUs silently skipped
        assert stream_threads(client) == [f"gpu-power-stream-{config.endpoint}"]
    with pytest.raises(ZeusdCapabilityError, match="lacks required scope 'cpu-read'"):
        PowerStreamingClient([daemon.config(token=daemon.token("gpu-read"), cpu_indices=[0])])


def test_an_unreachable_daemon_stops_the_readers_already_started(daemons, tmp_path) -> None:
    daemon = daemons()
    before = set(threading.enumerate())
    from zeus_cpp.utils.zeusd import ZeusdConfig

    with pytest.raises(ZeusdConnectionError):
        PowerStreamingClient([daemon.config(), ZeusdConfig.uds(str(tmp_path / "absent.sock"))])
    assert wait_for(lambda: not [t for t in set(threading.enumerate()) - before
                                 if "power-stream" in t.name], 5)  # fmt: skip


def test_a_daemon_killed_mid_stream_is_reconnected(daemons, caplog) -> None:
    daemon = daemons()
    endpoint = daemon.config().endpoint
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        with PowerStreamingClient([daemon.config()], reconnect_delay_s=0.2) as client:
            assert wait_for(lambda: endpoint in client.get_power())
            daemon.kill()
            time.sleep(0.5)  # reconnect attempts fail meanwhile
            restarted_s = time.time()
            daemon.start()
            assert wait_for(lambda: client.get_power()[endpoint].timestamp_s > restarted_s), (
                client.get_power()
            )
            assert all(thread.is_alive() for thread in client._threads)
    assert "reconnecting in 0.2s" in caplog.text


def test_a_401_ends_the_stream(daemons, caplog) -> None:
    daemon = daemons(auth=True)
    endpoint = daemon.config().endpoint
    config = daemon.config(token=daemon.token("gpu-read", "cpu-read"))
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        with PowerStreamingClient([config], reconnect_delay_s=0.1) as client:
            assert wait_for(lambda: endpoint in client.get_power())
            # The daemon comes back with another key: the token is refused from then on.
            daemon.kill()
            daemon.new_signing_key()
            daemon.start()
            assert wait_for(lambda: not any(t.is_alive() for t in client._threads)), caplog.text
    assert "GPU SSE connection to" in caplog.text and "failed with HTTP 401" in caplog.text
    assert "CPU SSE connection to" in caplog.text


# ---- Hostile peers -------------------------------------------------------------------------------


def stub_with_stream(stream_route) -> StubServer:
    return StubServer({
        "/discover": lambda handler: reply(handler, 200, discover_body()),
        "/time": time_route,
        "/gpu/stream_power": stream_route,
    })  # fmt: skip


def test_stop_is_prompt_while_a_stream_never_answers() -> None:
    never = threading.Event()
    stub = stub_with_stream(lambda handler: never.wait(30))
    try:
        client = PowerStreamingClient([stub.config()])
        assert wait_for(lambda: "/gpu/stream_power" in stub.requests, 5)
        start = time.monotonic()
        client.stop()
        assert time.monotonic() - start < 2.0
        assert client._threads == []
    finally:
        never.set()
        stub.close()


def test_interpreter_exit_never_hangs_on_a_reader() -> None:
    never = threading.Event()
    stub = stub_with_stream(lambda handler: never.wait(60))
    try:
        script = textwrap.dedent(f"""
            from zeus_cpp.monitor.power_streaming import PowerStreamingClient
            from zeus_cpp.utils.zeusd import ZeusdConfig
            client = PowerStreamingClient([ZeusdConfig.tcp("127.0.0.1", {stub.port})])
            print("started", flush=True)
            # no stop(): the interpreter exits with the reader blocked in the stream
        """)
        start = time.monotonic()
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              timeout=30, env=_child_env())  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "started" in done.stdout
        assert time.monotonic() - start < 15
    finally:
        never.set()
        stub.close()


def _child_env() -> dict:
    import os

    import zeus_cpp

    package_parent = os.path.dirname(os.path.dirname(zeus_cpp.__file__))
    return dict(os.environ, PYTHONPATH=package_parent)


def test_malformed_events_warn_and_good_ones_count(caplog: pytest.LogCaptureFixture) -> None:
    import zeus_cpp.monitor.power_streaming as module

    now_ms = int(time.time() * 1000)
    good = b'data: {"timestamp_ms": %d, "gpu_id": 0, "power_mw": 123000}\n\n' % now_ms
    chunks = [
        b"data: " + b"x" * (module.MAX_EVENT_BYTES + 10),  # huge and unterminated...
        b"y" * 1000 + b"\n\n",                             # ...ended here
        b"data: \xff\xfe{}\n\n",                           # not UTF-8
        b"data: {not json\n\n",
        b"data: [1, 2]\n\n",
        b'data: {"gpu_id": 0, "power_mw": 5}\n\n',         # no timestamp
        b'data: {"timestamp_ms": 1, "gpu_id": true, "power_mw": 5}\n\n',
        b'data: {"timestamp_ms": 1, "gpu_id": 0, "power_mw": "NaN"}\n\n',
        b"event: ignored\nid: 3\n\n",                      # no data line: nothing to do
        good,
    ]
    stub = stub_with_stream(lambda handler: sse(handler, chunks, then_wait=stub.release))
    try:
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            with PowerStreamingClient([stub.config()]) as client:
                endpoint = stub.config().endpoint
                assert wait_for(lambda: endpoint in client.get_power()), caplog.text
                reading = client.get_power()[endpoint]
                assert reading.gpu_power_w == {0: 123.0}
                assert abs(reading.timestamp_s - now_ms / 1000.0) < 1.0
        text = caplog.text
        assert "Dropped a" in text and "byte GPU SSE event" in text
        assert "Invalid UTF-8 in GPU SSE event" in text
        assert "Invalid JSON in GPU SSE event" in text
        assert text.count("Malformed GPU SSE event") == 4
    finally:
        stub.close()


def test_a_refused_stream_is_retried() -> None:
    stub = stub_with_stream(lambda handler: reply(handler, 500, '{"error": "busy"}'))
    try:
        with PowerStreamingClient([stub.config()], reconnect_delay_s=0.05):
            assert wait_for(lambda: stub.requests.count("/gpu/stream_power") >= 3, 10)
    finally:
        stub.close()


def test_a_stream_that_ends_is_reopened() -> None:
    now_ms = int(time.time() * 1000)
    event = b'data: {"timestamp_ms": %d, "gpu_id": 0, "power_mw": 1000}\n\n' % now_ms
    stub = stub_with_stream(lambda handler: sse(handler, [event]))
    try:
        with PowerStreamingClient([stub.config()], reconnect_delay_s=0.05) as client:
            assert wait_for(lambda: stub.requests.count("/gpu/stream_power") >= 3, 10)
            assert client.get_power()[stub.config().endpoint].gpu_power_w == {0: 1.0}
    finally:
        stub.close()


def test_a_silent_stream_is_reopened(monkeypatch: pytest.MonkeyPatch) -> None:
    import zeus_cpp.monitor.power_streaming as module

    monkeypatch.setattr(module, "IDLE_TIMEOUT_S", 0.3)
    stub = stub_with_stream(lambda handler: sse(handler, [], then_wait=stub.release))
    try:
        with PowerStreamingClient([stub.config()], reconnect_delay_s=30):  # no delay for idling
            assert wait_for(lambda: stub.requests.count("/gpu/stream_power") >= 2, 10)
    finally:
        stub.close()


@pytest.mark.parametrize("delay", [-1, float("nan"), float("inf"), 3601, "1", True, None])
def test_a_bad_reconnect_delay_is_a_value_error(delay) -> None:
    # Checked before any daemon is contacted.
    with pytest.raises(ValueError, match="reconnect_delay_s must be a number of seconds from 0 to 3600"):
        PowerStreamingClient([], reconnect_delay_s=delay)
