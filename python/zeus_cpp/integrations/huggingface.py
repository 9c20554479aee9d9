"""Hugging Face Transformers adapter: the power-limit optimizer as a `TrainerCallback`.

    from transformers import Trainer
    from zeus_cpp.monitor import ZeusMonitor
    from zeus_cpp.optimizer.power_limit import HFGlobalPowerLimitOptimizer

    monitor = ZeusMonitor(gpu_indices=[0])
    trainer = Trainer(..., callbacks=[HFGlobalPowerLimitOptimizer(monitor)])

`transformers` is looked up when the adapter is created (not when this module is imported), so
the adapter works whenever `transformers` is importable then; without it, creating one raises
ImportError.
"""

from __future__ import annotations

import functools
import inspect
from pathlib import Path
from typing import TYPE_CHECKING

from zeus_cpp import _zeus

if TYPE_CHECKING:
    from zeus_cpp.optimizer.power_limit import OptimumSelector

# GlobalPowerLimitOptimizer's defaults, from the C++ options (their only copy).
_DEFAULTS = _zeus._POWER_LIMIT_OPTIMIZER_DEFAULTS

__all__ = ["HFGlobalPowerLimitOptimizer"]


def _trainer_callback_base() -> type:
    try:
        from transformers import TrainerCallback
    except ImportError as error:
        raise ImportError(
            "HFGlobalPowerLimitOptimizer needs the transformers package (pip install transformers)"
        ) from error
    return TrainerCallback


@functools.lru_cache(maxsize=None)
def _with_base(cls: type, base: type) -> type:
    # The adapter class with transformers' TrainerCallback mixed in, so that the Trainer gets every
    # hook it calls (the ones not forwarded are TrainerCallback's no-ops).
    return type(cls.__name__, (cls, base), {"__module__": cls.__module__, "__qualname__": cls.__qualname__})


class HFGlobalPowerLimitOptimizer:
    """`GlobalPowerLimitOptimizer` for the Hugging Face `Trainer`: forwards `on_step_begin` and
    `on_epoch_end`. Same parameters as `GlobalPowerLimitOptimizer`; the instance is a
    `transformers.TrainerCallback`."""

    def __new__(cls, *args, **kwargs):
        base = _trainer_callback_base()
        if not issubclass(cls, base):
            cls = _with_base(cls, base)
        return object.__new__(cls)

    def __init__(
        self,
        monitor,
        optimum_selector: OptimumSelector | None = None,
        wait_steps: int = _DEFAULTS["wait_steps"],
        warmup_steps: int = _DEFAULTS["warmup_steps"],
        profile_steps: int = _DEFAULTS["profile_steps"],
        pl_step: int = _DEFAULTS["pl_step"],
        profile_path: str | Path | None = None,
    ) -> None:
        from zeus_cpp.optimizer.power_limit import GlobalPowerLimitOptimizer

        self.optimizer = GlobalPowerLimitOptimizer(
            monitor,
            optimum_selector=optimum_selector,
            wait_steps=wait_steps,
            warmup_steps=warmup_steps,
            profile_steps=profile_steps,
            pl_step=pl_step,
            profile_path=profile_path,
        )

    def on_step_begin(self, args, state, control, model=None, **kwargs) -> None:
        """Called by the Trainer before each training step."""
        self.optimizer.on_step_begin()

    def on_epoch_end(self, args, state, control, model=None, **kwargs) -> None:
        """Called by the Trainer after each epoch."""
        self.optimizer.on_epoch_end()


# inspect.signature(HFGlobalPowerLimitOptimizer) shows __init__'s parameters, not __new__'s.
HFGlobalPowerLimitOptimizer.__signature__ = inspect.signature(  # type: ignore[attr-defined]
    HFGlobalPowerLimitOptimizer.__init__
).replace(parameters=list(inspect.signature(HFGlobalPowerLimitOptimizer.__init__).parameters.values())[1:])
