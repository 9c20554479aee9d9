"""Training-loop callbacks: the hooks the optimizers implement, and a set that fans them out.

A training loop calls the hooks of one `Callback` (or of a `CallbackSet` holding several) at the
matching points. Every hook of the base class does nothing, so a subclass implements only those
it needs.
"""

from __future__ import annotations

from typing import Iterable

__all__ = ["Callback", "CallbackSet"]


class Callback:
    """Base class of training-loop callbacks; every hook is a no-op."""

    def on_train_begin(self) -> None:
        """Before the first epoch."""

    def on_train_end(self) -> None:
        """After the last epoch."""

    def on_epoch_begin(self) -> None:
        """Before each epoch."""

    def on_epoch_end(self) -> None:
        """After each epoch."""

    def on_step_begin(self) -> None:
        """Before each training step (iteration)."""

    def on_step_end(self) -> None:
        """After each training step."""

    def on_evaluate(self, metric: float) -> None:
        """After each evaluation, with the validation metric."""

    def on_instruction_begin(self, name: str) -> None:
        """Before a named instruction (e.g. "forward", "backward")."""

    def on_instruction_end(self, name: str) -> None:
        """After a named instruction."""


class CallbackSet(Callback):
    """Several callbacks driven as one: each hook calls the callbacks' hooks in order."""

    def __init__(self, callbacks: Iterable[Callback]) -> None:
        if isinstance(callbacks, (str, bytes)) or not hasattr(callbacks, "__iter__"):
            raise TypeError(
                f"callbacks must be an iterable of Callback objects, not {type(callbacks).__name__}"
            )
        self.callbacks = list(callbacks)
        for position, callback in enumerate(self.callbacks):
            if not isinstance(callback, Callback):
                raise TypeError(
                    f"callbacks[{position}] must be a Callback, not {type(callback).__name__}"
                )

    def on_train_begin(self) -> None:
        for callback in self.callbacks:
            callback.on_train_begin()

    def on_train_end(self) -> None:
        for callback in self.callbacks:
            callback.on_train_end()

    def on_epoch_begin(self) -> None:
        for callback in self.callbacks:
            callback.on_epoch_begin()

    def on_epoch_end(self) -> None:
        for callback in self.callbacks:
            callback.on_epoch_end()

    def on_step_begin(self) -> None:
        for callback in self.callbacks:
            callback.on_step_begin()

    def on_step_end(self) -> None:
        for callback in self.callbacks:
            callback.on_step_end()

    def on_evaluate(self, metric: float) -> None:
        for callback in self.callbacks:
            callback.on_evaluate(metric)

    def on_instruction_begin(self, name: str) -> None:
        for callback in self.callbacks:
            callback.on_instruction_begin(name)

    def on_instruction_end(self, name: str) -> None:
        for callback in self.callbacks:
            callback.on_instruction_end(name)
