"""Helpers of the zeusd client tests (test_zeusd_client.py, test_power_streaming.py).

- :class:`Daemon`: our real ``zeusd serve`` on simulated GPUs (and a fake RAPL tree for
  cpu-read), on a Unix socket or TCP, optionally requiring tokens; it can be SIGKILLed and
  restarted on the same endpoint.
- :class:`StubServer`: a small HTTP server on 127.0.0.1 whose routes the test writes (hostile
  answers: never answering, malformed SSE events, 401 streams).

The zeusd binary is found by tests/support/built_binaries.py (ZEUSD_BIN, else the one built
beside ZEUS_CLI, else a build tree's); the tests skip without one.
"""

from __future__ import annotations

import http.server
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

import pytest
from built_binaries import find_zeusd  # tests/support, on sys.path by conftest.py

from zeus_cpp.exception import ZeusdConnectionError
from zeus_cpp.utils.zeusd import ZeusdConfig

STARTUP_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def make_powercap(root: Path) -> Path:
    """One RAPL package with a DRAM zone; returns the package's energy_uj file."""
    package = root / "intel-rapl:0"
    dram = package / "intel-rapl:0:0"
    dram.mkdir(parents=True)
    for zone, name, energy in ((package, "package-0", 1_000_000), (dram, "dram", 5_000)):
        (zone / "name").write_text(name + "\n")
        (zone / "energy_uj").write_text(f"{energy}\n")
        (zone / "max_energy_range_uj").write_text("262143328850\n")
    return package / "energy_uj"


class Daemon:
    """`zeusd serve` in `directory`; start() waits until /discover answers."""

    def __init__(self, directory: Path, *, tcp: bool = False, enable: Optional[str] = None,
                 auth: bool = False, gpus: str = "2:a100") -> None:  # fmt: skip
        binary = find_zeusd()
        if binary is None:
            pytest.skip("no zeusd binary (build target zeusd, or set ZEUSD_BIN / ZEUS_CLI)")
        self.binary = str(binary)
        self.directory = directory
        self.tcp = tcp
        self.enable = enable
        self.gpus = gpus
        self.socket_path = directory / "zeusd.sock"
        self.port = free_port() if tcp else 0
        self.key_path: Optional[Path] = None
        if auth:
            self.new_signing_key()
        self.energy_file = make_powercap(directory / "powercap")
        self.process: Optional[subprocess.Popen] = None
        self.log_path = directory / "zeusd.log"

    def new_signing_key(self) -> None:
        """A fresh key (tokens issued with the old one are refused after a restart)."""
        self.key_path = self.directory / "signing.key"
        self.key_path.write_bytes(os.urandom(48))
        self.key_path.chmod(0o600)

    def token(self, *scopes: str, sub: str = "alice") -> str:
        assert self.key_path is not None, "the daemon was made without auth=True"
        issued = subprocess.run(
            [self.binary, "token", "issue", "--signing-key-path", str(self.key_path),
             "--sub", sub, "--scope", ",".join(scopes)],
            capture_output=True, text=True, check=True, timeout=30,
        )  # fmt: skip
        return issued.stdout.strip()

    def config(self, **kwargs) -> ZeusdConfig:
        if self.tcp:
            return ZeusdConfig.tcp("127.0.0.1", self.port, **kwargs)
        return ZeusdConfig.uds(str(self.socket_path), **kwargs)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self) -> "Daemon":
        command = [self.binary, "serve"]
        if self.tcp:
            command += ["--mode", "tcp", "--tcp-bind-address", f"127.0.0.1:{self.port}"]
        else:
            command += ["--socket-path", str(self.socket_path), "--socket-permissions", "666"]
        if self.enable is not None:
            command += ["--enable", self.enable]
        if self.key_path is not None:
            command += ["--signing-key-path", str(self.key_path)]
        env = dict(os.environ, ZEUS_SIMULATED_GPUS=self.gpus,
                   ZEUS_POWERCAP_ROOT=str(self.directory / "powercap"))  # fmt: skip
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT, env=env)  # fmt: skip
        transport = self.config().make_client(1.0)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                pytest.fail(f"zeusd exited with {self.process.returncode}:\n{self.log()}")
            try:
                if transport.request("GET", "/discover")[0] == 200:
                    return self
            except ZeusdConnectionError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"zeusd did not answer within {STARTUP_TIMEOUT_S} s:\n{self.log()}")
            time.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL: no clean shutdown, the connections just break."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)


@pytest.fixture
def daemons(tmp_path: Path):
    """A factory of started daemons, each in its own directory; all stopped afterwards."""
    started: List[Daemon] = []

    def start(**kwargs) -> Daemon:
        directory = tmp_path / f"zeusd-{len(started)}"
        directory.mkdir()
        daemon = Daemon(directory, **kwargs)
        started.append(daemon)
        return daemon.start()

    try:
        yield start
    finally:
        for daemon in started:
            daemon.stop()


# ---- A stub server for hostile answers ----------------------------------------------------------

Route = Callable[[http.server.BaseHTTPRequestHandler], None]


def discover_body(gpu_ids=(0,), cpu_ids=(), auth_required=False) -> str:
    import json

    return json.dumps({
        "gpus": [{"id": i, "name": "Stub GPU", "pci_address": f"0000:{16 + i:02x}:00.0",
                  "cumulative_energy_available": True} for i in gpu_ids],
        "cpus": [{"id": i, "dram_available": False} for i in cpu_ids],
        "enabled_api_groups": ["gpu-read", "cpu-read"],
        "auth_required": auth_required,
    })  # fmt: skip


def reply(handler: http.server.BaseHTTPRequestHandler, status: int, body: str,
          content_type: str = "application/json") -> None:  # fmt: skip
    data = body.encode()
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def sse(handler: http.server.BaseHTTPRequestHandler, chunks: List[bytes],
        then_wait: Optional[threading.Event] = None) -> None:  # fmt: skip
    """200 text/event-stream, the chunks, then (until `then_wait` is set) nothing; the body
    ends when the connection closes."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Connection", "close")
    handler.end_headers()
    for chunk in chunks:
        handler.wfile.write(chunk)
        handler.wfile.flush()
    if then_wait is not None:
        then_wait.wait(30)


class StubServer:
    """HTTP/1.0 on 127.0.0.1:<port>; `routes` maps a path (without query) to a handler."""

    def __init__(self, routes: Dict[str, Route]) -> None:
        self.routes = routes
        self.requests: List[str] = []
        self.release = threading.Event()  # set at close: handlers waiting on it return
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802
                stub.requests.append(self.path)
                route = stub.routes.get(self.path.split("?")[0])
                if route is None:
                    reply(self, 404, "")
                else:
                    route(self)

            do_POST = do_GET

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def config(self, **kwargs) -> ZeusdConfig:
        return ZeusdConfig.tcp("127.0.0.1", self.port, **kwargs)

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def time_route(handler: http.server.BaseHTTPRequestHandler) -> None:
    reply(handler, 200, '{"timestamp_ms": %d}' % int(time.time() * 1000))


class SilentSocket:
    """A Unix socket that is listened on and never accepted: connects succeed, nothing is ever
    answered."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(64)

    def close(self) -> None:
        self.sock.close()


