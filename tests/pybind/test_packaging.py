"""The PEP 517 backend builds a correct wheel (reusing the CMake build folder) that installs
with pip into a --target folder and imports from there."""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib
import io
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import PYTHON_PATH, REPO


def build_dir() -> Path:
    if PYTHON_PATH is None or not (PYTHON_PATH.parent / "CMakeCache.txt").exists():
        pytest.skip("zeus_cpp does not come from a CMake build folder")
    return PYTHON_PATH.parent


@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    sys.path.insert(0, str(REPO / "packaging" / "python"))
    try:
        yield importlib.import_module("zeus_build_backend")
    finally:
        sys.path.remove(str(REPO / "packaging" / "python"))


@pytest.fixture(scope="module")
def wheel(backend, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("wheel")
    previous = os.environ.get("ZEUS_CPP_BUILD_DIR")
    os.environ["ZEUS_CPP_BUILD_DIR"] = str(build_dir())
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        name = backend.build_wheel(str(folder))
    finally:
        os.chdir(cwd)
        if previous is None:
            os.environ.pop("ZEUS_CPP_BUILD_DIR")
        else:
            os.environ["ZEUS_CPP_BUILD_DIR"] = previous
    return folder / name


def test_pyproject_uses_the_in_tree_backend() -> None:
    text = (REPO / "pyproject.toml").read_text()
    assert 'requires = []' in text
    assert 'build-backend = "zeus_build_backend"' in text
    assert 'backend-path = ["packaging/python"]' in text


def test_no_build_requirements(backend) -> None:
    assert backend.get_requires_for_build_wheel() == []


def test_wheel_name_and_contents(wheel: Path) -> None:
    major, minor = sys.version_info[:2]
    # manylinux_2_X once the backend has shipped the libraries (patchelf there), else linux_*.
    assert wheel.name.startswith(f"zeus_cpp-0.1.0-cp{major}{minor}-cp{major}{minor}-")
    platform = wheel.name[: -len(".whl")].split("-")[-1]
    repaired = shutil.which("patchelf") is not None
    assert platform.startswith("manylinux_2_" if repaired else "linux_"), platform
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert "zeus_cpp/__init__.py" in names
        assert "zeus_cpp/monitor/energy.py" in names
        assert "zeus_cpp/_zeus.pyi" in names and "zeus_cpp/py.typed" in names
        assert any(n.startswith("zeus_cpp/_zeus.") and n.endswith(".so") for n in names)
        if repaired:
            assert "zeus_cpp/_bin/zeus" in names
            assert any(n.startswith("zeus_cpp.libs/libspdlog-") for n in names)
        assert not any("__pycache__" in n for n in names)
        wheel_meta = archive.read("zeus_cpp-0.1.0.dist-info/WHEEL").decode()
        assert "Root-Is-Purelib: false" in wheel_meta
        metadata = archive.read("zeus_cpp-0.1.0.dist-info/METADATA").decode()
        assert "Name: zeus-cpp" in metadata and "Version: 0.1.0" in metadata
        record = list(csv.reader(io.StringIO(
            archive.read("zeus_cpp-0.1.0.dist-info/RECORD").decode())))
        recorded = {row[0] for row in record}
        assert recorded == set(names)
        for path, digest, size in record:
            if path.endswith("RECORD"):
                assert digest == "" and size == ""
                continue
            data = archive.read(path)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            assert digest == "sha256=" + expected.decode()
            assert int(size) == len(data)


def test_pip_installs_into_a_target_and_imports(tmp_path: Path) -> None:
    target = tmp_path / "site"
    env = dict(os.environ, ZEUS_CPP_BUILD_DIR=str(build_dir()), PIP_NO_INDEX="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(target), str(REPO)],
        env=env, capture_output=True, text=True, timeout=900,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (target / "zeus_cpp" / "__init__.py").exists()
    check = subprocess.run(
        [sys.executable, "-c",
         "import zeus_cpp, zeus_cpp.monitor as m; print(zeus_cpp.__file__); "
         "mon = m.ZeusMonitor(cpu_indices=[], sync_execution_with=lambda i: None); "
         "mon.begin_window('w'); print(len(mon.end_window('w').gpu_energy))"],
        env=dict(os.environ, PYTHONPATH=str(target), ZEUS_SIMULATED_GPUS="3:a100"),
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert check.returncode == 0, check.stderr
    file, count = check.stdout.split()
    assert file.startswith(str(target))
    assert count == "3"
