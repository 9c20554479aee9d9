"""A wheel per CPython version from 3.10 to 3.13 (scripts/wheel.sh, docs/python.md "Python
versions"), each installed with pip --no-index --no-deps into a fresh venv of its own interpreter
(no system site-packages) and used from outside the repository: the extension loads, measures
simulated GPUs and routes a native thread's log line through logging; ``zeus_cpp.monitor``
imports where numpy is installed (it needs numpy, which pip installs from an index and these
venvs cannot download) and otherwise fails only for want of numpy; the shipped ``zeus`` runs.

``ZEUS_WHEELS`` lists the wheels (spaces between; scripts/test.sh sets it from scripts/wheel.sh's
output). A version whose interpreter this machine lacks is skipped, saying so; one whose
interpreter is here but whose wheel is not fails.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict

import pytest

from conftest import clean_environment, run
import zeus_pythons

CHECK = r"""
import json, logging, sys, threading
logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="%(name)s|%(levelname)s|%(message)s")
import zeus_cpp, zeus_cpp._zeus as native
from zeus_cpp import _logging
monitor = native.ZeusMonitor(None, [], False, None, None)
monitor.begin_window("w")
sum(range(100000))
measured = monitor.end_window("w")
threading.Thread(target=native._log_for_test,
                 args=("zeus_cpp.device", 3, "from a native thread", True)).start()
assert _logging.flush(30)
try:
    from zeus_cpp.monitor import ZeusMonitor  # noqa: F401
    monitor_import = "ok"
except ModuleNotFoundError as error:
    monitor_import = error.name
print(json.dumps({"version": "%d.%d" % sys.version_info[:2], "file": zeus_cpp.__file__,
                  "gpus": sorted(measured.gpu_energy), "time": measured.time,
                  "monitor_import": monitor_import}))
"""


@pytest.fixture(scope="module")
def wheels() -> Dict[str, Path]:
    listed = os.environ.get("ZEUS_WHEELS", "").split()
    if not listed:
        pytest.skip("ZEUS_WHEELS is not set: build the wheels with scripts/wheel.sh and set "
                    "ZEUS_WHEELS to the paths it prints (scripts/test.sh does both)")
    found: Dict[str, Path] = {}
    for name in listed:
        tag = Path(name).name.split("-")[2]  # cp312
        found[f"{tag[2]}.{tag[3:]}"] = Path(name).resolve()
    return found


@pytest.mark.parametrize("version", zeus_pythons.VERSIONS)
def test_the_wheel_installs_and_runs_on_its_python(version: str, wheels: Dict[str, Path],
                                                   tmp_path: Path) -> None:
    interpreter, why = zeus_pythons.find(version)
    if interpreter is None:
        pytest.skip(why)
    assert version in wheels, (f"CPython {version} is here ({interpreter}) but scripts/wheel.sh "
                               f"built no wheel for it: {sorted(wheels)}")
    wheel = wheels[version]
    assert f"-cp{version.replace('.', '')}-" in wheel.name
    venv = tmp_path / "venv"
    created = run([interpreter, "-m", "venv", str(venv)], env=clean_environment())
    assert created.returncode == 0, created.stderr
    installed = run([str(venv / "bin" / "python"), "-m", "pip", "install", "--no-index",
                     "--no-deps", str(wheel)], env=clean_environment(), cwd=tmp_path)
    assert installed.returncode == 0, installed.stdout + installed.stderr

    result = run([str(venv / "bin" / "python"), "-c", CHECK], cwd=tmp_path,
                 env=clean_environment(ZEUS_SIMULATED_GPUS="2:h200"))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.strip().splitlines()
    assert "zeus_cpp.device|WARNING|from a native thread" in lines, result.stdout
    found = json.loads(lines[-1])
    assert found["version"] == version
    assert Path(found["file"]).is_relative_to(venv), found
    assert found["gpus"] == [0, 1] and found["time"] > 0
    numpy = run([str(venv / "bin" / "python"), "-c", "import numpy"], env=clean_environment())
    assert found["monitor_import"] == ("ok" if numpy.returncode == 0 else "numpy"), found

    shown = run([str(venv / "bin" / "zeus"), "show-env", "--json"], cwd=tmp_path,
                env=clean_environment(ZEUS_SIMULATED_GPUS="2:h200"))
    assert shown.returncode == 0, shown.stderr
    assert len(json.loads(shown.stdout)["gpus"]) == 2
