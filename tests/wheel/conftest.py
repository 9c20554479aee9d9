"""Shared setup of the wheel tests (tests/wheel): the wheel scripts/wheel.sh built.

``ZEUS_WHEEL`` names the wheel file (scripts/test.sh sets it from scripts/wheel.sh's output);
without it, or when the file is absent, every test here is skipped with a message that says how to
build one. ``ZEUS_WHEEL_BUILD_DIR`` (default build/release) is the CMake build folder it came from,
for the tests that build it again. The tests run with Debian's /usr/bin/python3, the interpreter
the release build's extension is for.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, List

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "packaging" / "python"))

# Variables that would let a test import zeus_cpp from somewhere other than the install under test.
LEAKY_VARIABLES = ("PYTHONPATH", "ZEUS_CPP_PYTHONPATH", "ZEUS_CLI", "PYTHONHOME", "LD_LIBRARY_PATH",
                   "LD_PRELOAD", "PYTHONSTARTUP", "VIRTUAL_ENV")


def clean_environment(**extra: str) -> Dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in LEAKY_VARIABLES}
    env.update(PYTHONDONTWRITEBYTECODE="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INDEX="1")
    env.update(extra)
    return env


def run(command: List[str], **kwargs) -> subprocess.CompletedProcess:
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    kwargs.setdefault("timeout", 300)
    return subprocess.run(command, **kwargs)


@pytest.fixture(scope="session")
def wheel() -> Path:
    configured = os.environ.get("ZEUS_WHEEL")
    if not configured:
        pytest.skip("ZEUS_WHEEL is not set: build the wheel with scripts/wheel.sh and set "
                    "ZEUS_WHEEL=dist/zeus_cpp-...whl (scripts/test.sh does both)")
    path = Path(configured)
    if not path.is_file():
        pytest.skip(f"ZEUS_WHEEL={configured} does not exist: run scripts/wheel.sh first")
    return path.resolve()


def unpack_wheel(wheel: Path, folder: Path) -> Path:
    """Unzips ``wheel`` into ``folder`` with each file's mode (executables stay executable)."""
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            archive.extract(info, folder)
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                (folder / info.filename).chmod(mode)
    return folder


@pytest.fixture(scope="session")
def unpacked(wheel: Path, tmp_path_factory) -> Path:
    return unpack_wheel(wheel, tmp_path_factory.mktemp("unpacked"))


@pytest.fixture(scope="session")
def build_dir() -> Path:
    path = Path(os.environ.get("ZEUS_WHEEL_BUILD_DIR") or REPO / "build" / "release")
    if not (path / "CMakeCache.txt").is_file():
        pytest.skip(f"{path} is not a CMake build folder (set ZEUS_WHEEL_BUILD_DIR)")
    return path
