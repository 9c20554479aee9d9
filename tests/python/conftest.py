"""Fixtures for the BSO wire tests: our `zeus bso serve` on a temporary SQLite database.

ZEUS_CLI: path of the `zeus` binary to test (ZEUSD_BIN: of `zeusd`). Default: as
tests/support/built_binaries.py finds them in the build trees. The tests skip when none exists.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import httpx
import pytest

STARTUP_TIMEOUT_S = 60.0
SHUTDOWN_TIMEOUT_S = 60.0

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from built_binaries import find_zeus_cli, find_zeusd  # noqa: E402


@pytest.fixture(scope="session")
def zeus_cli() -> Path:
    path = find_zeus_cli()
    if path is None:
        pytest.skip(
            "no zeus binary: build one (cmake --preset release && cmake --build --preset release) "
            "or set ZEUS_CLI=/path/to/zeus"
        )
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.skip(f"ZEUS_CLI={path} is not an executable file: build zeus or fix ZEUS_CLI")
    return path


def stop_cleanly(program: str, processes: list[tuple[str, subprocess.Popen, Callable[[], str]]]):
    """SIGTERMs each (name, process, log) still running and fails the test unless all exit 0
    within SHUTDOWN_TIMEOUT_S (a process that does not is killed)."""
    failures = []
    for name, process, log in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=SHUTDOWN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            failures.append(f"{name}: no exit within {SHUTDOWN_TIMEOUT_S} s of SIGTERM")
        if process.returncode != 0:
            failures.append(f"{name}: exit status {process.returncode}:\n{log()}")
    if failures:
        pytest.fail(f"{program} did not stop cleanly:\n" + "\n".join(failures))


@dataclass
class BsoServer:
    url: str
    process: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


class BsoServers:
    """Starts `zeus bso serve` processes, each on its own SQLite database; stops them all."""

    def __init__(self, zeus_cli: Path, directory: Path) -> None:
        self._zeus_cli = zeus_cli
        self._directory = directory
        self._servers: list[BsoServer] = []

    def start(self) -> BsoServer:
        index = len(self._servers)
        port_file = self._directory / f"port-{index}"
        log_path = self._directory / f"server-{index}.log"
        database = self._directory / f"bso-{index}.db"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [
                    str(self._zeus_cli), "bso", "serve",
                    "--db", f"sqlite:///{database}",  # absolute path: sqlite:////tmp/...
                    "--host", "127.0.0.1", "--port", "0",
                    "--port-file", str(port_file),
                ],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        server = BsoServer("", process, log_path)
        self._servers.append(server)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not port_file.exists():
            if process.poll() is not None:
                pytest.fail(f"zeus bso serve exited with {process.returncode}:\n{server.log()}")
            if time.monotonic() > deadline:
                pytest.fail(
                    f"zeus bso serve wrote no port file in {STARTUP_TIMEOUT_S} s:\n{server.log()}"
                )
            time.sleep(0.02)
        server.url = f"http://127.0.0.1:{int(port_file.read_text())}"
        return server

    def stop_all(self) -> None:
        """SIGTERM each server; it must exit 0 (under ASan: without leaks or errors)."""
        stop_cleanly("zeus bso serve", [(s.url, s.process, s.log) for s in self._servers])


@pytest.fixture
def bso_servers(zeus_cli: Path, tmp_path: Path):
    servers = BsoServers(zeus_cli, tmp_path)
    try:
        yield servers
    finally:
        servers.stop_all()


@pytest.fixture
def bso_server(bso_servers: BsoServers) -> BsoServer:
    server = bso_servers.start()
    # The server answers once the port file exists; make sure before the test talks to it.
    assert httpx.get(server.url + "/healthz").status_code == 200, server.log()
    return server


@pytest.fixture(scope="session")
def zeusd_bin() -> Path:
    path = find_zeusd()
    if path is None or not (path.is_file() and os.access(path, os.X_OK)):
        pytest.skip(
            "no zeusd binary: build one (cmake --build --preset release --target zeusd) "
            "or set ZEUSD_BIN=/path/to/zeusd"
        )
    return path


@dataclass
class Zeusd:
    socket_path: Path
    process: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(
            transport=httpx.HTTPTransport(uds=str(self.socket_path)),
            base_url="http://localhost",
            headers=headers,
        )


class ZeusdProcesses:
    """Starts `zeusd serve` on simulated GPUs, each on its own socket; SIGTERMs them all."""

    def __init__(self, zeusd: Path, directory: Path) -> None:
        self._zeusd = zeusd
        self._directory = directory
        self._daemons: list[Zeusd] = []

    def start(self, *extra: str, gpus: str = "2:a100") -> Zeusd:
        index = len(self._daemons)
        socket_path = self._directory / f"zeusd-{index}" / "zeusd.sock"
        log_path = self._directory / f"zeusd-{index}.log"
        env = dict(os.environ)
        env["ZEUS_SIMULATED_GPUS"] = gpus
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [str(self._zeusd), "serve", "--socket-path", str(socket_path), *extra],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
            )  # fmt: skip
        daemon = Zeusd(socket_path, process, log_path)
        self._daemons.append(daemon)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"zeusd exited with {process.returncode}:\n{daemon.log()}")
            if socket_path.exists():
                try:
                    with daemon.client() as client:
                        if client.get("/discover").status_code == 200:
                            return daemon
                except httpx.TransportError:
                    pass
            if time.monotonic() > deadline:
                pytest.fail(f"zeusd did not answer within {STARTUP_TIMEOUT_S} s:\n{daemon.log()}")
            time.sleep(0.02)

    def stop_all(self) -> None:
        """SIGTERM each daemon; it must exit 0 (under ASan: without leaks or errors)."""
        stop_cleanly("zeusd", [(str(d.socket_path), d.process, d.log) for d in self._daemons])


@pytest.fixture
def zeusd_processes(zeusd_bin: Path, tmp_path: Path):
    daemons = ZeusdProcesses(zeusd_bin, tmp_path)
    try:
        yield daemons
    finally:
        daemons.stop_all()
