"""The wheel's files, unpacked: every native file loads on a machine that has only the manylinux
allow-list (its other libraries are in the wheel, found through $ORIGIN), the tag is the one the
symbol versions call for, RECORD is right, licences and long description are there; and the
check itself catches a broken wheel."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Dict, List, Set, Tuple

from conftest import REPO, clean_environment, run

import zeus_elf
import zeus_wheel_repair

DIST_INFO = "zeus_cpp-0.1.0.dist-info"


def wheel_tag(wheel: Path) -> Tuple[str, str, str]:
    _, _, python, abi, platform = wheel.name[: -len(".whl")].split("-")
    return python, abi, platform


def native_files(root: Path) -> List[Path]:
    return zeus_wheel_repair.elf_files(root)


def objdump_dynamic(path: Path) -> Dict[str, List[str]]:
    """NEEDED/RPATH/RUNPATH/SONAME as binutils reads them (a second opinion on zeus_elf)."""
    result = run(["objdump", "-p", str(path)])
    assert result.returncode == 0, result.stderr
    found: Dict[str, List[str]] = {}
    for line in result.stdout.splitlines():
        match = re.match(r"\s+(NEEDED|RPATH|RUNPATH|SONAME)\s+(\S+)", line)
        if match:
            found.setdefault(match.group(1), []).append(match.group(2))
    return found


def test_name_and_wheel_file(wheel: Path) -> None:
    python, abi, platform = wheel_tag(wheel)
    major, minor = sys.version_info[:2]
    assert python == abi == f"cp{major}{minor}"
    assert re.fullmatch(r"manylinux_2_\d+_x86_64", platform), platform
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read(f"{DIST_INFO}/WHEEL").decode()
    assert f"Tag: {python}-{abi}-{platform}\n" in text
    assert "Root-Is-Purelib: false" in text


def test_contents(unpacked: Path) -> None:
    package = unpacked / "zeus_cpp"
    assert (package / "__init__.py").is_file() and (package / "_cli.py").is_file()
    assert list(package.glob("_zeus.cpython-*.so"))
    assert (package / "_bin" / "zeus").is_file()
    assert (package / "_bin" / "zeus").stat().st_mode & 0o111
    libs = sorted(path.name for path in (unpacked / "zeus_cpp.libs").iterdir())
    # Names made unique: <name>-<8 hex digits>.so.<version>, as auditwheel does.
    for name in libs:
        assert re.fullmatch(r"lib[\w+.-]+-[0-9a-f]{8}\.so(\.\d+)*", name), name
    stems = {name.rsplit("-", 1)[0] for name in libs}
    assert {"libspdlog", "libfmt", "libcpp-httplib", "libssl", "libcrypto", "libz",
            "libsqlite3"} <= stems
    # PostgreSQL is left out of the wheel's CLI (docs/python.md): no libpq and what it drags in.
    assert not stems & {"libpq", "libkrb5", "libldap-2.5", "libgnutls"}
    entry_points = (unpacked / DIST_INFO / "entry_points.txt").read_text()
    assert "[console_scripts]\nzeus = zeus_cpp._cli:main\n" in entry_points


def test_record_lists_every_file_with_its_hash(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        rows = list(csv.reader(io.StringIO(archive.read(f"{DIST_INFO}/RECORD").decode())))
        assert {row[0] for row in rows} == names
        for path, digest, size in rows:
            if path == f"{DIST_INFO}/RECORD":
                assert digest == size == ""
                continue
            data = archive.read(path)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            assert digest == "sha256=" + expected.decode(), path
            assert int(size) == len(data), path


def test_long_description_is_the_wheels_own(wheel: Path, unpacked: Path) -> None:
    """Not the repository's README: nothing the wheel does not ship (docs/ links, build options,
    rebuilding with libpq), and it names this wheel's Python and machines."""
    body = (unpacked / DIST_INFO / "METADATA").read_text().partition("\n\n")[2]
    for absent in ("docs/", "](", "libpq", "PostgreSQL store (", "cmake", "scripts/", "@"):
        assert absent not in body, absent
    interpreter, platform = wheel.name[:-len(".whl")].split("-")[2::2]
    assert f"CPython {interpreter[2]}.{interpreter[3:]}." in body
    assert f"`{platform}`" in body
    assert "CPython 3.10, 3.11, 3.12 and 3.13" in body
    glibc = re.fullmatch(r"manylinux_(\d+)_(\d+)_x86_64", platform)
    if glibc:
        assert f"glibc {glibc[1]}.{glibc[2]} or newer" in body and "Linux on x86_64" in body


