"""examples/python/train_mnist_like.py end to end: a real PyTorch CPU training loop on simulated
GPUs, with the batch size from a running `zeus bso serve`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bso_server import bso_server, zeus_cli  # noqa: F401  (fixtures)

pytest.importorskip("torch")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "python" / "train_mnist_like.py"


def run_example(server_url: str, *extra: str) -> subprocess.CompletedProcess:
    import zeus_cpp

    env = dict(os.environ)
    env["ZEUS_SIMULATED_GPUS"] = "1:v100"
    package_root = str(Path(zeus_cpp.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, str(EXAMPLE), "--server-url", server_url, *extra],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_reaches_the_target_accuracy(bso_server):
    run = run_example(bso_server.url, "--job-id", "mnist-like-pytest")
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.strip().splitlines()
    summary = json.loads(lines[-1])
    assert summary["reached_target"] and summary["training_finished"] and not summary["trial_failed"]
    assert summary["batch_size"] == 64  # the job's default, the first trial
    assert summary["job_id"] == "mnist-like-pytest"
    epochs = summary["epochs"]
    assert 1 <= len(epochs) <= 10
    assert all(epoch["energy"] > 0 and epoch["time"] > 0 for epoch in epochs)
    assert sum(line.startswith("epoch ") for line in lines) == len(epochs)
    # The power-limit optimizer profiled every candidate limit within the first epoch.
    assert epochs[0]["plo_state"] == "Done"
    assert [m["power_limit"] for m in summary["profiled"]] == summary["power_limits_w"]
    assert summary["optimal_power_limit_w"] in summary["power_limits_w"]
    assert summary["bso_energy"] > 0

    # The next run of the recurring job gets another batch size from the server (pruning).
    again = run_example(bso_server.url, "--job-id", "mnist-like-pytest")
    assert again.returncode in (0, 2), again.stdout + again.stderr  # 2: the server stopped the trial
    assert json.loads(again.stdout.strip().splitlines()[-1])["batch_size"] != 64
