"""Intel/AMD RAPL CPU packages at the reference's path ``zeus.device.cpu.rapl``.

RAPL is read from C++; this module offers the reference's availability probe and
:func:`get_current_rapl_zone_id`.
"""

from __future__ import annotations

import os
import re
from typing import List, Optional, Tuple, Union

from zeus_cpp.device._vendor import vendor_class
from zeus_cpp.exception import ZeusRAPLNotSupportedError

# Where the kernel's powercap driver lists the RAPL zones.
RAPL_DIR = "/sys/class/powercap/intel-rapl"


def rapl_is_available() -> bool:
    """Whether the kernel exposes RAPL (its powercap folder exists; reading it may still need
    privileges)."""
    return os.path.exists(RAPL_DIR)


# Where the process's CPU and the CPUs' topology are read (tests point these at fake trees).
_PROC_ROOT = "/proc"
_CPU_SYSFS_ROOT = "/sys/devices/system/cpu"
_ZONE_FOLDER = re.compile(r"^intel-rapl:(\d+)$")


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as file:
        return file.read().strip()


def _powercap_root() -> str:
    # The same choice as the C++ discovery: ZEUS_POWERCAP_ROOT, else the kernel's folder, else
    # the container mount the reference also looks at, where only that one has a package zone.
    configured = os.environ.get("ZEUS_POWERCAP_ROOT")
    if configured:
        return configured
    primary, fallback = "/sys/class/powercap", "/zeus_sys/class/powercap"
    if not _package_zones(primary) and _package_zones(fallback):
        return fallback
    return primary


def _package_zones(root: str) -> List[Tuple[int, str]]:
    """(N, name) of each package zone intel-rapl:N below ``root`` (both layouts the C++
    discovery reads: top-level and under intel-rapl/), by N; unreadable names are skipped."""
    found = {}
    for folder in (root, os.path.join(root, "intel-rapl")):
        try:
            entries = os.listdir(folder)
        except OSError:
            continue
        for entry in entries:
            match = _ZONE_FOLDER.match(entry)
            if match is None or int(match.group(1)) in found:
                continue
            try:
                name = _read(os.path.join(folder, entry, "name"))
            except OSError:
                continue
            if name.startswith("package"):
                found[int(match.group(1))] = name
    return sorted(found.items())


def _cpu_of(pid: int) -> int:
    # /proc/<pid>/stat field 39 is the CPU the task last ran on; field 2 (the command) is in
    # parentheses and may hold spaces, so the fields are counted after its closing one.
    path = os.path.join(_PROC_ROOT, str(pid), "stat")
    try:
        stat = _read(path)
    except OSError as error:
        raise ZeusRAPLNotSupportedError(
            f"cannot read {path} to learn which CPU process {pid} runs on: {error}"
        ) from error
    fields = stat[stat.rfind(")") + 1 :].split()
    try:
        return int(fields[39 - 3])
    except (IndexError, ValueError) as error:
        raise ZeusRAPLNotSupportedError(
            f"{path}: field 39 (the CPU) is missing or not a number"
        ) from error


def get_current_rapl_zone_id(pid: Union[int, str] = "current") -> int:
    """The RAPL zone (N of ``intel-rapl:N``, the index of :func:`zeus_cpp.device.cpu.get_cpus`)
    of the CPU package process ``pid`` (default: this process) last ran on, as the reference.

    The CPU comes from ``/proc/<pid>/stat``; its ``physical_package_id`` (and ``die_id`` where
    the kernel has one) from its sysfs topology; the zone is the package zone named
    ``package-<package>`` or ``package-<package>-die-<die>``. Only names are read, so no
    privilege is needed. Raises :class:`ZeusRAPLNotSupportedError` when any step fails.
    """
    if pid == "current":
        pid = os.getpid()
    if isinstance(pid, bool) or not isinstance(pid, int):
        raise TypeError(f'pid must be an int or "current", not {pid!r}')
    cpu = _cpu_of(pid)
    topology = os.path.join(_CPU_SYSFS_ROOT, f"cpu{cpu}", "topology")
    try:
        package = int(_read(os.path.join(topology, "physical_package_id")))
    except (OSError, ValueError) as error:
        raise ZeusRAPLNotSupportedError(
            f"cannot read the package of CPU {cpu} from {topology}/physical_package_id: {error}"
        ) from error
    die: Optional[int] = None
    try:
        die = int(_read(os.path.join(topology, "die_id")))
    except (OSError, ValueError):
        die = None  # kernels before 5.3 have no die_id
    wanted = {f"package-{package}"}
    if die is not None:
        wanted.add(f"package-{package}-die-{die}")
    root = _powercap_root()
    zones = _package_zones(root)
    for index, name in zones:
        if name in wanted:
            return index
    raise ZeusRAPLNotSupportedError(
        f"no RAPL package zone named {' or '.join(sorted(wanted))} (CPU {cpu} of process {pid}) "
        f"under {root}; zones found: {[name for _, name in zones] or 'none'}"
    )


def _is_rapl_cpus(value: object) -> bool:
    from zeus_cpp.device.cpu import CPUs

    return isinstance(value, CPUs) and len(value) > 0


def _is_rapl_cpu(value: object) -> bool:
    from zeus_cpp.device.cpu import CPU

    return isinstance(value, CPU)


def _through_zeusd(value: object) -> bool:
    from zeus_cpp import _zeus

    return _is_rapl_cpu(value) and _zeus._cpus_through_zeusd()


def _rapl_cpus():  # noqa: ANN202
    from zeus_cpp.device.cpu import get_cpus

    return get_cpus()


def _not_constructed(name: str) -> TypeError:
    return TypeError(f"{name} is not constructed directly in zeus_cpp: use get_cpus().cpus")


# The reference's constructor parameters (shown by inspect.signature), refused.
def _rapl_cpu(cpu_index: int, rapl_dir: str) -> None:
    raise _not_constructed("RAPLCPU")


def _zeusd_rapl_cpu(cpu_index: int, client: object) -> None:
    raise _not_constructed("ZeusdRAPLCPU")


# The reference's classes, as checks on zeus_cpp's one CPUs and CPU classes (device/_vendor.py):
# every package on Linux is RAPL, read locally or (ZeusdRAPLCPU) through the zeusd daemon.
RAPLCPUs = vendor_class(
    "RAPLCPUs",
    "RAPL CPU packages: ``isinstance(cpus, RAPLCPUs)`` holds for a CPUs with packages; "
    "``RAPLCPUs()`` is get_cpus().",
    _is_rapl_cpus, _rapl_cpus, __name__,
)
RAPLCPU = vendor_class(
    "RAPLCPU", "One RAPL package: ``isinstance(cpu, RAPLCPU)`` for each of ``get_cpus().cpus``.",
    _is_rapl_cpu, _rapl_cpu, __name__,
)
ZeusdRAPLCPU = vendor_class(
    "ZeusdRAPLCPU",
    "One RAPL package read through the zeusd daemon (ZEUSD_SOCK_PATH or ZEUSD_HOST_PORT set and "
    "RAPL not readable locally).",
    _through_zeusd, _zeusd_rapl_cpu, __name__,
)

__all__ = ["rapl_is_available", "get_current_rapl_zone_id", "RAPL_DIR", "RAPLCPUs", "RAPLCPU",
           "ZeusdRAPLCPU"]
