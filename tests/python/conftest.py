"""Fixtures for the BSO wire tests: our `zeus bso serve` on a temporary SQLite database.

ZEUS_CLI: path of the `zeus` binary to test. Default: the first of build/release, build/asan and
build/debug (the CMake presets) that has src/cli/zeus. The tests skip when none exists.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BUILDS = ("release", "asan", "debug")
STARTUP_TIMEOUT_S = 60.0
SHUTDOWN_TIMEOUT_S = 60.0


def _find_zeus_cli() -> Path | None:
    configured = os.environ.get("ZEUS_CLI")
    if configured:
        return Path(configured)
    for preset in DEFAULT_BUILDS:
        candidate = REPO_ROOT / "build" / preset / "src" / "cli" / "zeus"
        if candidate.is_file():
            return candidate
    return None


@pytest.fixture(scope="session")
def zeus_cli() -> Path:
    path = _find_zeus_cli()
    if path is None:
        pytest.skip(
            "no zeus binary: build one (cmake --preset release && cmake --build --preset release) "
            "or set ZEUS_CLI=/path/to/zeus"
        )
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.skip(f"ZEUS_CLI={path} is not an executable file: build zeus or fix ZEUS_CLI")
    return path


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
        failures = []
        for server in self._servers:
            if server.process.poll() is None:
                server.process.send_signal(signal.SIGTERM)
            try:
                server.process.wait(timeout=SHUTDOWN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                server.process.kill()
                server.process.wait()
                failures.append(f"{server.url}: no exit within {SHUTDOWN_TIMEOUT_S} s of SIGTERM")
            if server.process.returncode != 0:
                failures.append(
                    f"{server.url}: exit status {server.process.returncode}:\n{server.log()}"
                )
        if failures:
            pytest.fail("zeus bso serve did not stop cleanly:\n" + "\n".join(failures))


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
