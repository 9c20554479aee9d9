"""The just-in-time power-limit optimizer (the reference's `zeus.optimizer.power_limit`).

`GlobalPowerLimitOptimizer` is a `Callback`: call `on_step_begin()` before every training step and
`on_epoch_end()` after every epoch. During the first steps it sets each candidate power limit,
from the maximum down to the minimum in `pl_step` watts, runs `warmup_steps` steps, measures
`profile_steps` steps with the monitor, then picks a limit with the `optimum_selector` and keeps
it for the rest of training. The state machine, the GPU control and the selectors run in C++
(zeus::runtime::PowerLimitOptimizer); this module gives them the reference's Python API.

Under torch.distributed (a process group is initialised) every rank must create the optimizer
and call its hooks at the same steps: the measurements are combined across ranks (energy summed,
time maximised) so that all ranks choose the same limit.
"""

from __future__ import annotations

import atexit
import functools
import inspect
import operator
import warnings
import weakref
from dataclasses import dataclass
from pathlib import Path

from zeus_cpp import _zeus
from zeus_cpp.callback import Callback
from zeus_cpp.utils._checks import check_path
from zeus_cpp.utils.framework import TorchDistributedReducer, get_world_size, is_distributed

__all__ = [
    "Ready",
    "Warmup",
    "Profiling",
    "Done",
    "PowerLimitMeasurement",
    "OptimumSelector",
    "Energy",
    "Time",
    "ZeusCost",
    "MaxSlowdownConstraint",
    "Reducer",
    "LocalReducer",
    "GlobalPowerLimitOptimizer",
    "HFGlobalPowerLimitOptimizer",
    "load_profile",
    "save_profile",
]

# Bound in C++ (src/python/optimizer.cpp).
# The defaults of wait_steps, warmup_steps, profile_steps and pl_step: the C++ options'
# (zeus::runtime::PowerLimitOptimizerOptions), their only copy.
_DEFAULTS: dict[str, int] = dict(_zeus._POWER_LIMIT_OPTIMIZER_DEFAULTS)
PowerLimitMeasurement = _zeus.PowerLimitMeasurement
OptimumSelector = _zeus.OptimumSelector
Energy = _zeus.Energy
Time = _zeus.Time
ZeusCost = _zeus.ZeusCost
MaxSlowdownConstraint = _zeus.MaxSlowdownConstraint
Reducer = _zeus.Reducer
LocalReducer = _zeus.LocalReducer


@dataclass
class Ready:
    """Waiting `steps` more step beginnings before warming up at `next_power_limit` (mW)."""

    next_power_limit: int
    steps: int


@dataclass
class Warmup:
    """Running `steps` more warm-up steps at `current_power_limit` (mW)."""

    current_power_limit: int
    steps: int


@dataclass
class Profiling:
    """Measuring `steps` more steps at `current_power_limit` (mW)."""

    current_power_limit: int
    steps: int


@dataclass
class Done:
    """Profiling is over; training runs at `optimal_power_limit` (mW)."""

    optimal_power_limit: int


def load_profile(path: str | Path) -> list[PowerLimitMeasurement]:
    """The measurements of a profile file written by the optimizer
    (`{"measurements": [{"power_limit": W, "energy": J, "time": s}, ...]}`)."""
    path = check_path("path", path)
    if path is None:
        raise TypeError("path must be a path, not None")
    return _zeus.load_power_limit_profile(path)


def save_profile(path: str | Path, measurements: list[PowerLimitMeasurement]) -> None:
    """Writes `measurements` as a profile file that `profile_path` can load."""
    path = check_path("path", path)
    if path is None:
        raise TypeError("path must be a path, not None")
    if not all(isinstance(m, PowerLimitMeasurement) for m in measurements):
        raise TypeError("measurements must be a list of PowerLimitMeasurement")
    _zeus.save_power_limit_profile(path, list(measurements))


def _close_at_exit(reference: "weakref.ref[GlobalPowerLimitOptimizer]") -> None:
    optimizer = reference()
    if optimizer is not None:
        optimizer.close()


