"""The batch-size-optimizer client against a real `zeus bso serve` (SQLite in a temporary
directory), on simulated GPUs."""

from __future__ import annotations

import inspect
import json
import os

import pytest

os.environ.setdefault("ZEUS_SIMULATED_GPUS", "2:v100")

from bso_server import bso_server, zeus_cli  # noqa: E402,F401  (fixtures)

from zeus_cpp import _zeus  # noqa: E402
from zeus_cpp.callback import Callback  # noqa: E402
from zeus_cpp.device import get_gpus  # noqa: E402
from zeus_cpp.monitor import ZeusMonitor  # noqa: E402
from zeus_cpp.optimizer.batch_size.client import BatchSizeOptimizer  # noqa: E402
from zeus_cpp.optimizer.batch_size.common import CreatedJob, JobSpec, JobSpecFromClient  # noqa: E402
from zeus_cpp.optimizer.batch_size.exceptions import (  # noqa: E402
    ZeusBSOBadOperationError,
    ZeusBSOConfigError,
    ZeusBSOOperationOrderError,
    ZeusBSORuntimError,
    ZeusBSOTrainFailError,
)


def job(**overrides) -> JobSpec:
    fields = dict(job_id_prefix="pytest", batch_sizes=[128, 32, 64], default_batch_size=64,
                  target_metric=0.9, max_epochs=5, mab_seed=1)  # fmt: skip
    fields.update(overrides)
    return JobSpec(**fields)


@pytest.fixture
def monitor():
    return ZeusMonitor(gpu_indices=[0], cpu_indices=[])


@pytest.fixture
def make_client(bso_server, monitor):
    """BatchSizeOptimizer(monitor, <server>, spec, rank); every client is closed before the
    server stops (a client left open would retry ending its trial at exit)."""
    clients = []

    def make(spec, rank=0, url=None):
        client = BatchSizeOptimizer(monitor, url or bso_server.url, spec, rank=rank)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def test_signature_and_base_class():
    assert issubclass(BatchSizeOptimizer, Callback)
    parameters = inspect.signature(BatchSizeOptimizer).parameters
    # The reference's parameters, then zeus_cpp's keyword-only ones (interruption and resumption).
    assert list(parameters) == ["monitor", "server_url", "job", "rank", "resume", "state_dir"]
    assert all(parameters[name].kind is inspect.Parameter.KEYWORD_ONLY for name in ("resume", "state_dir"))
    assert parameters["rank"].default == 0


def test_a_converging_trial(make_client):
    bso = make_client(job())
    assert isinstance(bso.job, CreatedJob)
    assert bso.job.job_id.startswith("pytest-")
    assert bso.job.batch_sizes == [32, 64, 128]
    max_w = get_gpus().get_power_management_limit_constraints(0)[1] // 1000
    assert (bso.job.max_power, bso.job.number_of_gpus) == (max_w, 1)
    assert bso.job.gpu_model == get_gpus().get_name(0)
    # job_spec: what the client sent (the reference's attribute): the spec and the GPU config.
    assert type(bso.job_spec) is JobSpecFromClient
    assert bso.job_spec.job_id == job().job_id and bso.job_spec.batch_sizes == [32, 64, 128]
    assert (bso.job_spec.max_power, bso.job_spec.gpu_model) == (max_w, get_gpus().get_name(0))
    assert bso.current_batch_size == 0

    batch_size = bso.get_batch_size()
    assert batch_size == 64  # pruning starts with the default batch size
    assert bso.get_batch_size() == 64  # cached: no new trial
    assert bso.trial_number == 1
    bso.on_train_begin()
    bso.on_evaluate(0.5)
    assert not bso.training_finished and bso.cur_epoch == 1
    first_energy = bso.consumed_energy
    bso.on_evaluate(0.95)  # target reached: converged
    assert bso.training_finished and bso.cur_epoch == 2
    assert bso.consumed_energy >= first_energy >= 0.0 and bso.running_time > 0.0
    bso.on_evaluate(0.99)  # a no-op once finished
    assert bso.cur_epoch == 2
    bso.close()
    bso.close()


def test_a_failing_trial_and_the_next_launch(make_client):
    bso = make_client(job(max_epochs=2))
    assert bso.get_batch_size() == 64
    bso.on_train_begin()
    bso.on_evaluate(0.1)
    with pytest.raises(ZeusBSOTrainFailError):
        bso.on_evaluate(0.2)  # max_epochs reached without convergence
    assert bso.training_finished
    bso.close()

    # The relaunch registers the same job (by id) and gets another batch size.
    again = make_client(job(max_epochs=2, job_id=bso.job.job_id))
    assert again.job.job_id == bso.job.job_id
    assert again.get_batch_size() in (32, 128)
    again.close()


def test_an_unreported_trial_fails_when_the_client_closes(make_client):
    bso = make_client(job())
    assert bso.get_batch_size() == 64
    bso.close()  # PATCH /trials: the trial failed; a failed exploration is explored again
    again = make_client(job(job_id=bso.job.job_id))
    assert (again.get_batch_size(), again.trial_number) == (64, 2)


