"""Distributed training with a real torch.distributed process group (gloo, world size 2, CPU,
spawned with torch.multiprocessing): the power-limit optimizer combines the ranks' measurements
(energy summed, time maximised) so every rank picks the same limit, zeus_cpp.profile combines a
trial as the reference does (energy summed, time maximised, temperatures averaged), and the
batch-size client broadcasts rank 0's batch size and decisions."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from bso_server import find_zeus_cli, start_server  # noqa: E402

WORLD_SIZE = 2

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available")


def _power_limit_optimizer(rank: int) -> dict:
    from plo_helpers import ScriptedMonitor

    from zeus_cpp.device import get_gpus
    from zeus_cpp.optimizer.power_limit import Energy, GlobalPowerLimitOptimizer

    low, high = (value // 1000 for value in get_gpus().get_power_management_limit_constraints(rank))

    # Alone, rank 0 would choose the minimum (its energy grows with the limit); rank 1's energy
    # falls three times as fast, so the sum is lowest at the maximum.
    def profile(w):
        return (1.0 + rank, float(w) if rank == 0 else 3.0 * (high - w) + 1.0)

    result = {"low": low, "high": high}
    plo = GlobalPowerLimitOptimizer(ScriptedMonitor(profile, gpu_indices=[rank]), optimum_selector=Energy(),
                                    wait_steps=0, warmup_steps=1, profile_steps=2, pl_step=50)  # fmt: skip
    for _ in range(40):
        plo.on_step_begin()
    result["optimal"] = plo.optimal_power_limit
    result["measurements"] = [[m.power_limit, m.energy, m.time] for m in plo.measurements]
    plo.close()

    default = GlobalPowerLimitOptimizer(ScriptedMonitor(profile, gpu_indices=[rank]))
    result["default_world_size"] = default.optimum_selector.world_size
    default.close()
    return result


def _profile(rank: int) -> dict:
    from test_profile import RankMonitor

    from zeus_cpp import profile

    # Rank 0: 0.1 s and 10 J a window at 40 degrees C; rank 1: 0.2 s, 20 J, 50 degrees C.
    monitor = RankMonitor(time_s=0.1 * (rank + 1), energy_j=10.0 * (rank + 1),
                          temperature_c=40.0 + 10.0 * rank)  # fmt: skip
    trial = profile.measure(lambda: None, monitor, measurement_duration=1.0, cooldown_duration=0.0,
                            num_warmup_iterations=0, num_calibration_iterations=2)  # fmt: skip
    return {"iterations": trial.iterations, "total_energy": trial.total_energy,
            "total_time": trial.total_time, "temperature_before": trial.temperature_before,
            "energy_per_iter": trial.energy_per_iter}  # fmt: skip


def _batch_size_optimizer(rank: int, server_url: str) -> dict:
    from zeus_cpp.monitor import ZeusMonitor
    from zeus_cpp.optimizer.batch_size.client import BatchSizeOptimizer
    from zeus_cpp.optimizer.batch_size.common import JobSpec
    from zeus_cpp.optimizer.batch_size.exceptions import ZeusBSOTrainFailError

    monitor = ZeusMonitor(gpu_indices=[rank], cpu_indices=[])
    result = {}

    def spec(**overrides):
        return JobSpec(job_id_prefix="dist", batch_sizes=[16, 32, 64], default_batch_size=32,
                       target_metric=0.9, mab_seed=3, **overrides)  # fmt: skip

    # Rank 0 registers first; rank 1 registers the same job (200).
    clients = {}
    for turn in range(WORLD_SIZE):
        if turn == rank:
            clients["ok"] = BatchSizeOptimizer(monitor, server_url, spec(job_id="dist-ok"))
        dist.barrier()
    bso = clients["ok"]
    result["batch_size"] = bso.get_batch_size()
    result["trial_number"] = bso.trial_number
    bso.on_train_begin()
    bso.on_evaluate(0.5)
    result["finished_after_1"] = bso.training_finished
    bso.on_evaluate(0.95 if rank == 0 else 0.0)  # rank 0's metric decides
    result["finished_after_2"] = bso.training_finished
    result["epochs"] = bso.cur_epoch
    bso.close()

    for turn in range(WORLD_SIZE):
        if turn == rank:
            clients["fail"] = BatchSizeOptimizer(monitor, server_url, spec(job_id="dist-fail", max_epochs=1))
        dist.barrier()
    failing = clients["fail"]
    failing.get_batch_size()
    failing.on_train_begin()
    try:
        failing.on_evaluate(0.1)
        result["raised"] = False
    except ZeusBSOTrainFailError:
        result["raised"] = True
    result["failed_finished"] = failing.training_finished
    failing.close()
    return result


def _worker(rank: int, directory: str, server_url: str | None) -> None:
    os.environ["ZEUS_SIMULATED_GPUS"] = f"{WORLD_SIZE}:v100"
    dist.init_process_group("gloo", init_method=f"file://{directory}/rendezvous", rank=rank,
                            world_size=WORLD_SIZE)  # fmt: skip
    try:
        from zeus_cpp.utils.framework import (
            TorchDistributedReducer,
            all_reduce,
            broadcast_ints,
            get_rank,
            get_world_size,
            is_distributed,
        )

        result = {
            "is_distributed": is_distributed(),
            "rank": get_rank(),
            "world_size": get_world_size(),
            "sum": all_reduce([rank + 1.0, 10.0], "sum"),
            "max": all_reduce([rank + 1.0], "max"),
            "broadcast": broadcast_ints([7, 8] if rank == 0 else [0, 0]),
        }
        reducer = TorchDistributedReducer()
        result["reducer"] = [reducer.sum(rank + 0.5), reducer.max(rank + 0.5), reducer.world_size()]
        result["plo"] = _power_limit_optimizer(rank)
        result["profile"] = _profile(rank)
        if server_url is not None:
            result["bso"] = _batch_size_optimizer(rank, server_url)
        Path(directory, f"result-{rank}.json").write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()


def _run(tmp_path: Path, server_url: str | None) -> list[dict]:
    mp.spawn(_worker, args=(str(tmp_path), server_url), nprocs=WORLD_SIZE, join=True)
    return [json.loads((tmp_path / f"result-{rank}.json").read_text()) for rank in range(WORLD_SIZE)]


@pytest.fixture
def server_url(tmp_path):
    """A `zeus bso serve` URL, or None without a zeus binary (the BSO part is then skipped)."""
    zeus = find_zeus_cli()
    if zeus is None or not zeus.is_file():
        yield None
        return
    server = start_server(zeus, tmp_path / "bso-server")
    try:
        yield server.url
    finally:
        server.stop()


def test_collectives_and_the_optimizers(tmp_path, server_url):
    results = _run(tmp_path, server_url)
    for rank, result in enumerate(results):
        assert result["is_distributed"] and result["rank"] == rank and result["world_size"] == 2
        assert result["sum"] == [3.0, 20.0] and result["max"] == [2.0]
        assert result["broadcast"] == [7, 8]
        assert result["reducer"] == [2.0, 1.5, 2]

    plo = [result["plo"] for result in results]
    high = plo[0]["high"]
    # Same choice on both ranks, from the summed energies: the maximum.
    assert plo[0]["optimal"] == plo[1]["optimal"] == high * 1000
    assert plo[0]["measurements"] == plo[1]["measurements"]
    for power_limit, energy, time in plo[0]["measurements"]:
        assert energy == pytest.approx(power_limit + 3.0 * (high - power_limit) + 1.0)  # summed
        assert time == 2.0  # the slower rank's
    assert plo[0]["default_world_size"] == plo[1]["default_world_size"] == 2

    # Both ranks see the same trial: the slower rank's calibration (0.2 s over 2 iterations) sets
    # ceil(1.0 / 0.1) = 10 iterations; 10 + 20 J; the slower 0.2 s; (40 + 50) / 2 degrees C.
    assert results[0]["profile"] == results[1]["profile"] == {
        "iterations": 10, "total_energy": 30.0, "total_time": 0.2, "temperature_before": 45.0,
        "energy_per_iter": 3.0,
    }

    if server_url is None:
        pytest.skip("no zeus binary for the BSO part (set ZEUS_CLI or build the zeus target)")
    bso = [result["bso"] for result in results]
    assert bso[0]["batch_size"] == bso[1]["batch_size"] == 32
    assert bso[0]["trial_number"] == bso[1]["trial_number"] == 1
    for rank_result in bso:
        assert not rank_result["finished_after_1"]
        assert rank_result["finished_after_2"]
        assert rank_result["raised"] and rank_result["failed_finished"]
    assert bso[0]["epochs"] == 2
