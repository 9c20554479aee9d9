"""The cross-built aarch64 wheel and the `zeus` CLI tarballs, run under user-mode emulation.

``ZEUS_AARCH64_WHEEL`` names the aarch64 wheel and ``ZEUS_CLI_TARBALLS`` the CLI tarballs
(space-separated), both from ``scripts/wheel.sh --cli`` (scripts/test.sh sets them). Without them,
or without qemu-aarch64 and the arm64 interpreter (scripts/aarch64-python), the tests skip with
what to do. Everything aarch64 runs under qemu-aarch64 on this x86_64 machine (docs/arm.md): the
arm64 CPython imports the unpacked wheel and measures simulated GPUs, and the wheel's CLI runs
`show-env`, `monitor -- true` and one cell of `sim`, and reads a fake Jetson's power rails. Each
native file's libraries are listed by its own machine's loader (`ld.so --list`, emulated): every
one outside the manylinux allow-list must resolve inside the archive.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tarfile
from pathlib import Path
from typing import Dict, List

import pytest
from conftest import REPO, clean_environment, run, unpack_wheel

import zeus_elf
import zeus_wheel_repair

AARCH64_PYTHON = REPO / "scripts" / "aarch64-python"


def _needs_emulation() -> None:
    if shutil.which("qemu-aarch64") is None:
        pytest.skip("qemu-aarch64 is missing (apt-get install qemu-user; scripts/setup.sh)")


@pytest.fixture(scope="module")
def aarch64_wheel() -> Path:
    configured = os.environ.get("ZEUS_AARCH64_WHEEL")
    if not configured or not Path(configured).is_file():
        pytest.skip("ZEUS_AARCH64_WHEEL is not set or missing: build it with "
                    "`scripts/wheel.sh --arch aarch64` (scripts/test.sh does)")
    _needs_emulation()
    return Path(configured).resolve()


@pytest.fixture(scope="module")
def aarch64_tree(aarch64_wheel: Path, tmp_path_factory) -> Path:
    return unpack_wheel(aarch64_wheel, tmp_path_factory.mktemp("aarch64-wheel"))


@pytest.fixture(scope="module")
def tarballs(tmp_path_factory) -> Dict[str, Path]:
    """{machine: unpacked top folder} of each CLI tarball."""
    configured = os.environ.get("ZEUS_CLI_TARBALLS", "").split()
    if not configured:
        pytest.skip("ZEUS_CLI_TARBALLS is not set: build them with `scripts/wheel.sh --cli`")
    found: Dict[str, Path] = {}
    for name in configured:
        folder = tmp_path_factory.mktemp("tarball")
        with tarfile.open(name) as archive:
            archive.extractall(folder)  # our own archive (3.11.2 has no extraction filter)
        (top,) = folder.iterdir()
        found[zeus_elf.read_elf(top / "bin" / "zeus").machine] = top
    return found


def emulated(command: List[str], **extra: str):
    return run(["qemu-aarch64", *command], env=clean_environment(**extra), timeout=180)


def outside_libraries(root: Path) -> List[str]:
    """Each native file's libraries that its loader finds outside ``root`` and that are not on
    the manylinux allow-list."""
    outside: List[str] = []
    for path in zeus_wheel_repair.elf_files(root):
        for name, resolved in zeus_wheel_repair.loaded_libraries(path).items():
            if name not in zeus_wheel_repair.ALLOWED and not resolved.resolve().is_relative_to(root):
                outside.append(f"{path.relative_to(root)}: {name} => {resolved}")
    return outside


def test_the_wheel_is_tagged_for_aarch64_from_its_own_needs(aarch64_wheel: Path,
                                                            aarch64_tree: Path) -> None:
    python, abi, platform = aarch64_wheel.name[: -len(".whl")].split("-")[2:]
    assert python == abi == "cp311", aarch64_wheel.name
    assert re.fullmatch(r"manylinux_2_\d+_aarch64", platform), platform
    assert zeus_wheel_repair.platform_tag(aarch64_tree, "aarch64")[0] == platform
    dist_info = next(aarch64_tree.glob("*.dist-info"))
    assert f"Tag: cp311-cp311-{platform}\n" in (dist_info / "WHEEL").read_text()
    machines = {path.relative_to(aarch64_tree).as_posix(): zeus_elf.read_elf(path).machine
                for path in zeus_wheel_repair.elf_files(aarch64_tree)}
    assert "zeus_cpp/_zeus.cpython-311-aarch64-linux-gnu.so" in machines, machines
    assert "zeus_cpp/_bin/zeus" in machines
    assert set(machines.values()) == {"aarch64"}, machines
    assert not zeus_wheel_repair.problems(aarch64_tree)


def test_every_library_resolves_inside_the_wheel(aarch64_tree: Path) -> None:
    assert outside_libraries(aarch64_tree) == []


def test_the_arm64_interpreter_imports_it_and_measures_simulated_gpus(aarch64_tree: Path) -> None:
    code = ("import json, platform, zeus_cpp, zeus_cpp._zeus as native\n"
            "from zeus_cpp.monitor import ZeusMonitor\n"
            "monitor = ZeusMonitor(cpu_indices=[], sync_execution_with=lambda index: None)\n"
            "monitor.begin_window('w')\n"
            "sum(range(10000))\n"
            "m = monitor.end_window('w')\n"
            "print(json.dumps({'machine': platform.machine(), 'native': native.__file__,\n"
            "                  'gpus': sorted(m.gpu_energy), 'time': m.time,\n"
            "                  'energy': sum(m.gpu_energy.values())}))\n")
    result = run([str(AARCH64_PYTHON), "-c", code], timeout=180,
                 env=clean_environment(PYTHONPATH=str(aarch64_tree), ZEUS_SIMULATED_GPUS="2:h200"))
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["machine"] == "aarch64"
    assert Path(found["native"]).is_relative_to(aarch64_tree), found
    assert found["gpus"] == [0, 1] and found["time"] > 0 and found["energy"] > 0


def test_the_wheels_cli_runs_show_env_monitor_and_sim(aarch64_tree: Path, tmp_path: Path) -> None:
    zeus = str(aarch64_tree / "zeus_cpp" / "_bin" / "zeus")
    shown = emulated([zeus, "show-env", "--json"], ZEUS_SIMULATED_GPUS="2:h200")
    assert shown.returncode == 0, shown.stderr
    assert len(json.loads(shown.stdout)["gpus"]) == 2
    monitored = emulated([zeus, "monitor", "--", "true"], ZEUS_SIMULATED_GPUS="1:h200")
    assert monitored.returncode == 0, monitored.stderr
    assert "GPU" in monitored.stdout + monitored.stderr
    simulated = emulated([zeus, "sim", "--gpu", "v100", "--workload", "cifar100", "--seeds", "1",
                          "--recurrences", "5", "--out", str(tmp_path / "sim")])
    assert simulated.returncode == 0, simulated.stderr
    assert any((tmp_path / "sim").iterdir())


def test_the_wheels_cli_reads_a_jetsons_rails(aarch64_tree: Path, tmp_path: Path) -> None:
    """The Jetson code on the machine it is for: an Orin's rails (the mainline ina3221 hwmon
    layout, voltage x current; devices.md, "Jetson") in a fake tree, read by the aarch64 CLI."""
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "nv_tegra_release").write_text("# R36 (release)\n")
    hwmon = tmp_path / "sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3"
    hwmon.mkdir(parents=True)
    for channel, (label, current_ma) in enumerate(
            [("VDD_GPU_SOC", 400), ("VDD_CPU_CV", 200), ("VIN_SYS_5V0", 1000)], 1):
        (hwmon / f"in{channel}_label").write_text(label + "\n")
        (hwmon / f"in{channel}_input").write_text("5000\n")
        (hwmon / f"curr{channel}_input").write_text(f"{current_ma}\n")
    shown = emulated([str(aarch64_tree / "zeus_cpp" / "_bin" / "zeus"), "show-env", "--json"],
                     ZEUS_JETSON_ROOT=str(tmp_path))
    assert shown.returncode == 0, shown.stderr
    soc = json.loads(shown.stdout)["soc"]
    assert soc["available"], soc
    power = {rail["name"]: rail["power_w"] for rail in soc["rails"]}
    assert power == {"VDD_GPU_SOC": 2.0, "VDD_CPU_CV": 1.0, "VIN_SYS_5V0": 5.0}, soc


def test_each_cli_tarball_runs_on_its_machine_with_only_its_own_libraries(
        tarballs: Dict[str, Path]) -> None:
    assert "x86_64" in tarballs, tarballs
    for machine, top in tarballs.items():
        assert top.name.startswith("zeus-0.1.0-manylinux_2_") and top.name.endswith(machine)
        assert outside_libraries(top) == [], machine
        readme = (top / "README").read_text()
        assert top.name.split("-", 2)[2] in readme and "bin/zeus" in readme
        assert (top / "licenses" / "LICENSE").is_file()
        command = [str(top / "bin" / "zeus"), "show-env", "--json"]
        if machine == "aarch64":
            _needs_emulation()
            result = emulated(command, ZEUS_SIMULATED_GPUS="1:h200")
        else:
            result = run(command, env=clean_environment(ZEUS_SIMULATED_GPUS="1:h200"))
        assert result.returncode == 0, (machine, result.stderr)
        assert len(json.loads(result.stdout)["gpus"]) == 1


def test_a_broken_tarball_is_caught(tarballs: Dict[str, Path], tmp_path: Path) -> None:
    """The check above can fail: a tarball whose lib/ lost a library resolves it nowhere."""
    top = shutil.copytree(tarballs["x86_64"], tmp_path / "broken", symlinks=True)
    (victim,) = [path for path in (top / "lib").iterdir() if path.name.startswith("libfmt-")]
    victim.unlink()
    with pytest.raises(zeus_wheel_repair.RepairError, match="cannot find libfmt-"):
        outside_libraries(top)