def test_calls_out_of_order(make_client):
    bso = make_client(job())
    with pytest.raises(ZeusBSOOperationOrderError):
        bso.on_evaluate(0.5)
    bso.on_train_begin()  # allowed before get_batch_size(), as in the reference (test_bso_client_order.py)
    with pytest.raises(ZeusBSOOperationOrderError):
        bso.on_evaluate(0.5)
    other = make_client(job(job_id=bso.job.job_id), rank=1)
    with pytest.raises(ZeusBSOBadOperationError, match="rank"):
        other.get_batch_size()
    bso.close()
    other.close()


def test_server_errors_are_zeus_bso_runtim_error(make_client):
    make_client(job(job_id="pytest-fixed"))
    # The same id with other parameters: 409 Conflict.
    with pytest.raises(ZeusBSORuntimError, match="409"):
        make_client(job(job_id="pytest-fixed", max_epochs=7))


def test_an_unreachable_server(monitor, unused_port):
    spec = json.dumps({**job().dict(), "max_power": 1.0, "number_of_gpus": 1, "gpu_model": "x"})
    with pytest.raises(ZeusBSORuntimError, match="POST /jobs"):
        _zeus._BatchSizeOptimizer(monitor, f"http://127.0.0.1:{unused_port}", spec, max_attempts=1, timeout=2.0)


@pytest.fixture
def unused_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    ("args", "error", "name"),
    [
        (lambda m: (m, 8000, job()), TypeError, "server_url"),
        (lambda m: (m, "http://127.0.0.1:1", {"job_id_prefix": "x"}), TypeError, "job"),
        (lambda m: (m, "http://127.0.0.1:1", job(), -1), ValueError, "rank"),
        (lambda m: (m, "http://127.0.0.1:1", job(), "0"), TypeError, "rank"),
        (lambda m: ("monitor", "http://127.0.0.1:1", job()), TypeError, "monitor"),
    ],
)
def test_bad_arguments_name_the_parameter(monitor, args, error, name):
    with pytest.raises(error, match=name):
        BatchSizeOptimizer(*args(monitor))


def test_a_bad_url_is_a_config_error(monitor):
    with pytest.raises(ZeusBSOConfigError, match="ftp"):
        BatchSizeOptimizer(monitor, "ftp://127.0.0.1:1", job())


@pytest.mark.parametrize(
    ("overrides", "error", "name"),
    [
        ({"batch_sizes": []}, ValueError, "batch_sizes"),
        ({"batch_sizes": [32, "sixty-four"]}, TypeError, r"batch_sizes\[1\]"),  # "64" is coerced
        ({"batch_sizes": 64}, TypeError, "batch_sizes"),
        ({"default_batch_size": 48}, ValueError, "default_batch_size"),
        ({"eta_knob": 1.5}, ValueError, "eta_knob"),
        ({"beta_knob": 0}, ValueError, "beta_knob"),
        ({"max_epochs": 0}, ValueError, "max_epochs"),
        ({"job_id": "other-1"}, ValueError, "job_id"),
        ({"job_id_prefix": ""}, ValueError, "job_id_prefix"),
        ({"higher_is_better_metric": "maybe"}, TypeError, "higher_is_better_metric"),  # "yes" is True
        ({"target_metric": "high"}, TypeError, "target_metric"),
    ],
)
def test_job_spec_validation(overrides, error, name):
    with pytest.raises(error, match=name):
        job(**overrides)


def test_job_spec_defaults_and_sorting():
    spec = JobSpec(job_id_prefix="j", batch_sizes=[64, 8, 32], default_batch_size=32)
    assert spec.batch_sizes == [8, 32, 64]
    assert spec.job_id is None
    assert (spec.eta_knob, spec.beta_knob, spec.target_metric, spec.higher_is_better_metric) == (0.5, 2.0, 0.5, True)
    assert (spec.max_epochs, spec.num_pruning_rounds, spec.window_size) == (100, 2, 0)
    assert (spec.mab_prior_mean, spec.mab_prior_precision, spec.mab_num_explorations, spec.mab_seed) == (0.0, 0.0, 2, None)
    assert JobSpec(job_id_prefix="j", batch_sizes=[8], default_batch_size=8, beta_knob=None).beta_knob is None


def test_a_job_asks_for_a_policy_by_name(make_client):
    # zeus_cpp's extension: JobSpec.policy reaches the server; None leaves the server's default.
    assert job().policy is None
    from zeus_cpp.optimizer.batch_size.common import _job_wire_dict

    assert "policy" not in _job_wire_dict(job())  # the reference's request, unchanged
    bso = make_client(job(job_id="pytest-policy", policy="low-regret"))
    assert bso.job.policy == "low-regret"
    assert bso.get_batch_size() == 64  # the default batch size first
    again = make_client(job(job_id="pytest-policy"))  # the same job, no policy named
    assert again.job.policy == "low-regret"
    assert make_client(job()).job.policy == "zeus"  # the server's default
    with pytest.raises(ZeusBSORuntimError, match="low-regret"):
        make_client(job(policy="greedy"))
    with pytest.raises(TypeError, match="policy"):
        job(policy=["zeus"])  # (3 becomes "3", as pydantic v1 coerces, and the server refuses it)
