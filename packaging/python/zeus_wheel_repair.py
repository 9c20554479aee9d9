"""Makes the staged wheel tree self-contained, and says which manylinux tag it truly has.

The extension module and the `zeus` CLI are linked against the build machine's shared libraries
(Debian's spdlog, fmt, cpp-httplib, OpenSSL, zlib, brotli, SQLite). :func:`bundle` copies every
library they load that is not on the manylinux allow-list (glibc's libraries, libstdc++,
libgcc_s, the dynamic loader) into ``zeus_cpp.libs/`` under a name made unique with a hash of its
contents (``libssl-1a2b3c4d.so.3``, as auditwheel does, so that a process that also loads the
system's libssl keeps the two apart), rewrites every DT_NEEDED that named it and sets each file's
search path to ``$ORIGIN``-relative entries, with patchelf. libstdc++ stays the system's: the
shipped Debian C++ libraries need it too, so linking it statically into our two files only would
leave two copies in the process and remove no requirement.

:func:`platform_tag` reads the GLIBC_/GLIBCXX_/CXXABI_ symbol versions every shipped file needs and
returns the oldest ``manylinux_2_X`` that provides them all. :func:`problems` is the check that the
result holds (run by the backend after bundling, and by tests/wheel over an unpacked wheel).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

import zeus_elf

LIBS_DIR = "zeus_cpp.libs"

# The libraries every manylinux system has, so a wheel may use the system's (PEP 600, policy of
# auditwheel; glibc's own libraries, the C++ runtime and the loader).
ALLOWED = frozenset({
    "libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1",
    "libstdc++.so.6", "libgcc_s.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
})

# libstdc++ and its ABI versions by manylinux_2_X: what the oldest widespread distribution with
# that glibc ships (its GCC's runtime). A file needing a newer GLIBCXX_ or CXXABI_ than a row
# allows needs a later glibc's row, whatever its GLIBC_ versions say.
#   (glibc minor, highest GLIBCXX_, highest CXXABI_, reference distribution)
_LIBSTDCXX_BY_GLIBC: List[Tuple[int, Tuple[int, ...], Tuple[int, ...], str]] = [
    (17, (3, 4, 19), (1, 3, 7), "CentOS 7, GCC 4.8"),
    (24, (3, 4, 22), (1, 3, 10), "Debian 9, GCC 6"),
    (27, (3, 4, 24), (1, 3, 11), "Ubuntu 18.04, GCC 7"),
    (28, (3, 4, 25), (1, 3, 11), "RHEL 8, GCC 8"),
    (31, (3, 4, 28), (1, 3, 12), "Debian 11 and Ubuntu 20.04, GCC 10"),
    (34, (3, 4, 29), (1, 3, 13), "RHEL 9, GCC 11"),
    (35, (3, 4, 30), (1, 3, 13), "Ubuntu 22.04, GCC 12"),
    (36, (3, 4, 30), (1, 3, 13), "Debian 12, GCC 12"),
    (38, (3, 4, 32), (1, 3, 14), "Ubuntu 23.10, GCC 13"),
    (39, (3, 4, 33), (1, 3, 15), "Ubuntu 24.04, GCC 14"),
]


class RepairError(RuntimeError):
    pass


def _run(command: List[str]) -> str:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RepairError(f"{' '.join(command)} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


def tools_missing() -> List[str]:
    return [tool for tool in ("patchelf",) if shutil.which(tool) is None]


def _list_libraries(binary: Path) -> str:
    """What the dynamic loader of ``binary``'s own machine says it would map (``ld.so --list``,
    which is what ldd runs): natively, or under user-mode emulation (qemu-aarch64) for a file of
    another machine, such as the cross-built aarch64 wheel's on x86_64. The kernel, not Python,
    says which: under emulation os.uname() reports the emulated machine."""
    machine = zeus_elf.read_elf(binary).machine
    loader = zeus_elf.LOADERS.get(machine)
    if loader is None:
        raise RepairError(f"{binary}: no dynamic loader known for machine {machine}")
    command = [loader, "--list", str(binary)]
    try:
        result = subprocess.run(command, capture_output=True, text=True)
    except OSError:  # ENOEXEC (another machine's loader) or no such loader here
        emulator = f"qemu-{machine}"
        if shutil.which(emulator) is None:
            raise RepairError(f"{binary}: is for {machine}; listing its libraries needs {loader} "
                              f"and {emulator} (apt-get install qemu-user)") from None
        command = [emulator, *command]
        result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        # Unlike ldd, the loader stops at the first library it cannot find.
        missing = re.search(r"error while loading shared libraries: ([^:]+):", result.stderr)
        if missing:
            raise RepairError(f"{binary}: the loader cannot find {missing.group(1)} on this machine")
        raise RepairError(f"{' '.join(command)} failed ({result.returncode}): "
                          f"{result.stderr.strip()}")
    return result.stdout


def loaded_libraries(binary: Path) -> Dict[str, Path]:
    """Every shared library the loader maps for ``binary`` (its whole closure), by DT_NEEDED
    name, as the loader of the file's machine resolves them on this machine."""
    found: Dict[str, Path] = {}
    for line in _list_libraries(binary).splitlines():
        match = re.match(r"\s*(\S+)\s+=>\s+(.*?)\s+\(0x[0-9a-f]+\)\s*$", line)
        if match:
            found[match.group(1)] = Path(match.group(2))
        elif "=> not found" in line:
            raise RepairError(f"{binary}: the loader cannot find {line.split()[0]} on this machine")
    return found


