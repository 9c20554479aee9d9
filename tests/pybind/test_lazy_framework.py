"""ZeusMonitor imports its framework (torch by default) at the first window that synchronises,
not when it is built, and a Ctrl-C during that import stays a KeyboardInterrupt (issue 31,
item 5). Each case runs in a child whose sys.path starts with a fake ``torch``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import subprocess_env

PRELUDE = r"""
import sys
sys.path.insert(0, sys.argv[1])
from zeus_cpp.monitor import ZeusMonitor
"""


def _fake_torch(tmp_path: Path, body: str) -> Path:
    package = tmp_path / "fake" / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(body)
    return package.parent


def _run(tmp_path: Path, fake_body: str, code: str) -> str:
    folder = _fake_torch(tmp_path, fake_body)
    result = subprocess.run(
        [sys.executable, "-c", PRELUDE + code, str(folder)],
        env=subprocess_env({"ZEUS_SIMULATED_GPUS": "1:a100"}), capture_output=True, text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


# A torch without CUDA that says when it is imported.
COUNTING_TORCH = r"""
print("TORCH IMPORTED")
class cuda:
    @staticmethod
    def is_available():
        return False
"""


def test_construction_does_not_import_torch(tmp_path: Path) -> None:
    out = _run(tmp_path, COUNTING_TORCH, r"""
monitor = ZeusMonitor(cpu_indices=[])
print("BUILT", "torch" in sys.modules)
monitor.begin_window("w", sync_execution=False)
monitor.end_window("w", sync_execution=False)
print("UNSYNCHRONISED", "torch" in sys.modules)
monitor.begin_window("w")
print("SYNCHRONISED", "torch" in sys.modules)
monitor.end_window("w")
""")
    assert out.split("\n")[:4] == [
        "BUILT False", "UNSYNCHRONISED False", "TORCH IMPORTED", "SYNCHRONISED True"
    ], out


def test_a_ctrl_c_during_the_import_stays_a_keyboard_interrupt(tmp_path: Path) -> None:
    out = _run(tmp_path, "raise KeyboardInterrupt\n", r"""
monitor = ZeusMonitor(cpu_indices=[])
print("BUILT")
for attempt in range(2):
    try:
        monitor.begin_window("w")
    except KeyboardInterrupt:
        print("INTERRUPTED", monitor.open_windows())
    except Exception as error:
        print("OTHER", type(error).__name__, error)
monitor.begin_window("w", sync_execution=False)
print("OPEN", monitor.open_windows())
""")
    # Not remembered as a missing framework: the second attempt imports (and is interrupted)
    # again, and a window that does not synchronise still works.
    assert out.split("\n")[:4] == ["BUILT", "INTERRUPTED []", "INTERRUPTED []", "OPEN ['w']"], out


def test_a_broken_import_is_told_apart_from_a_missing_one(tmp_path: Path) -> None:
    out = _run(tmp_path, "raise RuntimeError('half-imported extension')\n", r"""
monitor = ZeusMonitor(cpu_indices=[])
try:
    monitor.begin_window("w")
except RuntimeError as error:
    print("ERROR", error)
    print("CAUSE", type(error.__cause__).__name__)
""")
    lines = dict(line.split(" ", 1) for line in out.splitlines())
    assert lines["ERROR"].startswith("No framework is available.")
    assert "half-imported extension" in lines["ERROR"]
    assert "is not installed" not in lines["ERROR"]
    assert lines["CAUSE"] == "RuntimeError"


def test_a_missing_framework_still_raises_the_references_error(tmp_path: Path) -> None:
    out = _run(tmp_path, "", r"""
import zeus_cpp.monitor.energy as energy
monitor = ZeusMonitor(cpu_indices=[], sync_execution_with="cupy")
try:
    monitor.begin_window("w")
except RuntimeError as error:
    print("ERROR", error)
""")
    assert out.startswith("ERROR No framework is available.")
    assert "cupy is not installed" in out