def test_metadata_long_description_and_licences(unpacked: Path) -> None:
    metadata = (unpacked / DIST_INFO / "METADATA").read_text()
    head, _, body = metadata.partition("\n\n")
    assert "Name: zeus-cpp" in head and "Version: 0.1.0" in head
    assert "Description-Content-Type: text/markdown" in head
    assert "Requires-Dist: numpy" in head
    assert body.startswith("# zeus-cpp")
    assert "Requires-Python: >=3.10" in head
    licences = unpacked / DIST_INFO / "licenses"
    assert "Apache License" in (licences / "LICENSE").read_text()
    assert "License-File: LICENSE" in head
    listed = set(re.findall(r"^License-File: (\S+)$", head, re.MULTILINE))
    present = {path.relative_to(licences).as_posix() for path in licences.rglob("*") if path.is_file()}
    assert listed == present
    # Chart.js (embedded by `zeus report`), and the package of every shipped library.
    assert "MIT" in (licences / "libjs-chart.js" / "copyright").read_text()
    for package in ("libssl3", "libspdlog1.10", "libfmt9", "libcpp-httplib0.11", "zlib1g",
                    "libbrotli1", "libsqlite3-0", "nlohmann-json3-dev", "libcli11-dev",
                    "pybind11-dev"):
        assert (licences / package / "copyright").is_file(), package


def test_every_native_file_needs_only_allowed_or_shipped_libraries(unpacked: Path) -> None:
    files = native_files(unpacked)
    assert len(files) >= 9
    assert zeus_wheel_repair.problems(unpacked) == []
    shipped = {path.name for path in (unpacked / "zeus_cpp.libs").iterdir()}
    for path in files:
        dynamic = objdump_dynamic(path)
        info = zeus_elf.read_elf(path)
        assert dynamic.get("NEEDED", []) == info.needed, path
        for needed in info.needed:
            assert needed in zeus_wheel_repair.ALLOWED or needed in shipped, (path, needed)
        for entry in dynamic.get("RPATH", []) + dynamic.get("RUNPATH", []):
            for part in entry.split(":"):
                assert part.startswith("$ORIGIN"), (path, entry)
                assert str(REPO) not in part


def test_the_loader_finds_shipped_libraries_inside_the_wheel(unpacked: Path) -> None:
    """ldd, with no LD_LIBRARY_PATH: every library outside the allow-list resolves to a file of
    the unpacked wheel, none to the system's copy."""
    for path in native_files(unpacked):
        result = run(["ldd", str(path)], env=clean_environment())
        assert result.returncode == 0, result.stderr
        for line in result.stdout.splitlines():
            match = re.match(r"\s*(\S+)\s+=>\s+(\S+)", line)
            if not match:
                continue
            name, target = match.groups()
            assert target != "not", f"{path.name}: {line.strip()}"
            if name not in zeus_wheel_repair.ALLOWED:
                assert Path(target).resolve().is_relative_to(unpacked.resolve()), (path, line)


def objdump_versions(path: Path) -> Set[str]:
    result = run(["objdump", "-T", str(path)])
    assert result.returncode == 0, result.stderr
    return set(re.findall(r"\b((?:GLIBC|GLIBCXX|CXXABI)_[0-9.]+)\b", result.stdout))


def highest(versions: Set[str], prefix: str) -> Tuple[int, ...]:
    return max((tuple(map(int, v[len(prefix):].split("."))) for v in versions
                if v.startswith(prefix)), default=())


def test_tag_matches_the_symbol_versions(wheel: Path, unpacked: Path) -> None:
    """The versions as objdump -T reads them: the tag's glibc is the highest GLIBC_ any file needs,
    raised to the first manylinux whose libstdc++ has every GLIBCXX_/CXXABI_ they need."""
    _, _, platform = wheel_tag(wheel)
    minor = int(platform.split("_")[2])
    versions: Set[str] = set()
    for path in native_files(unpacked):
        versions |= objdump_versions(path)
    glibc, glibcxx, cxxabi = (highest(versions, p) for p in ("GLIBC_", "GLIBCXX_", "CXXABI_"))
    assert glibc[:2] <= (2, minor), (glibc, platform)
    floor = min(row[0] for row in zeus_wheel_repair._LIBSTDCXX_BY_GLIBC
                if glibcxx <= row[1] and cxxabi <= row[2])
    assert minor == max(17, glibc[1], floor), (glibc, glibcxx, cxxabi, platform)
    assert zeus_wheel_repair.platform_tag(unpacked)[0] == platform


