"""Grace superchips (GH200, GB200): a GPU whose energy is module energy (GPU + CPU + memory).

Each case runs in a fresh interpreter on ``ZEUS_SIMULATED_GPUS=...:module`` (simulated GPUs whose
figures are labelled module scope) with a fake powercap tree, and checks that the scope is
exposed (``ZeusMonitor.gpu_energy_scope``, ``GPUs.get_energy_scope``), that the monitor warns once
that the CPU figures are already part of the GPU energy, and that ``total_energy`` stays the
GPUs' sum (the reference's meaning). docs/devices.md, "Grace Hopper and Grace Blackwell: module
scope".
"""

from __future__ import annotations

from pathlib import Path

from conftest import run_python
from zeusd_daemon import make_powercap

CHILD = r"""
import logging, io
stream = io.StringIO()
logging.basicConfig(stream=stream, level=logging.WARNING)
from zeus_cpp.device import get_gpus
from zeus_cpp.monitor import ZeusMonitor
gpus = get_gpus()
print("GPU_SCOPES", [gpus.get_power_scope(i) for i in range(len(gpus))],
      [gpus.get_energy_scope(i) for i in range(len(gpus))])
monitor = ZeusMonitor(sync_execution_with=lambda indices: None)
print("SCOPE", sorted(monitor.gpu_energy_scope.items()))
print("CPUS", monitor.cpu_indices)
for _ in range(2):
    monitor.begin_window("w")
    m = monitor.end_window("w")
    assert m.total_energy == sum(m.gpu_energy.values())
ZeusMonitor(sync_execution_with=lambda indices: None, cpu_indices=[])
for handler in logging.getLogger().handlers:
    handler.flush()
print("WARNINGS", stream.getvalue().count("measure their whole module"))
"""


def _run_child(tmp_path: Path, simulated_gpus: str) -> dict:
    """CHILD's `KEY value` lines, on `simulated_gpus` beside one fake RAPL package."""
    make_powercap(tmp_path / "powercap")
    output = run_python(CHILD, {"ZEUS_SIMULATED_GPUS": simulated_gpus,
                                "ZEUS_POWERCAP_ROOT": str(tmp_path / "powercap"),
                                "ZEUSD_SOCK_PATH": None, "ZEUSD_HOST_PORT": None})
    return dict(line.split(" ", 1) for line in output.splitlines() if " " in line)


def test_module_scope_is_exposed_and_warned_about_once_with_cpus(tmp_path: Path) -> None:
    out = _run_child(tmp_path, "2:h200:module")
    assert out["GPU_SCOPES"] == "['module', 'module'] ['module', 'module']"
    assert out["SCOPE"] == "[(0, 'module'), (1, 'module')]"
    assert out["CPUS"] == "[0]"
    # Once for the monitor with CPUs; none for the one without.
    assert out["WARNINGS"] == "1"


def test_discrete_gpus_say_gpu_and_warn_nothing(tmp_path: Path) -> None:
    out = _run_child(tmp_path, "1:h200")
    assert out["GPU_SCOPES"] == "['gpu'] ['gpu']"
    assert out["SCOPE"] == "[(0, 'gpu')]"
    assert out["WARNINGS"] == "0"
