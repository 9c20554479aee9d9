"""The reference's freedoms in the BSO client's call order, against a real `zeus bso serve` on
simulated GPUs: on_train_begin() before get_batch_size(), and handing rank 0's trial to another
rank's client by assigning current_batch_size and trial_number."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("ZEUS_SIMULATED_GPUS", "2:v100")

from bso_server import bso_server, zeus_cli  # noqa: E402,F401  (fixtures)

from zeus_cpp.monitor import ZeusMonitor  # noqa: E402
from zeus_cpp.optimizer.batch_size.client import BatchSizeOptimizer  # noqa: E402
from zeus_cpp.optimizer.batch_size.common import JobSpec  # noqa: E402
from zeus_cpp.optimizer.batch_size.exceptions import (  # noqa: E402
    ZeusBSOBadOperationError,
    ZeusBSOOperationOrderError,
    ZeusBSOTrainFailError,
)


def job(**overrides) -> JobSpec:
    fields = dict(job_id_prefix="order", batch_sizes=[128, 32, 64], default_batch_size=64,
                  target_metric=0.9, max_epochs=5, mab_seed=1)  # fmt: skip
    fields.update(overrides)
    return JobSpec(**fields)


@pytest.fixture
def make_client(bso_server):
    clients = []

    def make(spec, rank=0):
        client = BatchSizeOptimizer(ZeusMonitor(gpu_indices=[0], cpu_indices=[]), bso_server.url, spec, rank=rank)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def test_on_train_begin_before_get_batch_size(make_client):
    bso = make_client(job())
    bso.on_train_begin()  # the reference's test_converge_fail does this
    assert bso.get_batch_size() == 64 and bso.current_batch_size == 64
    bso.on_evaluate(0.5)  # measured since the trial was known
    assert bso.cur_epoch == 1 and bso.running_time > 0.0 and not bso.training_finished
    bso.on_evaluate(0.95)
    assert bso.training_finished and bso.cur_epoch == 2


def test_handing_rank_0s_trial_to_other_ranks(make_client):
    first = make_client(job(max_epochs=2))
    others = [make_client(job(max_epochs=2, job_id=first.job.job_id), rank=rank) for rank in (1, 2)]
    for other in others:
        with pytest.raises(ZeusBSOBadOperationError):
            other.get_batch_size()
    batch_size = first.get_batch_size()
    others[0].current_batch_size = batch_size  # the reference's order
    others[0].trial_number = first.trial_number
    others[1].on_train_begin()  # before the trial is known: measures once it is
    others[1].trial_number = first.trial_number  # the other order
    others[1].current_batch_size = batch_size
    others[0].on_train_begin()
    for other in others:
        assert (other.current_batch_size, other.trial_number) == (batch_size, first.trial_number)
        with pytest.raises(ZeusBSOBadOperationError):
            other.get_batch_size()  # still rank 0's job, as in the reference
    first.on_train_begin()
    first.on_evaluate(0.1)
    with pytest.raises(ZeusBSOTrainFailError):
        first.on_evaluate(0.2)  # max_epochs without convergence
    for other in others:
        with pytest.raises(ZeusBSOTrainFailError, match="already reported"):
            other.on_evaluate(0.3)  # the same trial: the server knows it ended


def test_assignments_are_validated(make_client):
    bso = make_client(job())
    with pytest.raises(TypeError, match="current_batch_size"):
        bso.current_batch_size = "64"
    with pytest.raises(ValueError, match="current_batch_size 48"):
        bso.current_batch_size = 48
    with pytest.raises(TypeError, match="trial_number"):
        bso.trial_number = True
    with pytest.raises(ValueError, match="trial_number"):
        bso.trial_number = -1
    assert (bso.current_batch_size, bso.trial_number) == (0, 0)


def test_half_a_trial_is_an_order_error(make_client):
    bso = make_client(job())
    bso.current_batch_size = 32
    assert bso.current_batch_size == 32 and bso.trial_number == 0
    with pytest.raises(ZeusBSOOperationOrderError, match="trial_number"):
        bso.on_evaluate(0.5)
    with pytest.raises(ZeusBSOOperationOrderError, match="trial_number"):
        bso.get_batch_size()
    bso.current_batch_size = 0  # withdrawn: get_batch_size() asks the server again
    assert bso.get_batch_size() == 64


def test_a_set_trial_cannot_be_changed(make_client):
    bso = make_client(job())
    batch_size = bso.get_batch_size()
    bso.current_batch_size = batch_size  # the same value: nothing to do
    bso.trial_number = bso.trial_number
    other = 32 if batch_size != 32 else 128
    with pytest.raises(ZeusBSOBadOperationError, match="already runs trial"):
        bso.current_batch_size = other
    with pytest.raises(ZeusBSOBadOperationError, match="already runs trial"):
        bso.trial_number = bso.trial_number + 1
    assert bso.current_batch_size == batch_size