def corrupt_copy(unpacked: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "wheel"
    shutil.copytree(unpacked, copy, symlinks=True)
    return copy


def test_the_check_catches_a_broken_vendored_library(unpacked: Path, tmp_path: Path) -> None:
    copy = corrupt_copy(unpacked, tmp_path)
    libs = copy / "zeus_cpp.libs"
    spdlog = next(libs.glob("libspdlog-*.so*"))
    fmt = next(name for name in zeus_elf.read_elf(spdlog).needed if name.startswith("libfmt-"))
    # 1. a shipped library naming the system's library again (an unpatched copy)
    subprocess.run(["patchelf", "--replace-needed", fmt, "libfmt.so.9", str(spdlog)], check=True)
    # 2. a shipped library that went missing
    next(libs.glob("libz-*.so*")).unlink()
    # 3. a binary looking in an absolute build folder
    cli = copy / "zeus_cpp" / "_bin" / "zeus"
    subprocess.run(["patchelf", "--set-rpath", f"{REPO}/build/release/lib", str(cli)], check=True)
    found = "\n".join(zeus_wheel_repair.problems(copy))
    assert f"{spdlog.name}: needs libfmt.so.9" in found
    assert "needs libz-" in found
    assert f"zeus_cpp/_bin/zeus: search path '{REPO}/build/release/lib' is not relative" in found
    assert zeus_wheel_repair.problems(unpacked) == []


def test_console_script_without_the_binary_says_so(unpacked: Path, tmp_path: Path) -> None:
    copy = corrupt_copy(unpacked, tmp_path)
    (copy / "zeus_cpp" / "_bin" / "zeus").unlink()
    result = run([sys.executable, "-m", "zeus_cpp._cli", "show-env"],
                 env=clean_environment(PYTHONPATH=str(copy)), cwd=tmp_path)
    assert result.returncode == 127, result.stderr
    assert "the zeus command-line tool is not installed with this zeus_cpp" in result.stderr
    assert "_bin/zeus is missing" in result.stderr
    assert "Traceback" not in result.stderr


def test_building_again_gives_the_same_wheel(wheel: Path, build_dir: Path, tmp_path: Path) -> None:
    """Two more builds from the same build folder are byte for byte the same (hashed names come
    from the libraries' contents, timestamps are fixed, the build folder's own files are never
    patched), under the tested wheel's name: what installed once installs again."""
    env = clean_environment(ZEUS_CPP_BUILD_DIR=str(build_dir), ZEUS_CPP_WHEEL_REPAIR="yes")
    built = []
    for attempt in ("first", "second"):
        result = run([sys.executable, "-c",
                      "import sys; sys.path.insert(0, sys.argv[1]); import zeus_build_backend as b; "
                      "print(b.build_wheel(sys.argv[2]))",
                      str(REPO / "packaging" / "python"), str(tmp_path / attempt)],
                     env=env, cwd=REPO, timeout=900)
        assert result.returncode == 0, result.stderr
        built.append(tmp_path / attempt / result.stdout.split()[-1])
    assert built[0].name == built[1].name == wheel.name
    assert built[0].read_bytes() == built[1].read_bytes()
    # The build folder's extension is still the unpatched one (no $ORIGIN search path).
    extension = next((build_dir / "python" / "zeus_cpp").glob("_zeus*.so"))
    assert not any("zeus_cpp.libs" in entry for entry in zeus_elf.read_elf(extension).search_paths())


def test_sdist_holds_the_sources_and_metadata(tmp_path: Path) -> None:
    import zeus_build_backend

    name = zeus_build_backend.build_sdist(str(tmp_path))
    assert name == "zeus_cpp-0.1.0.tar.gz"
    with tarfile.open(tmp_path / name) as archive:
        names = set(archive.getnames())
        pkg_info = archive.extractfile("zeus_cpp-0.1.0/PKG-INFO").read().decode()
    for required in ("pyproject.toml", "CMakeLists.txt", "CMakePresets.json", "LICENSE",
                     "README.md", "src/cli/main.cpp", "src/cli/CMakeLists.txt",
                     "python/zeus_cpp/_cli.py", "packaging/python/zeus_build_backend.py",
                     "packaging/python/zeus_wheel_repair.py", "packaging/python/zeus_elf.py"):
        assert f"zeus_cpp-0.1.0/{required}" in names, required
    assert not any(n.split("/")[1] in ("build", "dist", ".git") for n in names if "/" in n)
    assert "Version: 0.1.0" in pkg_info and "Description-Content-Type: text/markdown" in pkg_info
