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
- ``ZEUS_CPP_WHEEL_REPAIR``: ``auto`` (default: when patchelf is there), ``yes`` or
  ``no``. Repairing (zeus_wheel_repair) copies the non-system shared libraries into
  ``zeus_cpp.libs/`` and tags the wheel ``manylinux_2_X``; without it the wheel is tagged
  ``linux_<machine>`` and needs the build machine's libraries.

The same keys (``build-dir``, ``build-jobs``, ``cmake-args``, ``repair``) are accepted as
``config_settings`` (``pip install . --config-settings build-dir=...``).

The wheel also carries the ``zeus`` CLI (target ``zeus_wheel_cli``: the CLI without PostgreSQL) as
``zeus_cpp/_bin/zeus``, with a ``zeus`` console script (zeus_cpp._cli) that execs it, and the
licences of the project and of everything compiled in or shipped under
``<dist-info>/licenses/``. The wheel's long description is wheel-description.md (beside this file),
with the interpreter and the platform filled in; the sdist's is README.md.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

# The repair tools live beside this file (pip puts backend-path on sys.path; a test that imports
# the backend by path may not).
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
import zeus_wheel_repair  # noqa: E402
import zeus_elf  # noqa: E402

NAME = "zeus_cpp"
DIST_NAME = "zeus-cpp"
VERSION = "0.1.0"
SUMMARY = "Measure and optimize the GPU energy of deep learning (C++ port of Zeus)"
REQUIRES_PYTHON = ">=3.10"
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
    (dist_info / "METADATA").write_text(_metadata(_source_dir(), platform=_plain_platform()),
                                        encoding="utf-8")
    (dist_info / "WHEEL").write_text(_wheel_file(_wheel_tag()), encoding="utf-8")
    return dist_info.name


