"""Callback and CallbackSet."""

from __future__ import annotations

import inspect

import pytest

from zeus_cpp.callback import Callback, CallbackSet

HOOKS = {
    "on_train_begin": (), "on_train_end": (), "on_epoch_begin": (), "on_epoch_end": (),
    "on_step_begin": (), "on_step_end": (), "on_evaluate": (0.5,),
    "on_instruction_begin": ("forward",), "on_instruction_end": ("forward",),
}  # fmt: skip


class Recorder(Callback):
    def __init__(self, name, log):
        self.name = name
        self.log = log

    def __getattribute__(self, attribute):
        if attribute in HOOKS:
            return lambda *args: self.log.append((self.name, attribute, args))
        return super().__getattribute__(attribute)


def test_every_hook_is_a_no_op():
    callback = Callback()
    for hook, args in HOOKS.items():
        assert getattr(callback, hook)(*args) is None
    assert list(inspect.signature(Callback.on_evaluate).parameters) == ["self", "metric"]
    assert list(inspect.signature(Callback.on_instruction_begin).parameters) == ["self", "name"]


def test_callback_set_calls_in_order():
    log = []
    callbacks = CallbackSet([Recorder("a", log), Recorder("b", log)])
    assert isinstance(callbacks, Callback)
    for hook, args in HOOKS.items():
        getattr(callbacks, hook)(*args)
    assert log == [(name, hook, args) for hook, args in HOOKS.items() for name in ("a", "b")]


def test_callback_set_accepts_any_iterable_and_nests():
    log = []
    inner = CallbackSet(Recorder(n, log) for n in ("x", "y"))
    CallbackSet([inner, Recorder("z", log)]).on_evaluate(1.0)
    assert [entry[0] for entry in log] == ["x", "y", "z"]


@pytest.mark.parametrize("bad", [None, 3, "callbacks", [Callback(), object()]])
def test_callback_set_rejects_non_callbacks(bad):
    with pytest.raises(TypeError, match="callbacks"):
        CallbackSet(bad)
