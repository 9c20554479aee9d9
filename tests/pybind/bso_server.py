"""A real `zeus bso serve` for the batch-size-optimizer client tests (imported by the tests; the
fixtures are defined here and re-exported by each test module that needs them).

ZEUS_CLI: path of the `zeus` binary. Default: as tests/support/built_binaries.py finds it in the
build trees. Tests that need a server skip when none exists.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from built_binaries import find_zeus_cli  # tests/support, on sys.path by conftest.py

STARTUP_TIMEOUT_S = 30.0
SHUTDOWN_TIMEOUT_S = 30.0


@dataclass
class BsoServer:
    url: str
    process: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        """SIGTERM; the server must exit 0."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=SHUTDOWN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"zeus bso serve did not exit on SIGTERM:\n{self.log()}")
        assert self.process.returncode == 0, f"zeus bso serve exited {self.process.returncode}:\n{self.log()}"


def start_server(zeus_cli: Path, directory: Path) -> BsoServer:
    """Starts `zeus bso serve` on a fresh SQLite database in `directory`, on a free port."""
    directory.mkdir(parents=True, exist_ok=True)
    port_file = directory / "port"
    log_path = directory / "server.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [str(zeus_cli), "bso", "serve", "--db", f"sqlite:///{directory / 'bso.db'}",
             "--host", "127.0.0.1", "--port", "0", "--port-file", str(port_file)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    server = BsoServer("", process, log_path)
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not (port_file.exists() and port_file.read_text().strip()):
        if process.poll() is not None:
            raise AssertionError(f"zeus bso serve exited with {process.returncode}:\n{server.log()}")
        if time.monotonic() > deadline:
            process.kill()
            process.wait()
            raise AssertionError(f"zeus bso serve wrote no port file in {STARTUP_TIMEOUT_S} s:\n{server.log()}")
        time.sleep(0.02)
    server.url = f"http://127.0.0.1:{int(port_file.read_text())}"
    return server


@pytest.fixture(scope="session")
def zeus_cli() -> Path:
    path = find_zeus_cli()
    if path is None or not (path.is_file() and os.access(path, os.X_OK)):
        pytest.skip("no zeus binary: build the `zeus` target (cmake --build <build> --target zeus) "
                    "or set ZEUS_CLI=/path/to/zeus")
    return path


@pytest.fixture
def bso_server(zeus_cli: Path, tmp_path: Path):
    server = start_server(zeus_cli, tmp_path / "bso-server")
    try:
        yield server
    finally:
        server.stop()
