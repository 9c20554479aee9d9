"""A byte-faithful replay of what the reference BSO client puts on the wire.

Written from docs/bso-wire-protocol.md (shared docs) §1-§3, not from the client's code:
- module-level `httpx.get/post/patch`, so a new connection per request and httpx's default
  headers and 5 s timeout;
- request bodies passed as `content=<json text>`, so no Content-Type header;
- the JSON text is what pydantic v1's `.json()` produces, i.e. `json.dumps` with its default
  separators (", " and ": "), keys in model order, floats in Python repr (700.0).

`record()` turns an httpx response into a comparable trace entry; the reference-client test
records the real client the same way and checks both traces are identical.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import httpx

import bso_scenario
from reference_stand_ins import ScriptedMonitor

# JobSpecFromClient's keys in the order pydantic v1 emits them (GpuConfig's fields first).
JOB_SPEC_KEYS = [
    "max_power", "number_of_gpus", "gpu_model",
    "job_id", "job_id_prefix", "batch_sizes", "default_batch_size", "eta_knob", "beta_knob",
    "target_metric", "higher_is_better_metric", "max_epochs", "num_pruning_rounds",
    "window_size", "mab_prior_mean", "mab_prior_precision", "mab_num_explorations", "mab_seed",
]  # fmt: skip
TRIAL_ID_KEYS = ["job_id", "batch_size", "trial_number"]
REPORT_RESPONSE_KEYS = ["stop_train", "converged", "message"]
WINDOW = "BatchSizeOptimizerReplay"


def json_text(payload: dict) -> str:
    """pydantic v1 `.json()` of a model with these fields, in this order."""
    return json.dumps(payload)


def job_spec(number_of_gpus: int = 1, **overrides) -> dict:
    """The JobSpecFromClient body of the peer scenario, in wire order."""
    values = {
        "max_power": bso_scenario.max_power_watts(number_of_gpus),
        "number_of_gpus": number_of_gpus,
        "gpu_model": bso_scenario.GPU_MODEL,
        **bso_scenario.JOB_PARAMS,
    }
    values.update(overrides)
    return {key: values[key] for key in JOB_SPEC_KEYS}


def record(response: httpx.Response) -> dict:
    """One request/response exchange, minus what depends on the port (the host header)."""
    request = response.request
    return {
        "method": request.method,
        "target": request.url.raw_path.decode(),
        "headers": [[name, value] for name, value in request.headers.items() if name != "host"],
        "body": request.content.decode(),
        "status": response.status_code,
        "response": response.text,
    }


class WireClient:
    """Sends requests exactly as the reference client does; keeps a trace of every exchange."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.trace: list[dict] = []

    def _keep(self, response: httpx.Response) -> httpx.Response:
        self.trace.append(record(response))
        return response

    def get(self, path: str, params: dict) -> httpx.Response:
        return self._keep(httpx.get(self.base_url + path, params=params))

    def post(self, path: str, payload: dict | str) -> httpx.Response:
        body = payload if isinstance(payload, str) else json_text(payload)
        return self._keep(httpx.post(self.base_url + path, content=body))

    def patch(self, path: str, payload: dict | str) -> httpx.Response:
        body = payload if isinstance(payload, str) else json_text(payload)
        return self._keep(httpx.patch(self.base_url + path, content=body))

    def delete(self, path: str, params: dict) -> httpx.Response:
        return self._keep(httpx.delete(self.base_url + path, params=params))


@dataclass
class _Measurement:
    time: float
    gpu_energy: dict[int, float]


@dataclass
class RunResult:
    job_id: str
    batch_size: int
    trial_number: int
    epochs: int
    outcome: str  # "c", "t" or "a"
    message: str
    register_status: int

    def summary(self) -> str:
        return bso_scenario.summary(self.batch_size, self.outcome, self.epochs)


def expect_ok(response: httpx.Response) -> dict | None:
    """The client accepts any 2xx; anything else is a failure of the scenario."""
    assert 200 <= response.status_code < 300, (
        f"{response.request.method} {response.request.url}: {response.status_code} {response.text}"
    )
    return response.json()


def replay_run(client: WireClient, abort_after: int = 0) -> RunResult:
    """One training run: register, get a batch size, report epochs, PATCH /trials at exit."""
    registered = client.post("/jobs", job_spec())
    job = expect_ok(registered)
    trial = expect_ok(client.get("/jobs/batch_size", {"job_id": job["job_id"]}))
    assert set(trial) == set(TRIAL_ID_KEYS), trial
    assert trial["batch_size"] in job["batch_sizes"], trial
    workload = bso_scenario.WORKLOADS[trial["batch_size"]]

    monitor = ScriptedMonitor(_Measurement, gpu_indices=[0])
    monitor.begin_window(WINDOW)
    running_time = 0.0
    energy = 0.0
    outcome, message, epochs = "", "", 0
    for epoch in range(1, bso_scenario.JOB_PARAMS["max_epochs"] + 1):
        monitor.run_epoch(workload.epoch_seconds, workload.watts)
        measurement = monitor.end_window(WINDOW)
        running_time += measurement.time
        energy += sum(measurement.gpu_energy.values())
        report = {
            "job_id": trial["job_id"],
            "batch_size": trial["batch_size"],
            "trial_number": trial["trial_number"],
            "time": running_time,
            "energy": energy,
            "metric": workload.metric(epoch),
            "current_epoch": epoch,
        }
        answer = expect_ok(client.post("/report", report))
        assert set(answer) == set(REPORT_RESPONSE_KEYS), answer
        assert isinstance(answer["stop_train"], bool) and isinstance(answer["converged"], bool)
        assert isinstance(answer["message"], str)
        epochs, message = epoch, answer["message"]
        if answer["stop_train"]:
            outcome = "c" if answer["converged"] else "t"
            break
        monitor.begin_window(WINDOW)
        if epoch == abort_after:
            outcome = "a"
            break

    # The client's atexit hook: the TrialId it parsed from GET /jobs/batch_size; status ignored.
    client.patch("/trials", {key: trial[key] for key in TRIAL_ID_KEYS})
    return RunResult(
        job_id=trial["job_id"],
        batch_size=trial["batch_size"],
        trial_number=trial["trial_number"],
        epochs=epochs,
        outcome=outcome,
        message=message,
        register_status=registered.status_code,
    )


def replay_scenario(base_url: str) -> tuple[list[RunResult], list[dict]]:
    client = WireClient(base_url)
    runs = []
    for run in range(1, bso_scenario.RUNS + 1):
        abort_after = bso_scenario.ABORT_AFTER_EPOCHS if run == bso_scenario.ABORTED_RUN else 0
        runs.append(replay_run(client, abort_after))
    return runs, client.trace
