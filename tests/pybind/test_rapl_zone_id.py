"""get_current_rapl_zone_id: the RAPL package zone of the CPU a process runs on, on fake trees.

Each test builds a procfs (``<pid>/stat``), a CPU topology and a powercap tree under tmp_path,
the powercap one in either layout the C++ discovery reads (zones at the top, or under
``intel-rapl/``), and points the module at them (ZEUS_POWERCAP_ROOT for powercap, as the C++
discovery).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, Optional

import pytest

from zeus_cpp.device.cpu import get_current_rapl_zone_id as from_cpu
from zeus_cpp.device.cpu import rapl
from zeus_cpp.device.cpu.rapl import get_current_rapl_zone_id
from zeus_cpp.exception import ZeusRAPLNotSupportedError

PID = 4242


def _stat(pid: int, cpu: int, command: str = "python3") -> str:
    # Fields 3..52 after "(command)"; field 39 (the CPU) is the 37th of them.
    rest = ["S"] + [str(n) for n in range(4, 53)]
    rest[39 - 3] = str(cpu)
    return f"{pid} ({command}) " + " ".join(rest) + "\n"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def make_trees(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cpu: int,
    topology: Dict[int, tuple],
    zones: Dict[int, str],
    nested: bool = False,
    command: str = "python3",
) -> None:
    """topology: {cpu: (package, die or None)}; zones: {N: name of intel-rapl:N}."""
    proc = tmp_path / "proc"
    _write(proc / str(PID) / "stat", _stat(PID, cpu, command))
    _write(proc / str(os.getpid()) / "stat", _stat(os.getpid(), cpu, command))
    cpus = tmp_path / "cpu"
    for index, (package, die) in topology.items():
        _write(cpus / f"cpu{index}" / "topology" / "physical_package_id", f"{package}\n")
        if die is not None:
            _write(cpus / f"cpu{index}" / "topology" / "die_id", f"{die}\n")
    powercap = tmp_path / "powercap"
    base = powercap / "intel-rapl" if nested else powercap
    for number, name in zones.items():
        _write(base / f"intel-rapl:{number}" / "name", name + "\n")
        _write(base / f"intel-rapl:{number}" / "energy_uj", "1000\n")
        # A DRAM sub-zone, which is no package.
        _write(base / f"intel-rapl:{number}" / f"intel-rapl:{number}:0" / "name", "dram\n")
    (powercap).mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(rapl, "_PROC_ROOT", str(proc))
    monkeypatch.setattr(rapl, "_CPU_SYSFS_ROOT", str(cpus))
    monkeypatch.setenv("ZEUS_POWERCAP_ROOT", str(powercap))


@pytest.mark.parametrize("nested", [False, True])
def test_two_sockets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nested: bool) -> None:
    topology = {0: (0, 0), 1: (0, 0), 2: (1, 0), 3: (1, 0)}
    make_trees(tmp_path, monkeypatch, cpu=3, topology=topology,
               zones={0: "package-0", 1: "package-1"}, nested=nested)
    assert get_current_rapl_zone_id(PID) == 1
    assert get_current_rapl_zone_id() == 1  # "current": this process's stat
    assert get_current_rapl_zone_id("current") == 1
    assert from_cpu is get_current_rapl_zone_id


def test_zone_numbers_need_not_match_packages(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # The kernel may number zones in any order: the name decides, not the number.
    make_trees(tmp_path, monkeypatch, cpu=0, topology={0: (1, None)},
               zones={0: "package-0", 1: "psys", 2: "package-1"})
    assert get_current_rapl_zone_id(PID) == 2


def test_die_zones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Multi-die packages name their zones package-P-die-D.
    topology = {0: (0, 0), 5: (0, 1)}
    make_trees(tmp_path, monkeypatch, cpu=5, topology=topology,
               zones={0: "package-0-die-0", 1: "package-0-die-1"})
    assert get_current_rapl_zone_id(PID) == 1


def test_command_with_spaces_and_parentheses(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    make_trees(tmp_path, monkeypatch, cpu=1, topology={1: (1, 0)},
               zones={0: "package-0", 1: "package-1"}, command="my (odd) 1 2 3 cmd")
    assert get_current_rapl_zone_id(PID) == 1


def test_no_matching_zone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_trees(tmp_path, monkeypatch, cpu=0, topology={0: (3, 0)}, zones={0: "package-0"})
    with pytest.raises(ZeusRAPLNotSupportedError, match=r"package-3.*zones found: \['package-0'\]"):
        get_current_rapl_zone_id(PID)


@pytest.mark.parametrize("missing", ["stat", "topology", "powercap"])
def test_missing_files_raise(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                             missing: str) -> None:
    make_trees(tmp_path, monkeypatch, cpu=0, topology={0: (0, 0)}, zones={0: "package-0"})
    pid: Optional[int] = PID
    if missing == "stat":
        pid = PID + 1
    elif missing == "topology":
        (tmp_path / "cpu" / "cpu0" / "topology" / "physical_package_id").unlink()
    else:
        monkeypatch.setenv("ZEUS_POWERCAP_ROOT", str(tmp_path / "nowhere"))
    with pytest.raises(ZeusRAPLNotSupportedError):
        get_current_rapl_zone_id(pid)


@pytest.mark.parametrize("pid", ["me", 1.5, True, None])
def test_bad_pid_is_a_type_error(pid: object) -> None:
    with pytest.raises(TypeError, match="pid"):
        get_current_rapl_zone_id(pid)  # type: ignore[arg-type]


def test_this_machine() -> None:
    # Whatever this machine has: a zone index or the documented error, never anything else.
    try:
        zone = get_current_rapl_zone_id()
    except ZeusRAPLNotSupportedError:
        return
    assert isinstance(zone, int) and zone >= 0