def unique_name(name: str, path: Path) -> str:
    """libssl.so.3 -> libssl-<first 8 hex digits of the file's sha256>.so.3"""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:8]
    stem, dot, rest = name.partition(".so")
    return f"{stem}-{digest}{dot}{rest}"


def _relative_origin(binary: Path, libs: Path) -> str:
    relative = os.path.relpath(libs, binary.parent)
    return "$ORIGIN" if relative == "." else f"$ORIGIN/{relative}"


def bundle(root: Path, binaries: Iterable[Path], libs_dir: str = LIBS_DIR) -> Dict[str, Path]:
    """Copies the non-allow-listed closure of ``binaries`` (files under ``root``: the staged wheel
    tree, or the CLI archive's) into ``root/libs_dir`` and patches every file. Returns {new name:
    source path}."""
    binaries = list(binaries)
    sources: Dict[str, Path] = {}
    for binary in binaries:
        for name, path in loaded_libraries(binary).items():
            if name not in ALLOWED:
                sources.setdefault(name, path.resolve())
    libs = root / libs_dir
    libs.mkdir(exist_ok=True)
    renamed = {name: unique_name(name, path) for name, path in sources.items()}

    def replacements(info: zeus_elf.ElfInfo) -> List[str]:
        arguments: List[str] = []
        for needed in info.needed:
            if needed in renamed:
                arguments += ["--replace-needed", needed, renamed[needed]]
        return arguments

    def patch(file: Path, *arguments: str) -> None:
        # One change per patchelf call: 0.14 mixes up --set-rpath and --replace-needed given
        # together (the search path came out as a library name).
        _run(["patchelf", *arguments, str(file)])

    def relink(file: Path, search_path: str) -> None:
        replace = replacements(zeus_elf.read_elf(file))
        if replace:
            patch(file, *replace)
        patch(file, "--set-rpath", search_path)
        info = zeus_elf.read_elf(file)
        left = [needed for needed in info.needed if needed in renamed]
        if left or info.search_paths() != [search_path]:
            raise RepairError(f"patchelf left {file} with DT_NEEDED {info.needed} and search path "
                              f"{info.search_paths()}")

    for name, path in sources.items():
        target = libs / renamed[name]
        shutil.copyfile(path, target)
        target.chmod(0o755)
        patch(target, "--set-soname", renamed[name])
        relink(target, "$ORIGIN")
    for binary in binaries:
        relink(binary, _relative_origin(binary, libs))
    return {renamed[name]: path for name, path in sources.items()}


