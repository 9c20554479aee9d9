"""CPU energy where RAPL is root-only (Linux 5.10 and later; issue 31, item 2).

A fake powercap tree whose package zone's energy_uj is mode 000. Root reads any file whatever its
mode, so as root the checks run in a child process dropped to the ``nobody`` user (as
tests/device/rapl_permission_test.cpp does); they skip, saying why, when the file stays readable
to the child or the child cannot import zeus_cpp.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator, List

import pytest

from conftest import subprocess_env

NOBODY = 65534

CHILD = r"""
import os, sys
energy = sys.argv[1]
if os.access(energy, os.R_OK):
    print("READABLE")
    sys.exit(0)
from zeus_cpp.monitor import ZeusMonitor
from zeus_cpp.device.cpu.common import ZeusCPUNoPermissionError
from zeus_cpp.exception import ZeusCPUNoPermissionError as Same
assert ZeusCPUNoPermissionError is Same
try:
    ZeusMonitor(cpu_indices=[0], gpu_indices=[])
except RuntimeError as error:
    print("RAISED", type(error).__name__, isinstance(error, ZeusCPUNoPermissionError))
    print("MESSAGE", error)
else:
    print("NO ERROR")
# Without cpu_indices: no CPU, silently (as the reference).
print("DEFAULT", ZeusMonitor(gpu_indices=[]).cpu_indices)
# The Prometheus counter asks for CPU packages the same way (nothing is pushed here).
from zeus_cpp.metric import EnergyCumulativeCounter
try:
    EnergyCumulativeCounter([0], [], 5, "http://127.0.0.1:9", "job")
except RuntimeError as error:
    print("COUNTER", type(error).__name__, "Linux 5.10" in str(error))
"""


@pytest.fixture
def root_only_tree() -> Iterator[Path]:
    # Not pytest's tmp_path: its folders are private to the user running pytest, and the child
    # may run as nobody.
    root = Path(tempfile.mkdtemp(prefix="zeus-rapl-"))
    try:
        root.chmod(0o755)
        zone = root / "intel-rapl:0"
        zone.mkdir()
        zone.chmod(0o755)
        for name, text in (("name", "package-0"), ("energy_uj", "123456"),
                           ("max_energy_range_uj", "262143328850")):
            (zone / name).write_text(text + "\n")
            (zone / name).chmod(0o444)
        (zone / "energy_uj").chmod(0o000)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _run(arguments: List[str], tree: Path) -> subprocess.CompletedProcess:
    env = subprocess_env({"ZEUS_POWERCAP_ROOT": str(tree), "ZEUS_SIMULATED_GPUS": "1:a100",
                          "ZEUSD_SOCK_PATH": None, "ZEUSD_HOST_PORT": None})
    extra = {}
    if os.geteuid() == 0:
        extra = {"user": NOBODY, "group": NOBODY, "extra_groups": []}
    result = subprocess.run([sys.executable, *arguments], env=env, capture_output=True,
                            text=True, timeout=120, cwd=str(tree), **extra)
    if "ModuleNotFoundError" in result.stderr or "PermissionError" in result.stderr:
        pytest.skip(f"the child (as nobody) cannot import zeus_cpp: {result.stderr[-300:]}")
    return result


def test_asking_for_cpu_packages_says_why_and_how_to_fix_it(root_only_tree: Path) -> None:
    energy = root_only_tree / "intel-rapl:0" / "energy_uj"
    result = _run(["-c", CHILD, str(energy)], root_only_tree)
    assert result.returncode == 0, result.stderr
    if "READABLE" in result.stdout:
        pytest.skip("energy_uj stays readable to the child (it keeps CAP_DAC_OVERRIDE)")
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    # A RuntimeError, as the reference promises, and the documented ZeusCPUNoPermissionError.
    assert lines.get("RAISED") == "ZeusCPUNoPermissionError True", result.stdout
    message = lines["MESSAGE"]
    assert "CPU packages 0" in message
    assert str(energy) in message and "Linux 5.10" in message
    for fix in ("Run as root", "chmod", "udev", "zeusd"):
        assert fix in message, message
    assert "no CPU package is available" not in message
    assert lines["DEFAULT"] == "[]"
    assert lines.get("COUNTER") == "ZeusCPUNoPermissionError True", result.stdout


def test_the_cli_prints_the_cause_not_a_usage_error(root_only_tree: Path) -> None:
    energy = root_only_tree / "intel-rapl:0" / "energy_uj"
    probe = _run(["-c", f"import os; print(os.access({str(energy)!r}, os.R_OK))"], root_only_tree)
    if probe.stdout.strip() == "True":
        pytest.skip("energy_uj stays readable to the child (it keeps CAP_DAC_OVERRIDE)")
    result = _run(["-m", "zeus_cpp.monitor", "energy", "--cpu-indices", "0", "--duration", "0.1"],
                  root_only_tree)
    assert result.returncode == 1, result.stderr
    assert "usage:" not in result.stderr
    assert "energy_uj" in result.stderr and "zeusd" in result.stderr, result.stderr
    assert result.stdout == ""