class GlobalPowerLimitOptimizer(Callback):
    """Finds the best GPU power limit during training and applies it.

    Args:
        monitor: The `ZeusMonitor` measuring the GPUs to optimise (its `gpu_indices`).
        optimum_selector: How to choose among the profiled limits. Default:
            `ZeusCost(eta_knob=0.5, world_size=<GPUs in the job>)`.
        wait_steps: Steps to run at the maximum limit before profiling starts (>= 0).
        warmup_steps: Steps to run at each limit before measuring it (>= 0).
        profile_steps: Steps measured at each limit (> 0).
        pl_step: Watts between two candidate limits (> 0).
        profile_path: When the file exists, its measurements are used and nothing is profiled;
            otherwise the profile is written there once profiling ends. None: always profile,
            write nothing.

    The maximum power limit is restored when the optimizer is closed (`close()`), garbage
    collected, or the interpreter exits, but only when no other live optimizer manages the same
    GPU and the limit is still the one an optimizer set last: re-running a notebook cell
    (`plo = GlobalPowerLimitOptimizer(...)` again) keeps the new optimizer's limit when the old
    one is collected, and a limit set since with `nvidia-smi -pl` is left alone.
    """

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
        # The counts and the selector are checked once, by the binding (types) and the C++
        # optimizer (values), when _impl is made below; the monitor is needed first.
        profile_path = check_path("profile_path", profile_path)
        _zeus._check_window_monitor(monitor, "monitor")

        gpu_indices = list(monitor.gpu_indices)
        reducer = TorchDistributedReducer() if is_distributed() else None
        world_size = get_world_size()
        if reducer is not None and len(gpu_indices) > 1:
            warnings.warn(
                "GlobalPowerLimitOptimizer under torch.distributed expects one GPU per process "
                f"(e.g. ZeusMonitor(gpu_indices=[local_rank])), but this monitor has {gpu_indices}",
                stacklevel=2,
            )
        if optimum_selector is None:
            optimum_selector = ZeusCost(eta_knob=0.5, world_size=max(1, world_size * len(gpu_indices)))

        self._impl = _zeus._PowerLimitOptimizer(
            monitor,
            optimum_selector,
            wait_steps=wait_steps,
            warmup_steps=warmup_steps,
            profile_steps=profile_steps,
            pl_step=pl_step,
            profile_path=profile_path,
            reducer=reducer,
            restore_on_signal=False,  # Python turns SIGINT into KeyboardInterrupt; atexit restores
        )
        self.monitor = monitor
        self.optimum_selector = optimum_selector
        self.wait_steps = operator.index(wait_steps)
        self.warmup_steps = operator.index(warmup_steps)
        self.profile_steps = operator.index(profile_steps)
        self.pl_step = operator.index(pl_step) * 1000  # mW, as the reference keeps it
        self.profile_path = Path(profile_path) if profile_path is not None else None
        self.reducer = reducer
        atexit.register(_close_at_exit, weakref.ref(self))

    # ---- hooks ----

    def on_step_begin(self) -> None:
        """Before every training step: advances the profiling state machine."""
        self._impl.on_step_begin()

    def on_epoch_end(self) -> None:
        """After every epoch: an interrupted warm-up or measurement is retried next epoch."""
        self._impl.on_epoch_end()

    # ---- state ----

    @property
    def state(self) -> Ready | Warmup | Profiling | Done:
        """The current state. As in the reference, one object per phase: the same object while
        the phase lasts (its ``steps`` counting down in place, so ``plo.state is plo.state``),
        a new one when the optimizer moves to another phase or power limit."""
        native = self._impl.state
        name, power_limit, steps = native
        cached = self.__dict__.get("_state_cache")
        if cached is not None and cached[0][:2] == native[:2]:
            if steps is not None:
                cached[1].steps = steps
            return cached[1]
        if name == "Ready":
            state: Ready | Warmup | Profiling | Done = Ready(next_power_limit=power_limit, steps=steps)
        elif name == "Warmup":
            state = Warmup(current_power_limit=power_limit, steps=steps)
        elif name == "Profiling":
            state = Profiling(current_power_limit=power_limit, steps=steps)
        else:
            state = Done(optimal_power_limit=power_limit)
        self.__dict__["_state_cache"] = (native, state)
        return state

    @property
    def current_power_limit(self) -> int:
        """The limit (mW) the optimizer has set on its GPUs: the maximum before and during the
        wait steps, the limit being profiled, then the optimal one."""
        state = self.state
        if isinstance(state, Ready):
            return self.power_limits[0]
        if isinstance(state, Done):
            return state.optimal_power_limit
        return state.current_power_limit

    @property
    def power_limits(self) -> list[int]:
        """The candidate limits (mW), from the maximum down to the minimum."""
        return list(self._impl.power_limits)

    @property
    def measurements(self) -> list[PowerLimitMeasurement]:
        """One measurement per profiled limit (or those loaded from `profile_path`)."""
        return list(self._impl.measurements)

    @property
    def optimal_power_limit(self) -> int | None:
        """The chosen limit (mW) once profiling is done, else None."""
        return self._impl.optimal_power_limit

    def close(self) -> None:
        """Restores the maximum power limit now (unless another live optimizer manages the GPUs,
        or someone changed the limit since); the hooks may not be called afterwards."""
        impl = getattr(self, "_impl", None)
        if impl is not None and not impl.closed:
            impl.close()

    def __repr__(self) -> str:
        return (
            f"GlobalPowerLimitOptimizer(gpu_indices={list(self.monitor.gpu_indices)}, "
            f"optimum_selector={self.optimum_selector!r}, state={self.state if not self._impl.closed else 'closed'})"
        )


# ---- The Hugging Face Transformers adapter -----------------------------------------------------
#
# Defined here, beside the optimizer it wraps (as the reference's), and re-exported by
# zeus_cpp.integrations.huggingface. `transformers` is looked up when an adapter is created (not
# when this module is imported): without it, creating one raises ImportError.


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
