"""The `zeus` CLI as a tarball, for nodes without Python: the wheel's CLI and the same repair.

    /usr/bin/python3 packaging/python/zeus_cli_tarball.py BUILD_DIR OUT_DIR

packs ``zeus-<version>-<platform>.tar.gz`` into OUT_DIR from BUILD_DIR (a `release` or `aarch64`
build that has built the ``zeus_wheel_cli`` target) and prints its path. Inside, one folder
``zeus-<version>-<platform>/`` holds ``bin/zeus``, the shared libraries it needs beyond the
manylinux allow-list under ``lib/`` (hashed sonames, found through ``$ORIGIN/../lib``: the wheel's
repair, zeus_wheel_repair), the licences under ``licenses/`` and a README. ``<platform>`` is the
wheel's kind of tag, ``manylinux_2_X_<machine>``, computed the same way from the symbol versions
the files need: the archive runs on any Linux of that machine with glibc 2.X or later. The machine
is the CLI's own (its ELF header), so one host packs both the x86_64 and the cross-built aarch64
archive (docs/arm.md).
"""

from __future__ import annotations

import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import zeus_build_backend as backend  # noqa: E402
import zeus_elf  # noqa: E402
import zeus_wheel_repair  # noqa: E402

_README = """zeus {version} for {platform}

The zeus command-line tool of zeus-cpp (measure and optimize the energy of GPU training), with the
shared libraries it needs in lib/. Unpack anywhere and run bin/zeus; nothing is installed.
It runs on Linux on {machine} with glibc 2.{glibc} or later (the {platform} tag says which C and C++
runtime versions it needs: {why}). NVML (NVIDIA) and AMD SMI are loaded at run time from the
driver, as on every zeus-cpp build; without a GPU it measures the simulated GPUs of
ZEUS_SIMULATED_GPUS. `bin/zeus --help` lists the commands; licences/ has the licences of the
libraries in lib/.
"""


def build(build_dir: Path, out_dir: Path) -> Path:
    cli = build_dir / "src" / "cli" / "wheel" / "zeus"
    if not cli.is_file():
        raise SystemExit(f"zeus_cli_tarball: {cli} is missing: build the zeus_wheel_cli target of "
                         f"{build_dir} first (cmake --build {build_dir} --target zeus_wheel_cli)")
    machine = zeus_elf.read_elf(cli).machine
    source = Path(__file__).resolve().parents[2]
    staging = Path(tempfile.mkdtemp(prefix="cli-staging-", dir=build_dir))
    try:
        (staging / "bin").mkdir()
        binary = staging / "bin" / "zeus"
        shutil.copy2(cli, binary)
        strip = backend._strip_tool(binary)
        if strip:
            backend._run([strip, "--strip-unneeded", str(binary)], source)
        shipped = zeus_wheel_repair.bundle(staging, [binary], libs_dir="lib")
        found = zeus_wheel_repair.problems(staging)
        if found:
            raise SystemExit("zeus_cli_tarball: the archive would not run elsewhere:\n  "
                             + "\n  ".join(found))
        platform, why = zeus_wheel_repair.platform_tag(staging, machine)
        glibc = platform.split("_")[2]
        (staging / "licenses").mkdir()
        for name, data in backend._license_files(source, build_dir, shipped):
            target = staging / "licenses" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        (staging / "README").write_text(_README.format(version=backend.VERSION, platform=platform,
                                                       machine=machine, glibc=glibc, why=why),
                                        encoding="utf-8")
        base = f"zeus-{backend.VERSION}-{platform}"
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"{base}.tar.gz"
        partial = path.with_name(path.name + ".partial")
        with tarfile.open(partial, "w:gz") as archive:
            for file in sorted(staging.rglob("*")):
                relative = file.relative_to(staging).as_posix()
                info = archive.gettarinfo(str(file), arcname=f"{base}/{relative}")
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                info.mtime = 1577836800  # 2020-01-01, as the wheel's entries: reproducible
                if file.is_file():
                    with open(file, "rb") as stream:
                        archive.addfile(info, stream)
                else:
                    archive.addfile(info)
        partial.replace(path)
        print(f"zeus_cli_tarball: {platform} ({why}); shipped {', '.join(sorted(shipped)) or 'nothing'}",
              file=sys.stderr)
        return path
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def main(argv: list) -> int:
    if len(argv) != 3:
        print("usage: zeus_cli_tarball.py BUILD_DIR OUT_DIR", file=sys.stderr)
        return 2
    print(build(Path(argv[1]).resolve(), Path(argv[2])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