def elf_files(root: Path) -> List[Path]:
    return sorted(path for path in root.rglob("*")
                  if path.is_file() and not path.is_symlink() and zeus_elf.is_elf(path))


def problems(root: Path) -> List[str]:
    """What keeps the tree at ``root`` from loading on a machine without the build's libraries:
    a DT_NEEDED that is neither allow-listed nor a file found through the file's own
    ``$ORIGIN`` search path, and any search-path entry that is not ``$ORIGIN``-relative."""
    found: List[str] = []
    for path in elf_files(root):
        relative = path.relative_to(root).as_posix()
        try:
            info = zeus_elf.read_elf(path)
        except (ValueError, IndexError, OSError) as error:
            found.append(f"{relative}: unreadable ELF file ({error})")
            continue
        directories: List[Path] = []
        for entry in info.search_paths():
            if not entry.startswith("$ORIGIN") and not entry.startswith("${ORIGIN}"):
                found.append(f"{relative}: search path {entry!r} is not relative to $ORIGIN")
                continue
            tail = entry.replace("${ORIGIN}", "$ORIGIN")[len("$ORIGIN"):].lstrip("/")
            directories.append((path.parent / tail).resolve())
        for needed in info.needed:
            if needed in ALLOWED:
                continue
            if "/" in needed:
                found.append(f"{relative}: needs {needed} by path")
                continue
            if not any((directory / needed).is_file() for directory in directories):
                found.append(f"{relative}: needs {needed}, which is neither on the manylinux "
                             f"allow-list nor shipped in the wheel beside its $ORIGIN search path")
    return found


def platform_tag(root: Path, machine: str = "x86_64") -> Tuple[str, str]:
    """(manylinux_2_X_<machine>, why): the oldest manylinux whose glibc and libstdc++ provide every
    symbol version the ELF files under ``root`` need."""
    infos = [zeus_elf.read_elf(path) for path in elf_files(root)]
    glibc = zeus_elf.highest_version(infos, "GLIBC_") or (2, 17)
    glibcxx = zeus_elf.highest_version(infos, "GLIBCXX_")
    cxxabi = zeus_elf.highest_version(infos, "CXXABI_")
    minor = max(17, glibc[1] if len(glibc) > 1 else 0)
    reasons = [f"GLIBC_{'.'.join(map(str, glibc))}"]
    if glibcxx or cxxabi:
        row: Optional[Tuple[int, Tuple[int, ...], Tuple[int, ...], str]] = None
        for candidate in _LIBSTDCXX_BY_GLIBC:
            if (glibcxx or ()) <= candidate[1] and (cxxabi or ()) <= candidate[2]:
                row = candidate
                break
        if row is None:
            raise RepairError(f"no manylinux row knows a libstdc++ with GLIBCXX_{glibcxx} and "
                              f"CXXABI_{cxxabi}; extend _LIBSTDCXX_BY_GLIBC")
        minor = max(minor, row[0])
        reasons.append(f"GLIBCXX_{'.'.join(map(str, glibcxx or ()))}, "
                       f"CXXABI_{'.'.join(map(str, cxxabi or ()))} (libstdc++ of {row[3]})")
    return f"manylinux_2_{minor}_{machine}", "; ".join(reasons)


def debian_package(path: Path) -> Optional[str]:
    """The Debian package that installed ``path`` (tried as given, resolved, and under /usr for
    merged-/usr systems), or None (not Debian, or not from a package)."""
    if shutil.which("dpkg-query") is None:
        return None
    candidates = [str(path), str(path.resolve())]
    # Merged /usr: a package may have installed /lib/... or /usr/lib/..., whichever the path says.
    candidates += [c[len("/usr"):] if c.startswith("/usr/") else "/usr" + c
                   for c in list(candidates)]
    for candidate in candidates:
        result = subprocess.run(["dpkg-query", "-S", candidate], capture_output=True, text=True)
        if result.returncode == 0 and ":" in result.stdout:
            return result.stdout.split(":")[0].strip()
    return None
