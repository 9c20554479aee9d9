"""What the real-server scripts (prometheus_server_test.py, pushgateway_server_test.py) share.

They are run by CTest as `python3 SCRIPT ...`, so this module is found on sys.path through the
scripts' own directory. It holds: the failure that ends a run, free loopback ports, the processes a
run starts (each with a log in the work directory, stopped with SIGTERM at the end), a Prometheus
started on a given scrape configuration and queried through its HTTP API, polling, checks that
print what passed, and the script's main(): skip (77) when a binary is missing, a temporary work
directory, the logs' tails on a failure, cleanup.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Callable

SKIP = 77
STARTUP_S = 60.0
H200_IDLE_W, H200_MAX_W = 75.0, 700.0


class Failure(Exception):
    pass


def free_ports(count: int) -> list[int]:
    """Distinct free loopback ports (all probes held open together, so none repeats)."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]
    finally:
        for probe in probes:
            probe.close()


class Processes:
    """The processes a run starts, each logging to WORK/NAME.log."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.started: list[tuple[str, subprocess.Popen]] = []

    def start(self, name: str, command: list[str], env: dict | None = None) -> subprocess.Popen:
        log = open(self.work / f"{name}.log", "wb")
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
        self.started.append((name, process))
        return process

    def stop(self) -> None:
        """SIGTERM to each one still running (the last started first); a Failure if one does not
        stop within 30 s."""
        for _, process in reversed(self.started):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for name, process in self.started:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                raise Failure(f"{name} did not stop within 30 s of SIGTERM")

    def check_exit_codes(self, ignore: tuple[str, ...] = ()) -> None:
        """After stop(): a Failure, with its log, for one (not in `ignore`) that exited non-zero."""
        for name, process in self.started:
            if name not in ignore and process.returncode != 0:
                log = (self.work / f"{name}.log").read_text(errors="replace")
                raise Failure(f"{name} exited with {process.returncode}:\n{log}")


class Prometheus:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def query(self, promql: str) -> list[dict]:
        url = f"{self.base}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.load(response)
        if body.get("status") != "success":
            raise Failure(f"query {promql!r} failed: {body}")
        return body["data"]["result"]

    def values(self, promql: str) -> dict[str, float]:
        """label set (as a sorted 'k=v,...' string) -> value."""
        out = {}
        for series in self.query(promql):
            labels = ",".join(
                f"{k}={v}" for k, v in sorted(series["metric"].items()) if k not in ("job", "__name__")
            )
            out[labels] = float(series["value"][1])
        return out


def start_prometheus(processes: Processes, port: int, scrape_configs: str) -> Prometheus:
    """Debian's `prometheus` on 127.0.0.1:PORT, scraping every second, with `scrape_configs` (the
    YAML list under scrape_configs:) and its data in the work directory."""
    work = processes.work
    (work / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n" + scrape_configs
    )
    processes.start(
        "prometheus",
        ["prometheus", f"--config.file={work / 'prometheus.yml'}",
         f"--storage.tsdb.path={work / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"],
    )  # fmt: skip
    return Prometheus(port)


def wait_until(description: str, predicate, timeout_s: float = STARTUP_S, poll_s: float = 0.25):
    """The first true value of predicate(), asked every poll_s; an error it raises while a server
    is still starting counts as not yet."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except (OSError, ValueError, KeyError) as error:  # still starting
            last = error
        time.sleep(poll_s)
    raise Failure(f"timed out waiting for {description} (last: {last})")


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise Failure(message)
    print(f"  ok: {message}")


def main(
    run: Callable[[Path], None],
    work_prefix: str,
    binaries: tuple[str, ...],
    failures: tuple[type[BaseException], ...] = (Failure,),
) -> int:
    """run(work) in a fresh temporary directory: 0 when it returns, 1 (with the tail of each log)
    when it raises one of `failures`, SKIP when one of `binaries` (each from the Debian package of
    its name) is not on PATH."""
    for binary in binaries:
        if shutil.which(binary) is None:
            print(f"SKIP: no `{binary}` binary (Debian package `{binary}`; scripts/setup.sh "
                  "installs it)")  # fmt: skip
            return SKIP
    work = Path(tempfile.mkdtemp(prefix=work_prefix))
    try:
        run(work)
    except failures as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        for log in sorted(work.glob("*.log")):
            print(f"--- {log.name} (last 40 lines)", file=sys.stderr)
            print("\n".join(log.read_text(errors="replace").splitlines()[-40:]), file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("passed")
    return 0
