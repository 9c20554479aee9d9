"""API parity with the reference (optimizer, BSO client, callbacks, utils): every name exists at
the reference's module path with the reference's parameters."""

from __future__ import annotations

import dataclasses
import importlib
import inspect

import pytest


def params(callable_) -> list[str]:
    """The parameters a reference call can pass: keyword-only ones are zeus_cpp's additions."""
    return [
        name
        for name, parameter in inspect.signature(callable_).parameters.items()
        if name != "self" and parameter.kind is not inspect.Parameter.KEYWORD_ONLY
    ]


PYTHON_SIGNATURES = [
    ("zeus_cpp.callback", "CallbackSet", ["callbacks"]),
    ("zeus_cpp.optimizer.power_limit", "GlobalPowerLimitOptimizer",
     ["monitor", "optimum_selector", "wait_steps", "warmup_steps", "profile_steps", "pl_step", "profile_path"]),
    ("zeus_cpp.optimizer.power_limit", "HFGlobalPowerLimitOptimizer",
     ["monitor", "optimum_selector", "wait_steps", "warmup_steps", "profile_steps", "pl_step", "profile_path"]),
    ("zeus_cpp.optimizer", "GlobalPowerLimitOptimizer",
     ["monitor", "optimum_selector", "wait_steps", "warmup_steps", "profile_steps", "pl_step", "profile_path"]),
    ("zeus_cpp.optimizer.batch_size.client", "BatchSizeOptimizer", ["monitor", "server_url", "job", "rank"]),
    ("zeus_cpp.utils.metric", "zeus_cost", ["energy", "time", "eta_knob", "max_power"]),
    ("zeus_cpp.utils.lr_scaler", "SquareRootScaler", ["bs", "lr"]),
    ("zeus_cpp.utils.lr_scaler", "LinearScaler", ["bs", "lr"]),
    ("zeus_cpp.utils.framework", "all_reduce", ["object", "operation"]),
    ("zeus_cpp.utils.framework", "is_distributed", []),
    ("zeus_cpp.utils.framework", "get_rank", []),
    ("zeus_cpp.utils.framework", "get_world_size", []),
    ("zeus_cpp.utils.framework", "torch_is_available", ["ensure_available", "ensure_cuda"]),
    ("zeus_cpp.utils.framework", "jax_is_available", ["ensure_available", "ensure_cuda"]),
    ("zeus_cpp.utils.framework", "cupy_is_available", ["ensure_available", "ensure_cuda"]),
    ("zeus_cpp.utils.framework", "sync_execution", ["gpu_devices", "sync_with"]),
]  # fmt: skip


@pytest.mark.parametrize(("module", "name", "expected"), PYTHON_SIGNATURES)
def test_python_signatures(module, name, expected):
    assert params(getattr(importlib.import_module(module), name)) == expected


def test_defaults():
    from zeus_cpp.optimizer.batch_size.client import BatchSizeOptimizer
    from zeus_cpp.optimizer.power_limit import GlobalPowerLimitOptimizer

    defaults = {n: p.default for n, p in inspect.signature(GlobalPowerLimitOptimizer).parameters.items()}
    assert defaults == {"monitor": inspect.Parameter.empty, "optimum_selector": None, "wait_steps": 1,
                        "warmup_steps": 10, "profile_steps": 40, "pl_step": 25, "profile_path": None}  # fmt: skip
    assert inspect.signature(BatchSizeOptimizer).parameters["rank"].default == 0
    # zeus_cpp's additions (interruption and resumption), keyword only so reference calls bind alike.
    added = {n: p for n, p in inspect.signature(BatchSizeOptimizer).parameters.items() if p.kind is p.KEYWORD_ONLY}
    assert {n: p.default for n, p in added.items()} == {"resume": True, "state_dir": None}


def test_callback_hooks():
    from zeus_cpp.callback import Callback

    hooks = {"on_train_begin": [], "on_train_end": [], "on_epoch_begin": [], "on_epoch_end": [],
             "on_step_begin": [], "on_step_end": [], "on_evaluate": ["metric"],
             "on_instruction_begin": ["name"], "on_instruction_end": ["name"]}  # fmt: skip
    for hook, expected in hooks.items():
        assert params(getattr(Callback, hook)) == expected, hook


def test_client_methods():
    from zeus_cpp.optimizer.batch_size.client import BatchSizeOptimizer

    assert params(BatchSizeOptimizer.get_batch_size) == []
    assert params(BatchSizeOptimizer.on_train_begin) == []
    assert params(BatchSizeOptimizer.on_evaluate) == ["metric"]
    for attribute in ("current_batch_size", "cur_epoch", "running_time", "consumed_energy",
                      "training_finished", "trial_number"):  # fmt: skip
        assert isinstance(inspect.getattr_static(BatchSizeOptimizer, attribute), property), attribute


def fields(cls) -> list[str]:
    return [field.name for field in dataclasses.fields(cls)]


def test_job_models():
    from zeus_cpp.optimizer.batch_size import common

    job_params = ["job_id", "job_id_prefix", "batch_sizes", "default_batch_size", "eta_knob", "beta_knob",
                  "target_metric", "higher_is_better_metric", "max_epochs", "num_pruning_rounds",
                  "window_size", "mab_prior_mean", "mab_prior_precision", "mab_num_explorations", "mab_seed",
                  "policy"]  # fmt: skip  (policy: zeus_cpp's extension, after the reference's fields)
    assert fields(common.JobParams) == job_params
    assert fields(common.JobSpec) == job_params
    assert set(fields(common.GpuConfig)) == {"max_power", "number_of_gpus", "gpu_model"}
    assert set(fields(common.CreatedJob)) == set(job_params) | {"max_power", "number_of_gpus", "gpu_model"}
    assert fields(common.TrialId) == ["job_id", "batch_size", "trial_number"]
    assert fields(common.TrainingResult) == ["job_id", "batch_size", "trial_number", "time", "energy",
                                             "metric", "current_epoch"]  # fmt: skip
    assert fields(common.ReportResponse) == ["stop_train", "converged", "message"]


def test_power_limit_states():
    from zeus_cpp.optimizer import power_limit

    assert fields(power_limit.Ready) == ["next_power_limit", "steps"]
    assert fields(power_limit.Warmup) == ["current_power_limit", "steps"]
    assert fields(power_limit.Profiling) == ["current_power_limit", "steps"]
    assert fields(power_limit.Done) == ["optimal_power_limit"]


def test_native_classes_take_the_reference_keywords():
    from zeus_cpp.optimizer import power_limit as pl

    m = pl.PowerLimitMeasurement(power_limit=300, energy=1.0, time=2.0)
    assert (m.power_limit, m.energy, m.time) == (300, 1.0, 2.0)
    for selector in (pl.Energy(), pl.Time(), pl.ZeusCost(eta_knob=0.5, world_size=1),
                     pl.MaxSlowdownConstraint(factor=1.2)):  # fmt: skip
        assert isinstance(selector, pl.OptimumSelector)
        assert selector.select(measurements=[m]) == 300
    assert "select(self" in pl.OptimumSelector.select.__doc__


def test_exceptions():
    from zeus_cpp.exception import ZeusBaseError
    from zeus_cpp.optimizer.batch_size import exceptions

    for name in ("ZeusBSOConfigError", "ZeusBSORuntimError", "ZeusBSOTrainFailError",
                 "ZeusBSOOperationOrderError", "ZeusBSOBadOperationError"):  # fmt: skip
        assert issubclass(getattr(exceptions, name), ZeusBaseError), name
