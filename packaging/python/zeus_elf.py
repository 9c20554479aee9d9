"""The few facts about an ELF file that packing a wheel needs, read with the standard library.

The wheel backend (zeus_wheel_repair) and the wheel tests both ask the same questions of every
native file: which shared libraries it names (DT_NEEDED), where it looks for them (DT_RPATH,
DT_RUNPATH), what it calls itself (DT_SONAME) and which symbol versions it needs from each library
(the GNU version-needs table, .gnu.version_r: GLIBC_2.34 from libc.so.6, GLIBCXX_3.4.30 from
libstdc++.so.6, ...). Only 64-bit little-endian files are read (x86_64, aarch64), which is what
the wheel is built for; anything else raises ValueError.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

_SHT_DYNAMIC = 6
_SHT_GNU_VERNEED = 0x6FFFFFFE
_DT_NEEDED = 1
_DT_SONAME = 14
_DT_RPATH = 15
_DT_RUNPATH = 29

# e_machine values of the two machines the wheel is built for, and where each one's dynamic loader
# lives on a Debian (multiarch) system; the loader lists a file's libraries (`ld.so --list`).
MACHINES = {62: "x86_64", 183: "aarch64"}
LOADERS = {"x86_64": "/lib64/ld-linux-x86-64.so.2", "aarch64": "/lib/ld-linux-aarch64.so.1"}


@dataclass
class ElfInfo:
    path: Path
    machine: str = "unknown"  # MACHINES' name for e_machine, or "e_machine N"
    needed: List[str] = field(default_factory=list)
    soname: Optional[str] = None
    rpath: Optional[str] = None
    runpath: Optional[str] = None
    # library name -> the version names needed from it, in file order
    versions: Dict[str, List[str]] = field(default_factory=dict)

    def search_paths(self) -> List[str]:
        """RPATH and RUNPATH entries together (either may be absent)."""
        entries: List[str] = []
        for value in (self.rpath, self.runpath):
            if value:
                entries += [entry for entry in value.split(":") if entry]
        return entries


def is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as stream:
            return stream.read(4) == b"\x7fELF"
    except OSError:
        return False


def read_elf(path: Path) -> ElfInfo:
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF":
        raise ValueError(f"{path}: not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise ValueError(f"{path}: only 64-bit little-endian ELF files are read")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections: List[Tuple[int, int, int, int]] = []  # type, offset, size, link
    for index in range(shnum):
        base = shoff + index * shentsize
        sh_type, = struct.unpack_from("<I", data, base + 4)
        sh_offset, sh_size = struct.unpack_from("<QQ", data, base + 0x18)
        sh_link, = struct.unpack_from("<I", data, base + 0x28)
        sections.append((sh_type, sh_offset, sh_size, sh_link))

    def string_at(table: int, offset: int) -> str:
        start = sections[table][1] + offset
        end = data.index(b"\0", start)
        return data[start:end].decode("utf-8", "replace")

    (e_machine,) = struct.unpack_from("<H", data, 0x12)
    info = ElfInfo(Path(path), machine=MACHINES.get(e_machine, f"e_machine {e_machine}"))
    for sh_type, offset, size, link in sections:
        if sh_type == _SHT_DYNAMIC:
            for position in range(offset, offset + size, 16):
                tag, value = struct.unpack_from("<qQ", data, position)
                if tag == 0:
                    break
                if tag == _DT_NEEDED:
                    info.needed.append(string_at(link, value))
                elif tag == _DT_SONAME:
                    info.soname = string_at(link, value)
                elif tag == _DT_RPATH:
                    info.rpath = string_at(link, value)
                elif tag == _DT_RUNPATH:
                    info.runpath = string_at(link, value)
        elif sh_type == _SHT_GNU_VERNEED:
            position = offset
            while True:
                _, count, file_name, aux, following = struct.unpack_from("<HHIII", data, position)
                library = string_at(link, file_name)
                names = info.versions.setdefault(library, [])
                entry = position + aux
                for _ in range(count):
                    _, _, _, name, next_aux = struct.unpack_from("<IHHII", data, entry)
                    names.append(string_at(link, name))
                    entry += next_aux
                if following == 0:
                    break
                position += following
    return info


def version_tuple(name: str, prefix: str) -> Optional[Tuple[int, ...]]:
    """(2, 34) for ("GLIBC_2.34", "GLIBC_"); None for a name of another family."""
    match = re.fullmatch(re.escape(prefix) + r"(\d+(?:\.\d+)*)", name)
    return tuple(int(part) for part in match.group(1).split(".")) if match else None


def highest_version(infos: List[ElfInfo], prefix: str) -> Optional[Tuple[int, ...]]:
    """The highest version of one family (GLIBC_, GLIBCXX_, CXXABI_) needed by any of the files."""
    best: Optional[Tuple[int, ...]] = None
    for info in infos:
        for names in info.versions.values():
            for name in names:
                version = version_tuple(name, prefix)
                if version is not None and (best is None or version > best):
                    best = version
    return best
