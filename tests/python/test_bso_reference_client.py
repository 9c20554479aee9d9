"""Wire compatibility of `zeus bso serve` with the reference (ml-energy/zeus) BSO client.

- test_reference_client_peer_scenario: the REAL reference client, unmodified, imported from the
  checkout named by ZEUS_REFERENCE_SRC, runs the peer scenario of docs/bso-wire-protocol.md §5,
  one interpreter per training run (so its atexit hook really fires). Skipped without
  ZEUS_REFERENCE_SRC.
- The other tests need no reference: bso_wire.WireClient sends byte for byte what that client
  sends (the first test checks this when it runs) and checks the status codes and body shapes of
  the protocol document, errors included.

See docs/bso-compatibility.md.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

import bso_scenario
import bso_wire
from bso_wire import WireClient, expect_ok, job_spec
from reference_checkout import reference_src

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "reference_client_run.py"
RUN_TIMEOUT_S = 120


def _reference_src() -> Path:
    return reference_src("zeus/optimizer/batch_size/client.py", "the real reference client", "docs/bso-compatibility.md")


def _driver_environment() -> dict:
    env = dict(os.environ)
    # The stand-in NVML has one GPU; a real machine's GPU selection or Zeus daemon must not leak in.
    for name in ("CUDA_VISIBLE_DEVICES", "ZEUSD_SOCK_PATH", "ZEUSD_HOST_PORT", "ZEUSD_TOKEN"):
        env.pop(name, None)
    env["PYTHONPATH"] = str(HERE)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run_reference_client(reference: Path, url: str, trace: Path, abort_after: int) -> dict:
    command = [sys.executable, str(DRIVER), str(reference), url, "--trace", str(trace)]
    if abort_after:
        command += ["--abort-after", str(abort_after)]
    process = subprocess.run(
        command, env=_driver_environment(), capture_output=True, text=True, timeout=RUN_TIMEOUT_S
    )
    where = (
        f"{' '.join(command)}\nexit {process.returncode}\n"
        f"stdout:\n{process.stdout}\nstderr:\n{process.stderr}"
    )
    lines = process.stdout.strip().splitlines()
    assert lines, where
    result = json.loads(lines[-1])
    if abort_after:
        assert process.returncode == 1 and "SimulatedAbort" in process.stderr, where
    else:
        assert process.returncode == 0, where
    # An atexit hook that raised (e.g. PATCH /trials could not connect) prints this at exit.
    assert "Exception ignored in atexit" not in process.stderr, where
    return result


def test_reference_client_peer_scenario(bso_servers):
    reference = _reference_src()
    server = bso_servers.start()
    trace = Path(server.log_path).with_name("reference-trace.jsonl")

    runs = []
    for run in range(1, bso_scenario.RUNS + 1):
        abort_after = bso_scenario.ABORT_AFTER_EPOCHS if run == bso_scenario.ABORTED_RUN else 0
        runs.append(_run_reference_client(reference, server.url, trace, abort_after))

    sequence = [bso_scenario.summary(r["batch_size"], r["outcome"], r["epochs"]) for r in runs]
    print("reference client sequence:", ",".join(sequence))
    assert sequence == bso_scenario.EXPECTED_SEQUENCE

    assert [r["trial_number"] for r in runs] == list(range(1, bso_scenario.RUNS + 1))
    assert {r["job_id"] for r in runs} == {bso_scenario.JOB_ID}
    for number, run in enumerate(runs, start=1):
        if number in bso_scenario.EXPECTED_TRAIN_FAILURES:
            assert run["error"] == "ZeusBSOTrainFailError", run
            assert bso_scenario.EXPECTED_TRAIN_FAILURES[number] in run["message"], run
            assert run["message"].startswith("Train failed: "), run
        else:
            assert run["error"] is None, run

    # Every run's atexit PATCH /trials reached the server: nothing is left Dispatched, and the
    # aborted run's trial is Failed (GET /jobs/<id> is our server's inspection route).
    state = expect_ok(httpx.get(f"{server.url}/jobs/{bso_scenario.JOB_ID}"))
    statuses = {trial["trial_number"]: trial["status"] for trial in state["trials"]}
    assert statuses[bso_scenario.ABORTED_RUN] == "Failed", state
    assert "Dispatched" not in statuses.values(), state

    reference_trace = [json.loads(line) for line in trace.read_text().splitlines()]
    patches = [entry for entry in reference_trace if entry["method"] == "PATCH"]
    assert len(patches) == bso_scenario.RUNS
    assert all(entry["status"] == 200 and entry["response"] == "null" for entry in patches)

    # The replay (used by the tests below, which need no reference) sends the very same bytes
    # and gets the very same answers as the real client.
    replay_runs, replay_trace = bso_wire.replay_scenario(bso_servers.start().url)
    assert [r.summary() for r in replay_runs] == sequence
    assert len(replay_trace) == len(reference_trace)
    for index, (ours, theirs) in enumerate(zip(replay_trace, reference_trace)):
        assert ours == theirs, f"exchange {index} differs"


def test_replay_peer_scenario(bso_server):
    runs, trace = bso_wire.replay_scenario(bso_server.url)

    assert [r.summary() for r in runs] == bso_scenario.EXPECTED_SEQUENCE
    assert [r.trial_number for r in runs] == list(range(1, bso_scenario.RUNS + 1))
    assert [r.register_status for r in runs] == [201] + [200] * (bso_scenario.RUNS - 1)
    for number, run in enumerate(runs, start=1):
        if number in bso_scenario.EXPECTED_TRAIN_FAILURES:
            assert bso_scenario.EXPECTED_TRAIN_FAILURES[number] in run.message, run
    print("replay sequence:", ",".join(r.summary() for r in runs), f"({len(trace)} requests)")
    # Per run: POST /jobs, GET /jobs/batch_size, one POST /report per epoch, PATCH /trials.
    assert len(trace) == sum(3 + run.epochs for run in runs)

    for entry in trace:
        assert "content-type" not in dict(entry["headers"])  # the client never sends one
        if entry["method"] in ("POST", "PATCH"):
            assert ", " in entry["body"] and ": " in entry["body"]

    registrations = [e for e in trace if e["method"] == "POST" and e["target"] == "/jobs"]
    expected_spec = job_spec()
    wire_start = '{"max_power": 700.0, "number_of_gpus": 1, "gpu_model": "NVIDIA H200", '
    assert registrations[0]["body"].startswith(wire_start)
    for entry in registrations:
        body = json.loads(entry["response"])
        assert list(body) == bso_wire.JOB_SPEC_KEYS
        assert body == expected_spec

    # The client ignores PATCH /trials' answer, but the server gives 200 null for every run.
    patches = [e for e in trace if e["method"] == "PATCH"]
    assert [(e["status"], e["response"]) for e in patches] == [(200, "null")] * bso_scenario.RUNS


def _detail(response: httpx.Response, status: int) -> list[dict]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert list(body) == ["detail"], body
    return body["detail"]


def _validation_errors(response: httpx.Response) -> list[dict]:
    detail = _detail(response, 422)
    assert isinstance(detail, list) and detail, detail
    for error in detail:
        assert {"loc", "msg", "type"} <= set(error) <= {"loc", "msg", "type", "ctx"}, error
        assert isinstance(error["loc"], list) and isinstance(error["msg"], str), error
    return detail


def _message(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert list(body) == ["message"] and isinstance(body["message"], str), body
    return body["message"]


def test_register_validation_errors_422(bso_server):
    client = WireClient(bso_server.url)

    spec = job_spec()
    del spec["gpu_model"]
    [error] = _validation_errors(client.post("/jobs", spec))
    assert error["loc"] == ["body", "gpu_model"] and error["type"] == "value_error.missing"

    errors = _validation_errors(client.post("/jobs", job_spec(default_batch_size=3)))
    assert any(e["loc"] == ["body", "__root__"] and e["type"] == "value_error" for e in errors)

    errors = _validation_errors(client.post("/jobs", job_spec(max_power=0.0)))
    assert any(e["loc"] == ["body", "max_power"] for e in errors), errors

    errors = _validation_errors(client.post("/jobs", job_spec(job_id="other-1")))
    assert any(e["loc"] == ["body", "__root__"] for e in errors), errors

    errors = _validation_errors(client.post("/jobs", job_spec(eta_knob=1.5)))
    assert any(e["loc"] == ["body", "eta_knob"] for e in errors), errors

    errors = _validation_errors(client.post("/jobs", '{"max_power" 700.0}'))
    assert errors[0]["loc"][0] == "body", errors

    # Nothing was registered by the refused requests.
    _message(client.get("/jobs/batch_size", {"job_id": bso_scenario.JOB_ID}), 400)


def test_register_lax_input_and_server_assigned_ids(bso_server):
    client = WireClient(bso_server.url)

    # Ints for floats, unsorted batch sizes and an unknown field, as pydantic v1 accepts them.
    shuffled = [1024, 16, 512, 32, 256, 64, 128]
    spec = job_spec(max_power=700, beta_knob=2, mab_prior_mean=0, batch_sizes=shuffled)
    spec["unknown_field"] = "ignored"
    response = client.post("/jobs", spec)
    assert response.status_code == 201, response.text
    assert response.json() == job_spec()

    # Identical (after validation) → 200; different GPU count → 409 with a message.
    assert client.post("/jobs", job_spec()).status_code == 200
    assert _message(client.post("/jobs", job_spec(number_of_gpus=2)), 409)

    # job_id null: the server assigns "<prefix>-<8 hex>", a new job each time.
    ids = []
    for _ in range(2):
        response = client.post("/jobs", job_spec(job_id=None))
        assert response.status_code == 201, response.text
        ids.append(response.json()["job_id"])
    assert all(re.fullmatch(r"peer-[0-9a-f]{8}", job_id) for job_id in ids), ids
    assert ids[0] != ids[1]


def test_batch_size_errors(bso_server):
    client = WireClient(bso_server.url)
    [error] = _validation_errors(client.get("/jobs/batch_size", {}))
    assert error["loc"] == ["query", "job_id"] and error["type"] == "value_error.missing"
    assert "Unknown job" in _message(client.get("/jobs/batch_size", {"job_id": "peer-none"}), 400)


def test_report_and_trial_errors(bso_server):
    client = WireClient(bso_server.url)
    expect_ok(client.post("/jobs", job_spec()))
    trial = expect_ok(client.get("/jobs/batch_size", {"job_id": bso_scenario.JOB_ID}))
    assert trial == {"job_id": bso_scenario.JOB_ID, "batch_size": 128, "trial_number": 1}

    report = {**trial, "time": 80.0, "energy": 32000.0, "metric": 0.92, "current_epoch": 10}
    answer = expect_ok(client.post("/report", report))
    assert answer["stop_train"] and answer["converged"], answer
    # A second final report for the same trial (e.g. another rank): "already reported".
    again = expect_ok(client.post("/report", report))
    assert again["stop_train"] and again["converged"] and "is already reported." in again["message"]

    unknown_job = {**report, "job_id": "peer-none"}
    assert _message(client.post("/report", unknown_job), 400)
    unknown_trial = {**report, "trial_number": 99}
    assert _message(client.post("/report", unknown_trial), 400)
    truncated = {key: report[key] for key in ("job_id", "batch_size")}
    _validation_errors(client.post("/report", truncated))

    # PATCH /trials: finished trial → 200 null (unchanged); unknown trial → 404 with a message.
    response = client.patch("/trials", trial)
    assert (response.status_code, response.text) == (200, "null")
    assert _message(client.patch("/trials", {**trial, "trial_number": 99}), 404)


def test_routing_and_delete(bso_server):
    client = WireClient(bso_server.url)
    assert _detail(client.get("/no/such/route", {}), 404) == "Not Found"
    assert _detail(client.get("/report", {}), 405) == "Method Not Allowed"

    # A user's server_url with a trailing slash makes the client request "//jobs".
    slash = WireClient(bso_server.url + "/")
    assert slash.post("/jobs", job_spec()).status_code == 201

    response = client.delete("/jobs", {"job_id": bso_scenario.JOB_ID})
    assert (response.status_code, response.text) == (200, "null")
    assert _message(client.delete("/jobs", {"job_id": bso_scenario.JOB_ID}), 404)