def build_wheel(
    wheel_directory: str,
    config_settings: ConfigSettings = None,
    metadata_directory: Optional[str] = None,
) -> str:
    source = _source_dir()
    build_dir = _build_dir(source, config_settings)
    with_cli = _cmake_build(source, build_dir, config_settings)
    package = build_dir / "python" / NAME
    _check_extension(package)
    repair = _repair_mode(config_settings)

    staging = Path(tempfile.mkdtemp(prefix="wheel-staging-", dir=build_dir))
    try:
        # The package folder may hold the extension for other Pythons too (src/python's
        # ZEUS_PYTHON_EXTRA_INTERPRETERS): a wheel carries only this interpreter's.
        own = f"_zeus{_extension_suffix()}"
        shutil.copytree(package, staging / NAME,
                        ignore=lambda folder, names: {
                            name for name in names
                            if name == "__pycache__" or name.endswith(".pyc")
                            or (name.startswith("_zeus.") and name.endswith(".so") and name != own)})
        binaries = sorted((staging / NAME).glob("_zeus*.so"))
        cli = build_dir / "src" / "cli" / "wheel" / "zeus"
        if with_cli:
            (staging / NAME / "_bin").mkdir()
            shutil.copy2(cli, staging / NAME / "_bin" / "zeus")
            binaries.append(staging / NAME / "_bin" / "zeus")
        # The local symbol tables (about a fifth of each file) serve only debuggers; the dynamic
        # symbols that loading needs stay. Only the staged copies: the build tree keeps its own.
        for binary in binaries:
            strip = _strip_tool(binary)
            if strip:
                _run([strip, "--strip-unneeded", str(binary)], source)
        shipped: Dict[str, Path] = {}
        if repair:
            shipped = zeus_wheel_repair.bundle(staging, binaries)
            found = zeus_wheel_repair.problems(staging)
            if found:
                raise RuntimeError("zeus_cpp: the repaired wheel would not load elsewhere:\n  "
                                   + "\n  ".join(found))
            platform, why = zeus_wheel_repair.platform_tag(staging, _machine())
            print(f"zeus_build_backend: platform tag {platform} ({why}); shipped "
                  f"{', '.join(sorted(shipped)) or 'nothing'}", file=sys.stderr, flush=True)
        else:
            platform = _plain_platform()
        tag = f"{_interpreter()}-{_interpreter()}-{platform}"
        wheel_name = f"{NAME}-{VERSION}-{tag}.whl"
        Path(wheel_directory).mkdir(parents=True, exist_ok=True)
        wheel_path = Path(wheel_directory) / wheel_name

        entries: List[Tuple[str, bytes]] = []
        for path in sorted(staging.rglob("*")):
            if path.is_file():
                entries.append((path.relative_to(staging).as_posix(), path.read_bytes()))
        dist_info = _dist_info_name()
        licenses = _license_files(source, build_dir, shipped)
        entries += [(f"{dist_info}/licenses/{name}", data) for name, data in licenses]
        entries.append((f"{dist_info}/METADATA",
                        _metadata(source, [name for name, _ in licenses], platform).encode()))
        entries.append((f"{dist_info}/WHEEL", _wheel_file(tag).encode()))
        entries.append((f"{dist_info}/top_level.txt", f"{NAME}\n".encode()))
        if with_cli:
            entries.append((f"{dist_info}/entry_points.txt",
                            b"[console_scripts]\nzeus = zeus_cpp._cli:main\n"))

        record_lines = [f"{name},sha256={_digest(data)},{len(data)}" for name, data in entries]
        record_name = f"{dist_info}/RECORD"
        record_lines.append(f"{record_name},,")
        entries.append((record_name, ("\n".join(record_lines) + "\n").encode()))

        partial = wheel_path.with_suffix(".partial")
        with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as wheel:
            for name, data in entries:
                info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                executable = ".so" in Path(name).name or name == f"{NAME}/_bin/zeus"
                info.external_attr = ((0o755 if executable else 0o644) | 0o100000) << 16
                wheel.writestr(info, data)
        partial.replace(wheel_path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
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
        data = _metadata(source).encode()
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
    # The build's output on stderr: stdout is for what the caller prints (scripts/wheel.sh: the
    # wheel's path).
    try:
        stdout: Optional[int] = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a stderr without a descriptor: inherit
        stdout = None
    subprocess.run(command, cwd=cwd, check=True, stdout=stdout)


def _cmake_build(source: Path, build_dir: Path, config_settings: ConfigSettings) -> bool:
    """Builds the package (and the wheel's CLI when the build folder has that target); says
    whether the CLI was built."""
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
    targets = ["zeus_cpp"]
    with_cli = _has_target(cmake, build_dir, "zeus_wheel_cli")
    if with_cli:
        targets.append("zeus_wheel_cli")
    _run([cmake, "--build", str(build_dir), "--target", *targets, "-j", jobs], source)
    return with_cli


def _has_target(cmake: str, build_dir: Path, target: str) -> bool:
    # The Ninja and Makefile generators both have a `help` target that lists the others.
    listed = subprocess.run([cmake, "--build", str(build_dir), "--target", "help"],
                            capture_output=True, text=True)
    return listed.returncode == 0 and re.search(rf"^(\.\.\. )?{target}(:| |$)", listed.stdout,
                                                re.MULTILINE) is not None


def _repair_mode(config_settings: ConfigSettings) -> bool:
    mode = (_setting(config_settings, "repair", "ZEUS_CPP_WHEEL_REPAIR") or "auto").lower()
    if mode not in ("auto", "yes", "no"):
        raise RuntimeError(f"zeus_cpp: repair must be auto, yes or no, not {mode!r}")
    if mode == "no":
        return False
    missing = zeus_wheel_repair.tools_missing()
    if missing and mode == "yes":
        raise RuntimeError(f"zeus_cpp: repairing the wheel needs {' and '.join(missing)} "
                           "(Debian: apt-get install patchelf)")
    if missing:
        print(f"zeus_build_backend: no {' and '.join(missing)}, so the wheel is not repaired: it "
              "is tagged linux_* and needs this machine's shared libraries", file=sys.stderr)
    return not missing


def _extension_suffix() -> str:
    return sysconfig.get_config_var("EXT_SUFFIX") or ".so"


def _check_extension(package: Path) -> None:
    suffix = _extension_suffix()
    if not (package / f"_zeus{suffix}").exists():
        found = sorted(p.name for p in package.glob("_zeus*"))
        raise RuntimeError(
            f"zeus_cpp: {package} has no _zeus{suffix} for this interpreter ({sys.executable}); "
            f"found {found or 'nothing'}. Was pybind11 found, and was the build folder "
            "configured for this Python (Python_EXECUTABLE)?"
        )


def _interpreter() -> str:
    return f"cp{sys.version_info.major}{sys.version_info.minor}"


def _plain_platform() -> str:
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


def _machine() -> str:
    return os.uname().machine


def _strip_tool(binary: Path) -> Optional[str]:
    """The strip of ``binary``'s own machine: binutils' <machine>-linux-gnu-strip (the host
    strip cannot read a cross-built aarch64 file), else plain strip; None when there is none."""
    machine = zeus_elf.read_elf(binary).machine
    return shutil.which(f"{machine}-linux-gnu-strip") or shutil.which("strip")


def _wheel_tag() -> str:
    return f"{_interpreter()}-{_interpreter()}-{_plain_platform()}"


def _dist_info_name() -> str:
    return f"{NAME}-{VERSION}.dist-info"


def _metadata(source: Path, license_files: Tuple[str, ...] | List[str] = (),
              platform: Optional[str] = None) -> str:
    """METADATA (or the sdist's PKG-INFO when ``platform`` is None: the README, which describes
    the source tree, is its long description). A wheel's long description is its own
    (wheel-description.md), naming the interpreter and the machines it is for."""
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {DIST_NAME}",
        f"Version: {VERSION}",
        f"Summary: {SUMMARY}",
        "License: Apache-2.0",
        f"Requires-Python: {REQUIRES_PYTHON}",
    ]
    lines += [f"Requires-Dist: {requirement}" for requirement in REQUIRES_DIST]
    lines += [f"License-File: {name}" for name in license_files]
    if platform is not None:
        description = (Path(__file__).resolve().parent / "wheel-description.md").read_text(
            encoding="utf-8")
        description = description.replace("@PYTHON@", "{}.{}".format(*sys.version_info[:2]))
        description = description.replace("@PLATFORM@", _platform_text(platform))
    elif (source / "README.md").is_file():
        description = (source / "README.md").read_text(encoding="utf-8")
    else:
        return "\n".join(lines) + "\n"
    lines.append("Description-Content-Type: text/markdown")
    return "\n".join(lines) + "\n\n" + description


