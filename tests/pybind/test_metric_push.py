"""zeus_cpp.metric's push classes (EnergyHistogram, EnergyCumulativeCounter, PowerGauge) on
simulated GPUs, against Debian's real ``prometheus-pushgateway`` (skipped when it is missing) and
against small local servers that answer 500, answer too slowly, or never answer."""

from __future__ import annotations

import gc
import http.server
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import warnings
from pathlib import Path

import pytest

from zeus_cpp.metric import (
    EnergyCumulativeCounter,
    EnergyHistogram,
    Metric,
    PowerGauge,
    PushgatewayError,
)

GATEWAY = shutil.which("prometheus-pushgateway")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    """A real Pushgateway on a free loopback port; yields its URL."""
    if GATEWAY is None:
        pytest.skip("no prometheus-pushgateway binary (Debian package prometheus-pushgateway)")
    port = free_port()
    log = open(tmp_path_factory.mktemp("pushgateway") / "log", "wb")
    process = subprocess.Popen(
        [GATEWAY, f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url + "/-/ready", timeout=2):
                break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail("the Pushgateway did not start")
            time.sleep(0.05)
    yield url
    process.terminate()
    process.wait(timeout=30)


def scrape(url: str) -> str:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        return response.read().decode()


def samples(text: str, name: str, **labels: str) -> list[float]:
    """Values of the series `name` having every given label (in the gateway's exposition)."""
    out = []
    for line in text.splitlines():
        match = re.match(rf"^{re.escape(name)}\{{(.*)\}} (\S+)$", line)
        if match and all(f'{k}="{v}"' in match.group(1) for k, v in labels.items()):
            out.append(float(match.group(2)))
    return out


def wait_for(predicate, timeout_s: float = 10.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    return predicate()


def native_threads() -> int:
    return len(os.listdir("/proc/self/task"))


class _Answering(http.server.BaseHTTPRequestHandler):
    status = 500
    delay_s = 0.0

    def do_PUT(self):  # noqa: N802 (http.server's naming)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        time.sleep(self.delay_s)
        body = b"gateway is broken\n"
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def local_server():
    servers = []

    def start(status: int = 500, delay_s: float = 0.0) -> str:
        handler = type("Handler", (_Answering,), {"status": status, "delay_s": delay_s})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def silent_peer():
    """Accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


def closed_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


# ---- EnergyHistogram --------------------------------------------------------------------------


def test_histogram_pushes_each_window_with_the_reference_names(gateway):
    histogram = EnergyHistogram([], [0, 1], gateway, "hist/train")  # '/' goes base64
    assert isinstance(histogram, Metric)
    assert histogram.group_url == f"{gateway}/metrics/job@base64/aGlzdC90cmFpbg=="
    for _ in range(2):
        histogram.begin_window("step", sync_execution=False)
        time.sleep(0.05)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            measurement = histogram.end_window("step", sync_execution=False)
        assert measurement.gpu_energy[0] > 0
        assert any("below the minimum bucket value of 50.0" in str(w.message) for w in caught)
    text = scrape(gateway)
    for index in ("0", "1"):
        assert samples(
            text, "energy_monitor_gpu_energy_joules_count", job="hist/train", window="step",
            index=index,
        ) == [2.0]  # fmt: skip
        buckets = samples(
            text, "energy_monitor_gpu_energy_joules_bucket", job="hist/train", index=index, le="50"
        )
        assert buckets == [2.0]
    assert "# TYPE energy_monitor_gpu_energy_joules histogram" in text


def test_histogram_warns_above_the_largest_bucket(gateway):
    histogram = EnergyHistogram([], [0], gateway, "hist-small", gpu_bucket_range=[0.001, 0.002])
    histogram.begin_window("w", sync_execution=False)
    time.sleep(0.05)
    with pytest.warns(UserWarning, match="exceeds the maximum bucket value of 0.002"):
        histogram.end_window("w", sync_execution=False)


@pytest.mark.parametrize("argument", ["gpu_bucket_range", "cpu_bucket_range", "dram_bucket_range"])
def test_histogram_rejects_an_empty_bucket_list(argument):
    with pytest.raises(ValueError, match="bucket range cannot be empty"):
        EnergyHistogram([], [0], "http://127.0.0.1:9091", "j", **{argument: []})


def test_histogram_rejects_unsorted_buckets_bad_urls_and_jobs():
    with pytest.raises(ValueError, match="strictly increasing"):
        EnergyHistogram([], [0], "http://127.0.0.1:9091", "j", gpu_bucket_range=[5, 1])
    for url in ["", "ftp://host:9091", "http://host:99999", "http://host:9091/x?y", "http://a b"]:
        with pytest.raises(ValueError, match="Pushgateway URL"):
            EnergyHistogram([], [0], url, "j")
    with pytest.raises(ValueError, match="job must not be empty"):
        EnergyHistogram([], [0], "http://127.0.0.1:9091", "")
    with pytest.raises(TypeError):
        EnergyHistogram([], [0], "http://127.0.0.1:9091", None)
    with pytest.raises(TypeError):
        EnergyHistogram([], [0], 9091, "j")


def test_histogram_push_failures_raise_a_url_error_naming_the_gateway(local_server, silent_peer):
    for url, fragment in [
        (closed_url(), "cannot connect"),
        (local_server(500), "HTTP 500: gateway is broken"),
        (local_server(200, delay_s=3.0), "no complete answer"),
        (silent_peer, "no complete answer"),
    ]:
        histogram = EnergyHistogram([], [0], url, "j", timeout=0.5)
        histogram.begin_window("w", sync_execution=False)
        started = time.monotonic()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(PushgatewayError) as error:
                histogram.end_window("w", sync_execution=False)
        assert time.monotonic() - started < 5
        assert isinstance(error.value, urllib.error.URLError) and isinstance(error.value, OSError)
        assert url in str(error.value) and fragment in str(error.value), str(error.value)
        # The observation stays for the next push.
        assert 'energy_monitor_gpu_energy_joules_count{window="w",index="0"} 1' in (
            histogram.render()
        )


def test_end_window_without_begin_raises_the_monitors_error():
    histogram = EnergyHistogram([], [0], "http://127.0.0.1:9091", "j")
    with pytest.raises(ValueError, match="__EnergyHistogram_never"):
        histogram.end_window("never", sync_execution=False)


def test_odd_window_names_and_grouping_values_arrive_intact(gateway):
    histogram = EnergyHistogram(
        [], [0], gateway, "odd", grouping_key={"instance": "node/1", "rank": ""}
    )
    name = 'a"b\\c\nd é'
    histogram.begin_window(name, sync_execution=False)
    time.sleep(0.05)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # below the smallest bucket
        histogram.end_window(name, sync_execution=False)
    text = scrape(gateway)
    escaped = 'window="a\\"b\\\\c\\nd é"'
    line = next(
        line
        for line in text.splitlines()
        if line.startswith("energy_monitor_gpu_energy_joules_count{") and 'job="odd"' in line
    )
    assert escaped in line and 'instance="node/1"' in line and 'rank=""' in line, line


# ---- EnergyCumulativeCounter ------------------------------------------------------------------


def test_counter_pushes_growing_totals_every_period_and_stops_at_end(gateway):
    counter = EnergyCumulativeCounter([], [0, 1], 0.05, gateway, "counter")
    counter.begin_window("epoch")
    assert counter.open_windows() == ["epoch"]
    assert "epoch" in counter.window_state  # the reference's attribute

    def pushed():
        return samples(
            scrape(gateway), "energy_monitor_gpu_energy_joules_total", job="counter",
            window="epoch", index="1",
        )  # fmt: skip

    first = wait_for(pushed)
    assert first and first[0] >= 0
    assert wait_for(lambda: (pushed() or [0])[0] > first[0])
    with pytest.raises(ValueError, match="already open"):
        counter.begin_window("epoch")
    counter.end_window("epoch")
    final = pushed()
    assert final and final[0] >= first[0]
    assert counter.open_windows() == [] and "epoch" not in counter.window_state
    stats = counter.push_stats()
    time.sleep(0.2)
    assert counter.push_stats()["pushes"] == stats["pushes"], "no pushes after the last end"
    assert stats["failures"] == 0
    with pytest.raises(ValueError, match="No active monitoring process found for 'epoch'"):
        counter.end_window("epoch")


@pytest.mark.parametrize("period", [0, -1, math.nan, math.inf, 0.0001, 86400.5, 1e300])
def test_counter_and_gauge_reject_bad_update_periods(period):
    with pytest.raises(ValueError, match="update_period"):
        EnergyCumulativeCounter([], [0], period, "http://127.0.0.1:9091", "j")
    with pytest.raises(ValueError, match="update_period"):
        PowerGauge([0], period, "http://127.0.0.1:9091", "j")


@pytest.mark.parametrize("period", ["1", True, None])
def test_update_period_must_be_a_number(period):
    with pytest.raises(TypeError, match="update_period"):
        PowerGauge([0], period, "http://127.0.0.1:9091", "j")


def test_counter_rejects_unknown_gpus():
    from zeus_cpp.exception import ZeusBaseError

    with pytest.raises((ValueError, ZeusBaseError)):
        EnergyCumulativeCounter([], [7], 1, "http://127.0.0.1:9091", "j")


def test_a_down_gateway_warns_at_end_window_and_training_goes_on():
    counter = EnergyCumulativeCounter([], [0], 0.02, closed_url(), "j")
    counter.begin_window("w")
    assert wait_for(lambda: counter.push_stats()["failures"] >= 2)
    assert counter.value("gpu", "w", 0) is not None  # still measured
    with pytest.warns(RuntimeWarning, match=r"pushes to http://127\.0\.0\.1:\d+/metrics/job/j "
                      r"failed during window 'w'.*cannot connect"):  # fmt: skip
        counter.end_window("w")


# ---- PowerGauge -------------------------------------------------------------------------------


def test_gauge_pushes_instant_power_per_window(gateway):
    gauge = PowerGauge([1], 0.05, gateway, "power")
    gauge.begin_window("train")
    with pytest.raises(ValueError, match="PowerGauge metric 'train' already exists."):
        gauge.begin_window("train")
    watts = wait_for(
        lambda: samples(scrape(gateway), "power_monitor_gpu_power_watts", job="power",
                        window="train", index="1")  # fmt: skip
    )
    assert watts and 20 <= watts[0] <= 400  # a simulated V100
    assert 20 <= gauge.value("train", 1) <= 400
    assert "# TYPE power_monitor_gpu_power_watts gauge" in scrape(gateway)
    gauge.end_window("train")
    with pytest.raises(KeyError):
        gauge.end_window("train")
    with pytest.raises(ValueError, match="No active monitoring process"):
        gauge.end_window("never")


def test_gc_of_an_object_with_a_running_thread_stops_it(silent_peer):
    baseline = native_threads()
    gauge = PowerGauge([0], 0.02, silent_peer, "j", timeout=30)
    gauge.begin_window("w")
    assert wait_for(lambda: native_threads() > baseline)
    time.sleep(0.1)  # a push to the peer that never answers is in flight
    started = time.monotonic()
    del gauge
    gc.collect()
    assert time.monotonic() - started < 5
    assert wait_for(lambda: native_threads() <= baseline, 5)


def test_close_stops_at_once_and_the_thread_restarts_per_run(gateway):
    gauge = PowerGauge(None, 0.05, gateway, "power-runs")
    for _ in range(2):
        gauge.begin_window("w")
        time.sleep(0.1)
        gauge.end_window("w")
    gauge.begin_window("w")
    gauge.close()
    assert gauge.open_windows() == []
    with pytest.raises(RuntimeError, match="closed"):
        gauge.begin_window("w")


def test_a_real_prometheus_scrapes_what_the_classes_push():
    """tests/metrics/pushgateway_server_test.py with the Python classes (the CTest entry of the
    sanitizer build runs it with the C++ driver only)."""
    import zeus_cpp

    script = Path(__file__).resolve().parents[1] / "metrics" / "pushgateway_server_test.py"
    package = str(Path(zeus_cpp.__file__).resolve().parents[1])
    done = subprocess.run(
        [sys.executable, str(script), "--python", package],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    if done.returncode == 77:
        pytest.skip(done.stdout.strip())
    assert done.returncode == 0, done.stdout + done.stderr
    assert "py: instant power per GPU is an H200's" in done.stdout


def test_bad_grouping_keys_and_timeouts_are_value_errors():
    for key in [{"job": "x"}, {"9lives": "x"}, {"__name": "x"}, {"a-b": "x"}]:
        with pytest.raises(ValueError, match="grouping label name"):
            PowerGauge([0], 1, "http://127.0.0.1:9091", "j", grouping_key=key)
    with pytest.raises(TypeError, match="grouping_key"):
        PowerGauge([0], 1, "http://127.0.0.1:9091", "j", grouping_key=[("a", "b")])
    for timeout in [0, -1, math.nan]:
        with pytest.raises(ValueError, match="timeout"):
            EnergyHistogram([], [0], "http://127.0.0.1:9091", "j", timeout=timeout)


def test_the_reference_defaults_synchronise_through_torch(gateway):
    pytest.importorskip("torch")
    histogram = EnergyHistogram([], [0], gateway, "hist-sync")
    histogram.begin_window("d")  # sync_execution=True, as in the reference
    time.sleep(0.02)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert histogram.end_window("d").time > 0
    counter = EnergyCumulativeCounter(None, None, 0.05, gateway, "counter-sync")
    counter.begin_window("d", sync_execution=True)
    counter.end_window("d", sync_execution=True)
