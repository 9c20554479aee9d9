"""Interruption and resumption of a batch-size-optimizer trial (issue 31, item 1): a run stopped by
Ctrl-C before the server decided keeps its trial open and says so; the job's next run continues
the same trial, and the server sees the epochs, time and energy of both runs. A real
`zeus bso serve`, simulated GPUs, training scripts in child interpreters."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import urllib.request
import warnings
from pathlib import Path

import pytest

os.environ.setdefault("ZEUS_SIMULATED_GPUS", "2:v100")

from bso_server import bso_server, zeus_cli  # noqa: E402,F401  (fixtures)
from conftest import subprocess_env  # noqa: E402

from zeus_cpp.monitor import ZeusMonitor  # noqa: E402
from zeus_cpp.optimizer.batch_size.client import BatchSizeOptimizer  # noqa: E402
from zeus_cpp.optimizer.batch_size.common import JobSpec  # noqa: E402
from zeus_cpp.optimizer.batch_size.exceptions import ZeusBSORuntimError, ZeusBSOTrialWarning  # noqa: E402

# A training script: converges at its fifth epoch; raises KeyboardInterrupt in the middle of
# epoch `interrupt_at` (0-based; -1: never). It resumes "from its checkpoint" at the epoch the
# optimizer carries, as a real script would from its own checkpoint.
TRAIN = textwrap.dedent(
    """
    import json, sys, time
    from zeus_cpp.monitor import ZeusMonitor
    from zeus_cpp.optimizer.batch_size.client import BatchSizeOptimizer
    from zeus_cpp.optimizer.batch_size.common import JobSpec

    url, job_id, interrupt_at, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    metrics = [0.1, 0.2, 0.3, 0.4, 0.95]
    spec = JobSpec(job_id=job_id, job_id_prefix="resume", batch_sizes=[32, 64, 128],
                   default_batch_size=64, target_metric=0.9, max_epochs=10, beta_knob=None)
    bso = BatchSizeOptimizer(ZeusMonitor(gpu_indices=[0], cpu_indices=[]), url, spec)
    log = {"batch_size": bso.get_batch_size(), "trial": bso.trial_number,
           "start_epoch": bso.cur_epoch, "start_time": bso.running_time, "reports": []}
    bso.on_train_begin()
    try:
        for epoch in range(log["start_epoch"], len(metrics)):
            time.sleep(0.05)                      # the epoch's first half
            if epoch == interrupt_at:
                raise KeyboardInterrupt
            time.sleep(0.05)
            bso.on_evaluate(metrics[epoch])
            log["reports"].append([bso.cur_epoch, bso.running_time, bso.consumed_energy])
            if bso.training_finished:
                break
    finally:
        with open(out, "w") as f:
            json.dump(log, f)
    """
)


def run_training(tmp_path: Path, url: str, job_id: str, interrupt_at: int, name: str):
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    out = tmp_path / f"{name}.json"
    result = subprocess.run(
        [sys.executable, "-W", "always", str(script), url, job_id, str(interrupt_at), str(out)],
        env=subprocess_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return result, json.loads(out.read_text())


def job_state(url: str, job_id: str) -> dict:
    with urllib.request.urlopen(f"{url}/jobs/{job_id}", timeout=10) as response:
        return json.loads(response.read())


def test_ctrl_c_then_resume_continues_the_same_trial(bso_server, tmp_path):
    state_dir = Path(os.environ["ZEUS_BSO_STATE_DIR"])
    first, before = run_training(tmp_path, bso_server.url, "resume-1", interrupt_at=2, name="first")
    # Python ends a program that a KeyboardInterrupt stopped with SIGINT.
    assert first.returncode in (-signal.SIGINT, 130), first.stderr
    assert "KeyboardInterrupt" in first.stderr
    assert (before["trial"], before["start_epoch"], len(before["reports"])) == (1, 0, 2)
    # The user is told what became of the trial, and why.
    assert "ZeusBSOTrialWarning" in first.stderr, first.stderr
    assert "interrupted by KeyboardInterrupt" in first.stderr
    assert "after 2 reported epoch(s)" in first.stderr and "stays open on the server" in first.stderr
    records = list(state_dir.glob("*/trial-1.json"))
    assert len(records) == 1 and str(records[0]) in first.stderr.replace("\n", "")
    record = json.loads(records[0].read_text())
    assert (record["epochs"], record["state"]) == (2, "interrupted")
    assert record["time"] == pytest.approx(before["reports"][-1][1])
    assert record["unfinished_epoch_time"] > 0.0  # measured, reported in the warning, not charged
    # The server still has the trial running, not a failed one.
    assert [t["status"] for t in job_state(bso_server.url, "resume-1")["trials"]] == ["Dispatched"]

    second, after = run_training(tmp_path, bso_server.url, "resume-1", interrupt_at=-1, name="second")
    assert second.returncode == 0, second.stderr
    assert "resuming trial 1 (batch size 64)" in second.stderr, second.stderr
    # The same trial, from the epoch the first run reached, with its time and energy carried.
    assert (after["trial"], after["batch_size"], after["start_epoch"]) == (1, 64, 2)
    assert after["start_time"] == pytest.approx(before["reports"][-1][1])
    epochs = [report[0] for report in after["reports"]]
    assert epochs == [3, 4, 5]
    final_epochs, final_time, final_energy = after["reports"][-1]
    # Three epochs of about 0.1 s each on top of the first run's two.
    assert final_time >= before["reports"][-1][1] + 3 * 0.1 * 0.9
    assert final_energy > before["reports"][-1][2] > 0.0
    trials = job_state(bso_server.url, "resume-1")["trials"]
    assert len(trials) == 1, trials
    (trial,) = trials
    assert (trial["trial_number"], trial["status"], trial["converged"]) == (1, "Succeeded", True)
    assert trial["time"] == pytest.approx(final_time) and trial["energy"] == pytest.approx(final_energy)
    assert not list(state_dir.glob("*/trial-*.json"))  # decided: the record is gone


@pytest.fixture
def monitor():
    return ZeusMonitor(gpu_indices=[0], cpu_indices=[])


def spec(**overrides) -> JobSpec:
    fields = dict(job_id_prefix="resume", batch_sizes=[32, 64, 128], default_batch_size=64, target_metric=0.9,
                  max_epochs=10, beta_knob=None)  # fmt: skip
    fields.update(overrides)
    return JobSpec(**fields)


def test_without_a_job_id_the_interrupted_trial_is_marked_failed_and_the_user_told(bso_server, monitor):
    bso = BatchSizeOptimizer(monitor, bso_server.url, spec())
    assert bso.get_batch_size() == 64
    bso.on_train_begin()
    bso.on_evaluate(0.1)
    with pytest.warns(ZeusBSOTrialWarning, match=r"interrupted by KeyboardInterrupt.*marked failed.*no job_id"):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            bso.close()
    assert [t["status"] for t in job_state(bso_server.url, bso.job.job_id)["trials"]] == ["Failed"]


def test_a_running_trial_is_not_taken_and_resume_false_gives_up_a_kept_one(bso_server, monitor):
    first = BatchSizeOptimizer(monitor, bso_server.url, spec(job_id="resume-2"))
    assert (first.get_batch_size(), first.trial_number) == (64, 1)
    first.on_train_begin()
    first.on_evaluate(0.1)
    # Another run of the job while the first still runs (a concurrent submission): its own trial.
    with warnings.catch_warnings():
        warnings.simplefilter("error", ZeusBSOTrialWarning)
        other = BatchSizeOptimizer(monitor, bso_server.url, spec(job_id="resume-2"))
    assert other.trial_number == 0 and other.get_batch_size() and other.trial_number == 2
    with pytest.warns(ZeusBSOTrialWarning, match="close.. was called.*stays open"):
        first.close()
    with pytest.warns(ZeusBSOTrialWarning, match="stays open"):
        other.close()
    # resume=False: both kept trials are marked failed, the records removed, a new trial starts.
    with pytest.warns(ZeusBSOTrialWarning, match="resume=False: trial 1 .*marked failed") as caught:
        fresh = BatchSizeOptimizer(monitor, bso_server.url, spec(job_id="resume-2"), resume=False)
    assert any("resume=False: trial 2 " in str(w.message) for w in caught)
    assert fresh.cur_epoch == 0 and fresh.trial_number == 0
    statuses = {t["trial_number"]: t["status"] for t in job_state(bso_server.url, "resume-2")["trials"]}
    assert statuses == {1: "Failed", 2: "Failed"}
    assert not list(Path(os.environ["ZEUS_BSO_STATE_DIR"]).glob("*/trial-*.json"))
    fresh.get_batch_size()
    with pytest.warns(ZeusBSOTrialWarning, match="marked failed.*resume=False"):
        fresh.close()


def test_a_bad_record_is_named_and_skipped(bso_server, monitor):
    first = BatchSizeOptimizer(monitor, bso_server.url, spec(job_id="resume-3"))
    first.get_batch_size()
    with pytest.warns(ZeusBSOTrialWarning):
        first.close()
    (record,) = Path(os.environ["ZEUS_BSO_STATE_DIR"]).glob("*/trial-1.json")
    record.write_text('{"format": 1, "epochs": "two"')
    with pytest.warns(ZeusBSOTrialWarning, match=rf"ignoring the trial record {record}: unreadable"):
        again = BatchSizeOptimizer(monitor, bso_server.url, spec(job_id="resume-3"))
    assert again.trial_number == 0
    again.close()


def test_a_resumed_trial_the_server_no_longer_takes_is_an_error_naming_the_record(bso_server, monitor):
    first = BatchSizeOptimizer(monitor, bso_server.url, spec(job_id="resume-4"))
    first.get_batch_size()
    with pytest.warns(ZeusBSOTrialWarning, match="stays open"):
        first.close()
    # Someone ends the trial on the server meanwhile (the reference client's PATCH /trials).
    body = json.dumps({"job_id": "resume-4", "batch_size": 64, "trial_number": 1}).encode()
    urllib.request.urlopen(urllib.request.Request(f"{bso_server.url}/trials", data=body, method="PATCH"), timeout=10)
    with pytest.warns(ZeusBSOTrialWarning, match="resuming trial 1"):
        again = BatchSizeOptimizer(monitor, bso_server.url, spec(job_id="resume-4"))
    again.on_train_begin()
    with pytest.raises(ZeusBSORuntimError, match=r"resumed that trial from .*trial-1.json, which is now removed"):
        again.on_evaluate(0.1)
    assert not list(Path(os.environ["ZEUS_BSO_STATE_DIR"]).glob("*/trial-*.json"))
    again.close()  # nothing left to end, nothing to say
