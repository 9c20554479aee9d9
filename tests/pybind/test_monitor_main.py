"""`python -m zeus_cpp.monitor energy|power`: subprocesses on simulated GPUs."""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
import time
from typing import Dict, Optional

import pytest
from conftest import PYTHON_PATH


def _env(extra: Optional[Dict[str, Optional[str]]] = None) -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(PYTHON_PATH) if PYTHON_PATH else "", env.get("PYTHONPATH", "")) if p
    )
    env["ZEUS_SIMULATED_GPUS"] = "2:v100"
    env.pop("CUDA_VISIBLE_DEVICES", None)
    for key, value in (extra or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def monitor(*args: str, env: Optional[Dict[str, Optional[str]]] = None,
            timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zeus_cpp.monitor", *args], env=_env(env),
                          capture_output=True, text=True, timeout=timeout)


def interrupt_after(args: list, first_line: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Starts the CLI, waits until stdout shows a line starting with `first_line`, sends SIGINT."""
    process = subprocess.Popen([sys.executable, "-m", "zeus_cpp.monitor", *args], env=_env(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    deadline = time.monotonic() + timeout
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line)
        if re.match(first_line, line):
            break
    else:
        process.kill()
    process.send_signal(signal.SIGINT)
    rest, err = process.communicate(timeout=timeout)
    return subprocess.CompletedProcess(process.args, process.returncode, "".join(seen) + rest, err)


def _number(text: str, label: str) -> float:
    match = re.search(re.escape(label) + r"\s*([0-9.]+)", text)
    assert match, f"{label!r} not in:\n{text}"
    return float(match.group(1))


def test_energy_for_a_duration_prints_the_measurement() -> None:
    result = monitor("energy", "--duration", "0.4")
    assert result.returncode == 0, result.stderr
    assert "GPUs [0, 1]" in result.stdout
    elapsed_s = _number(result.stdout, "Total time (s):")
    assert 0.39 <= elapsed_s < 5
    assert _number(result.stdout, "Total energy (J):") > 0
    assert re.search(r"Measurement\(time=[0-9.]+, gpu_energy=\{0: [0-9.]+, 1: [0-9.]+\}",
                     result.stdout), result.stdout


def test_energy_on_chosen_gpus() -> None:
    result = monitor("energy", "--gpu-indices", "1", "--duration", "0.2")
    assert result.returncode == 0, result.stderr
    assert re.search(r"gpu_energy=\{1: [0-9.]+\}", result.stdout), result.stdout


def test_energy_ends_cleanly_at_sigint_with_the_summary() -> None:
    result = interrupt_after(["energy"], "Measuring energy")
    assert result.returncode == 0, result.stderr
    assert "Total energy (J):" in result.stdout
    assert "Measurement(time=" in result.stdout
    assert "Traceback" not in result.stderr and "KeyboardInterrupt" not in result.stderr


def test_power_prints_lines_and_the_energy_of_the_same_domain() -> None:
    result = monitor("power", "--update-period", "0.2", "--duration", "0.9",
                     "--power-domain", "device_average")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if re.match(r"\d{4}-\d\d-\d\d ", line)]
    assert 1 <= len(lines) <= 6, result.stdout  # about 4; fewer on a loaded machine
    watts = ast.literal_eval(lines[-1].split(" ", 2)[2])
    assert set(watts) == {"GPU0", "GPU1"} and all(value > 0 for value in watts.values())
    elapsed_s = _number(result.stdout, "Total time (s):")
    assert "Total energy (J) over device_average:" in result.stdout
    energy = ast.literal_eval(result.stdout.split("over device_average:", 1)[1].strip())
    # The simulated GPUs draw a steady idle power: energy = power x time, give or take a sample.
    for gpu in ("GPU0", "GPU1"):
        assert energy[gpu] == pytest.approx(watts[gpu] * elapsed_s, rel=0.35)


def test_power_ends_cleanly_at_sigint_with_the_summary() -> None:
    result = interrupt_after(["power", "--update-period", "0.1"], r"\d{4}-\d\d-\d\d ")
    assert result.returncode == 0, result.stderr
    assert "Total time (s):" in result.stdout
    assert "Total energy (J) over device_instant: {'GPU0':" in result.stdout
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("args, message", [
    ([], "the following arguments are required"),
    (["watts"], "invalid choice: 'watts'"),
    (["power", "--power-domain", "volts"], "invalid choice: 'volts'"),
    (["power", "--update-period", "0"], "must be a positive number of seconds"),
    (["energy", "--duration", "soon"], "expected a number of seconds"),
    (["energy", "--gpu-indices"], "expected at least one argument"),
    (["energy", "--gpu-indices", "-1"], "a device index is never negative"),
    (["energy", "--gpu-indices", "x"], "expected a device index"),
    (["energy", "--gpu-indices", "5"], "GPU index 5 is invalid"),
    (["power", "--gpu-indices", "0", "9"], "GPU index 9 is invalid"),
])
def test_bad_arguments_exit_2_with_a_message(args: list, message: str) -> None:
    result = monitor(*args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert message in result.stderr
    assert "usage: python -m zeus_cpp.monitor" in result.stderr
    assert "Traceback" not in result.stderr


def test_power_without_gpus_exits_1_with_a_message() -> None:
    result = monitor("power", "--duration", "0.1", env={"ZEUS_SIMULATED_GPUS": None})
    if result.returncode == 0:
        pytest.skip("this machine has a real GPU")
    assert result.returncode == 1, result.stderr
    assert "power: error: No GPUs available." in result.stderr
    assert "Traceback" not in result.stderr
