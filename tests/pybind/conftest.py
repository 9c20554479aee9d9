"""Shared setup of the zeus_cpp Python tests.

The tests import the package from a CMake build tree: ``ZEUS_CPP_PYTHONPATH`` when set, else the
first of build/release/python, build/debug/python, build/py1/python, build/py2/python that holds
``zeus_cpp`` with its extension. Without one, the whole directory is skipped, saying how to build
it. Build with, e.g.::

    cmake --preset release && cmake --build build/release --target zeus_cpp

Every test process uses simulated GPUs: ``ZEUS_SIMULATED_GPUS`` defaults to ``2:v100`` (set
before zeus_cpp is imported; GPUs are discovered once per process). Tests that need another set
run a subprocess (see :func:`run_python`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
SIMULATED_GPUS = "2:v100"

os.environ.setdefault("ZEUS_SIMULATED_GPUS", SIMULATED_GPUS)


def _has_package(path: Path) -> bool:
    package = path / "zeus_cpp"
    return (package / "__init__.py").exists() and any(package.glob("_zeus*.so"))


def find_python_path() -> Optional[Path]:
    """The build's python/ folder holding zeus_cpp, or None."""
    configured = os.environ.get("ZEUS_CPP_PYTHONPATH")
    if configured:
        return Path(configured)
    for name in ("release", "debug", "py1", "py2"):
        candidate = REPO / "build" / name / "python"
        if _has_package(candidate):
            return candidate
    return None


# tests/support: built_binaries.py, where every test finds the built zeus and zeusd.
sys.path.insert(0, str(REPO / "tests" / "support"))

PYTHON_PATH = find_python_path()
if PYTHON_PATH is not None and str(PYTHON_PATH) not in sys.path:
    sys.path.insert(0, str(PYTHON_PATH))

try:
    import zeus_cpp  # noqa: F401

    IMPORT_ERROR: Optional[str] = None
except ImportError as error:  # pragma: no cover - depends on the build
    IMPORT_ERROR = str(error)


SKIP_REASON = (
    None
    if IMPORT_ERROR is None
    else f"zeus_cpp is not built or not importable ({IMPORT_ERROR}); build it with "
    "`cmake --build <build> --target zeus_cpp` and/or set ZEUS_CPP_PYTHONPATH=<build>/python"
)

# Without the package, no test module can even be imported: skip the whole directory.
collect_ignore_glob = ["test_*.py"] if IMPORT_ERROR is not None else []


def pytest_report_header(config: pytest.Config) -> str:
    if SKIP_REASON is not None:
        return f"SKIPPING tests/pybind: {SKIP_REASON}"
    return f"zeus_cpp from {PYTHON_PATH or 'sys.path'}; ZEUS_SIMULATED_GPUS=" + os.environ.get(
        "ZEUS_SIMULATED_GPUS", ""
    )


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if SKIP_REASON is not None:
        terminalreporter.write_line(f"tests/pybind skipped: {SKIP_REASON}", yellow=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if SKIP_REASON is not None and exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.OK


def subprocess_env(env=None) -> dict:
    """This process's environment for a child interpreter that imports zeus_cpp from the same
    place: ``env`` entries added (or, when None, removed)."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(PYTHON_PATH) if PYTHON_PATH else "", full_env.get("PYTHONPATH", "")) if p
    )
    for key, value in (env or {}).items():
        if value is None:
            full_env.pop(key, None)
        else:
            full_env[key] = value
    return full_env


def run_python(code: str, env: Optional[Dict[str, str]] = None, timeout: float = 120) -> str:
    """Runs ``code`` in a fresh interpreter that imports zeus_cpp from the same place.

    ``env`` entries are added to (or, when None, removed from) the current environment. Returns
    stdout; a failure raises AssertionError with stderr.
    """
    result = subprocess.run(
        [sys.executable, "-c", code], env=subprocess_env(env), capture_output=True, text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, f"subprocess failed ({result.returncode}):\n{result.stderr}"
    return result.stdout


@pytest.fixture
def python_runner():
    """:func:`run_python`, as a fixture."""
    return run_python


@pytest.fixture(autouse=True)
def _bso_state_dir(tmp_path_factory, monkeypatch):
    """Batch-size-optimizer clients record undecided trials in a directory of the test's own (and
    so do the interpreters a test starts), never in the user's ~/.local/state."""
    monkeypatch.setenv("ZEUS_BSO_STATE_DIR", str(tmp_path_factory.mktemp("bso-state")))
