"""The Hugging Face adapter, with a minimal fake `transformers` module (the real one is not
installed here) injected into sys.modules."""

from __future__ import annotations

import inspect
import sys
import types

import pytest

from plo_helpers import ScriptedMonitor

from zeus_cpp.optimizer.power_limit import GlobalPowerLimitOptimizer, HFGlobalPowerLimitOptimizer, Profiling


class FakeTrainerCallback:
    """The part of transformers.TrainerCallback the Trainer relies on: every event a no-op."""

    def on_init_end(self, args, state, control, **kwargs):
        return None

    def on_train_begin(self, args, state, control, **kwargs):
        return None

    def on_epoch_begin(self, args, state, control, **kwargs):
        return None

    def on_step_begin(self, args, state, control, **kwargs):
        return None

    def on_step_end(self, args, state, control, **kwargs):
        return None

    def on_epoch_end(self, args, state, control, **kwargs):
        return None

    def on_train_end(self, args, state, control, **kwargs):
        return None


@pytest.fixture
def fake_transformers(monkeypatch):
    module = types.ModuleType("transformers")
    module.TrainerCallback = FakeTrainerCallback
    monkeypatch.setitem(sys.modules, "transformers", module)
    return module


@pytest.fixture
def no_transformers(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers -> ImportError


def test_same_signature_as_the_global_optimizer():
    assert inspect.signature(HFGlobalPowerLimitOptimizer) == inspect.signature(GlobalPowerLimitOptimizer)
    assert inspect.signature(HFGlobalPowerLimitOptimizer.__init__) == inspect.signature(
        GlobalPowerLimitOptimizer.__init__
    )


def test_without_transformers_it_raises_import_error(no_transformers):
    with pytest.raises(ImportError, match="transformers"):
        HFGlobalPowerLimitOptimizer(ScriptedMonitor(lambda w: (1.0, 1.0)))


def test_a_trainer_drives_the_optimizer(fake_transformers):
    monitor = ScriptedMonitor(lambda w: (1.0, float(w)))
    callback = HFGlobalPowerLimitOptimizer(monitor, wait_steps=0, warmup_steps=1, profile_steps=2, pl_step=50)
    try:
        assert isinstance(callback, fake_transformers.TrainerCallback)
        assert isinstance(callback, HFGlobalPowerLimitOptimizer)
        assert isinstance(callback.optimizer, GlobalPowerLimitOptimizer)
        args, state, control = object(), object(), object()
        # What the Trainer does: every event on every callback.
        callback.on_init_end(args, state, control)
        callback.on_train_begin(args, state, control)
        callback.on_epoch_begin(args, state, control)
        for _ in range(3):
            callback.on_step_begin(args, state, control, model=None)
            callback.on_step_end(args, state, control)
        assert isinstance(callback.optimizer.state, Profiling)
        callback.on_epoch_end(args, state, control)  # interrupts the profiling window
        assert monitor.calls[-1][0] == "cancel"
        for _ in range(40):
            callback.on_step_begin(args, state, control)
        assert callback.optimizer.optimal_power_limit is not None
        callback.on_train_end(args, state, control)
    finally:
        callback.optimizer.close()


def test_the_adapter_is_reexported():
    import zeus_cpp.integrations.huggingface as hf

    assert hf.HFGlobalPowerLimitOptimizer is HFGlobalPowerLimitOptimizer