def _platform_text(platform: str) -> str:
    """What a platform tag means for a user, for the wheel's description."""
    found = re.fullmatch(r"manylinux_(\d+)_(\d+)_(\w+)", platform)
    if found:
        major, minor, machine = found.groups()
        return (f"Linux on {machine} with glibc {major}.{minor} or newer and a libstdc++ at least "
                f"as new as that glibc's distributions ship (`{platform}`; e.g. Ubuntu 22.04, "
                "Debian 12 and later, for `manylinux_2_35`)")
    return (f"`{platform}`: a build not made self-contained (no patchelf), so it needs the shared "
            "libraries of the machine that built it")


# Debian files whose packages' code is compiled into the extension or the CLI (header-only
# libraries, and Chart.js embedded by `zeus report`); their licences go into the wheel beside those
# of the shipped shared libraries.
_COMPILED_IN = [
    "/usr/include/nlohmann/json.hpp",
    "/usr/include/CLI/CLI.hpp",
    "/usr/include/boost/beast.hpp",
    "/usr/include/pybind11/pybind11.h",
    "/usr/include/spdlog/spdlog.h",
    "/usr/include/fmt/format.h",
    "/usr/include/httplib.h",
]


def _license_files(source: Path, build_dir: Path,
                   shipped: Dict[str, Path]) -> List[Tuple[str, bytes]]:
    """(name under <dist-info>/licenses, text): the project's LICENSE, then each Debian package's
    copyright file for what is compiled in or shipped."""
    files: List[Tuple[str, bytes]] = []
    if (source / "LICENSE").is_file():
        files.append(("LICENSE", (source / "LICENSE").read_bytes()))
    paths = [Path(p) for p in _COMPILED_IN] + list(shipped.values())
    chartjs = _cache_value(build_dir, "ZEUS_CHARTJS_PATH")
    if chartjs:
        paths.append(Path(chartjs))
    packages = set()
    for path in paths:
        if not path.exists():
            continue
        package = zeus_wheel_repair.debian_package(path)
        copyright_file = Path("/usr/share/doc") / (package or "") / "copyright"
        if package is None or not copyright_file.is_file():
            print(f"zeus_build_backend: no licence file found for {path}; add it by hand",
                  file=sys.stderr)
            continue
        packages.add(package)
    for package in sorted(packages):
        data = (Path("/usr/share/doc") / package / "copyright").read_bytes()
        files.append((f"{package}/copyright", data))
    return files


def _cache_value(build_dir: Path, key: str) -> Optional[str]:
    cache = build_dir / "CMakeCache.txt"
    if not cache.is_file():
        return None
    for line in cache.read_text(errors="replace").splitlines():
        if line.startswith(key + ":"):
            value = line.partition("=")[2].strip()
            return value if value and not value.endswith("-NOTFOUND") else None
    return None


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
        # dist/ (scripts/wheel.sh's output) is not ignored in every checkout; never pack it.
        files = [name for name in listed if name and (source / name).is_file()
                 and name.split("/")[0] not in ("dist", "build")]
        if files:
            return files
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    skip = {"build", "dist", ".git", "__pycache__", ".pytest_cache", "out", ".cache"}
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if path.is_file() and not skip.intersection(relative.parts):
            files.append(relative.as_posix())
    return files
