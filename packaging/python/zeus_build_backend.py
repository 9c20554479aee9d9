"""In-tree PEP 517 build backend of the zeus_cpp Python package.

``pip install .`` (or ``pip wheel .``) calls :func:`build_wheel`, which configures the project
with CMake (Release, no tests, benchmarks or examples), builds only the ``zeus_cpp`` target (the
extension module and the package laid out in ``<build>/python/zeus_cpp``) and zips that folder
into a wheel. It needs nothing beyond the standard library, CMake, a C++20 compiler and the
project's build dependencies (Debian packages), so it works offline: ``requires = []``.

Environment:

- ``ZEUS_CPP_BUILD_DIR``: the CMake build folder to use (and reuse: it is configured only when it
  has no ``CMakeCache.txt``). Default: ``build/wheel`` in the source tree.
- ``ZEUS_CPP_BUILD_JOBS``: parallel build jobs (default: the number of CPUs).
- ``ZEUS_CPP_CMAKE_ARGS``: extra arguments for the configure step (split on spaces).

The same keys (``build-dir``, ``build-jobs``, ``cmake-args``) are accepted as ``config_settings``
(``pip install . --config-settings build-dir=...``).
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path
from typing import List, Mapping, Optional, Tuple

NAME = "zeus_cpp"
DIST_NAME = "zeus-cpp"
VERSION = "0.1.0"
SUMMARY = "Measure and optimize the GPU energy of deep learning (C++ port of Zeus)"
REQUIRES_PYTHON = ">=3.9"
REQUIRES_DIST = ["numpy"]

ConfigSettings = Optional[Mapping[str, object]]


# ---- Hooks ------------------------------------------------------------------------------------


def get_requires_for_build_wheel(config_settings: ConfigSettings = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: ConfigSettings = None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(
    metadata_directory: str, config_settings: ConfigSettings = None
) -> str:
    dist_info = Path(metadata_directory) / _dist_info_name()
    dist_info.mkdir(parents=True, exist_ok=True)
    (dist_info / "METADATA").write_text(_metadata(), encoding="utf-8")
    (dist_info / "WHEEL").write_text(_wheel_file(_wheel_tag()), encoding="utf-8")
    return dist_info.name


def build_wheel(
    wheel_directory: str,
    config_settings: ConfigSettings = None,
    metadata_directory: Optional[str] = None,
) -> str:
    source = _source_dir()
    build_dir = _build_dir(source, config_settings)
    _cmake_build(source, build_dir, config_settings)
    package = build_dir / "python" / NAME
    _check_extension(package)

    tag = _wheel_tag()
    wheel_name = f"{NAME}-{VERSION}-{tag}.whl"
    Path(wheel_directory).mkdir(parents=True, exist_ok=True)
    wheel_path = Path(wheel_directory) / wheel_name

    entries: List[Tuple[str, bytes]] = []
    for path in sorted(package.rglob("*")):
        if path.is_dir() or "__pycache__" in path.parts or path.suffix == ".pyc":
            continue
        entries.append((f"{NAME}/{path.relative_to(package).as_posix()}", path.read_bytes()))
    dist_info = _dist_info_name()
    entries.append((f"{dist_info}/METADATA", _metadata().encode()))
    entries.append((f"{dist_info}/WHEEL", _wheel_file(tag).encode()))
    entries.append((f"{dist_info}/top_level.txt", f"{NAME}\n".encode()))

    record_lines = [f"{name},sha256={_digest(data)},{len(data)}" for name, data in entries]
    record_name = f"{dist_info}/RECORD"
    record_lines.append(f"{record_name},,")
    entries.append((record_name, ("\n".join(record_lines) + "\n").encode()))

    with zipfile.ZipFile(wheel_path, "w", compression=zipfile.ZIP_DEFLATED) as wheel:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            executable = name.endswith(".so")
            info.external_attr = ((0o755 if executable else 0o644) | 0o100000) << 16
            wheel.writestr(info, data)
    return wheel_name


def build_sdist(sdist_directory: str, config_settings: ConfigSettings = None) -> str:
    source = _source_dir()
    base = f"{NAME}-{VERSION}"
    Path(sdist_directory).mkdir(parents=True, exist_ok=True)
    path = Path(sdist_directory) / f"{base}.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for relative in _sdist_files(source):
            archive.add(source / relative, arcname=f"{base}/{relative}", recursive=False)
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = _metadata().encode()
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return path.name


# ---- Helpers ----------------------------------------------------------------------------------


def _source_dir() -> Path:
    # PEP 517: hooks run in the source tree. Fall back on this file's location.
    cwd = Path.cwd()
    if (cwd / "CMakeLists.txt").exists() and (cwd / "python" / NAME).is_dir():
        return cwd
    return Path(__file__).resolve().parents[2]


def _setting(config_settings: ConfigSettings, key: str, env: str) -> Optional[str]:
    if config_settings and key in config_settings:
        value = config_settings[key]
        return value if isinstance(value, str) else str(value)
    return os.environ.get(env) or None


def _build_dir(source: Path, config_settings: ConfigSettings) -> Path:
    configured = _setting(config_settings, "build-dir", "ZEUS_CPP_BUILD_DIR")
    if configured:
        path = Path(configured)
        return path if path.is_absolute() else (source / path)
    return source / "build" / "wheel"


def _run(command: List[str], cwd: Path) -> None:
    print("zeus_build_backend:", " ".join(command), file=sys.stderr, flush=True)
    subprocess.run(command, cwd=cwd, check=True)


def _cmake_build(source: Path, build_dir: Path, config_settings: ConfigSettings) -> None:
    cmake = shutil.which("cmake")
    if cmake is None:
        raise RuntimeError("zeus_cpp: CMake (>= 3.25) is needed to build the wheel")
    if not (build_dir / "CMakeCache.txt").exists():
        command = [
            cmake, "-S", str(source), "-B", str(build_dir),
            "-DCMAKE_BUILD_TYPE=Release",
            "-DZEUS_BUILD_TESTS=OFF", "-DZEUS_BUILD_BENCHMARKS=OFF", "-DZEUS_BUILD_EXAMPLES=OFF",
            "-DZEUS_BUILD_PYTHON=ON", "-DZEUS_SANITIZE=OFF",
            f"-DPython_EXECUTABLE={sys.executable}",
        ]
        if shutil.which("ninja"):
            command += ["-G", "Ninja"]
        extra = _setting(config_settings, "cmake-args", "ZEUS_CPP_CMAKE_ARGS")
        if extra:
            command += extra.split()
        _run(command, source)
    jobs = _setting(config_settings, "build-jobs", "ZEUS_CPP_BUILD_JOBS") or str(os.cpu_count() or 1)
    _run([cmake, "--build", str(build_dir), "--target", "zeus_cpp", "-j", jobs], source)


def _check_extension(package: Path) -> None:
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    if not (package / f"_zeus{suffix}").exists():
        found = sorted(p.name for p in package.glob("_zeus*"))
        raise RuntimeError(
            f"zeus_cpp: {package} has no _zeus{suffix} for this interpreter ({sys.executable}); "
            f"found {found or 'nothing'}. Was pybind11 found, and was the build folder "
            "configured for this Python (Python_EXECUTABLE)?"
        )


def _wheel_tag() -> str:
    interpreter = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{interpreter}-{interpreter}-{platform}"


def _dist_info_name() -> str:
    return f"{NAME}-{VERSION}.dist-info"


def _metadata() -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {DIST_NAME}",
        f"Version: {VERSION}",
        f"Summary: {SUMMARY}",
        "License: Apache-2.0",
        f"Requires-Python: {REQUIRES_PYTHON}",
    ]
    lines += [f"Requires-Dist: {requirement}" for requirement in REQUIRES_DIST]
    return "\n".join(lines) + "\n"


def _wheel_file(tag: str) -> str:
    return (
        "Wheel-Version: 1.0\n"
        "Generator: zeus_build_backend\n"
        "Root-Is-Purelib: false\n"
        f"Tag: {tag}\n"
    )


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _sdist_files(source: Path) -> List[str]:
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=source, check=True, capture_output=True,
        ).stdout.decode().split("\0")
        files = [name for name in listed if name and (source / name).is_file()]
        if files:
            return files
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    skip = {"build", ".git", "__pycache__", ".pytest_cache", "out", ".cache"}
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if path.is_file() and not skip.intersection(relative.parts):
            files.append(relative.as_posix())
    return files
