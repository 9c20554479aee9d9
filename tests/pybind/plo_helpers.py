"""Helpers of the power-limit optimizer tests: a scripted monitor (a Python WindowMonitor whose
windows return chosen energies and times) and the GPU range of simulated GPU 0."""

from __future__ import annotations

import os

# Simulated GPUs unless the session chose its own (read when zeus_cpp first discovers GPUs).
os.environ.setdefault("ZEUS_SIMULATED_GPUS", "2:v100")

from zeus_cpp import _zeus  # noqa: E402
from zeus_cpp.monitor import Measurement  # noqa: E402

WINDOW_PREFIX = "__GlobalPowerLimitOptimizer_"


class ScriptedMonitor(_zeus.WindowMonitor):
    """Measures nothing: the power-limit optimizer's window at W watts returns `profile(W)`
    = (time, energy of each GPU). Records every call."""

    def __init__(self, profile, gpu_indices=(0,)) -> None:
        super().__init__()
        self.profile = profile
        self.gpu_indices = list(gpu_indices)
        self.calls: list[tuple] = []
        self.open: set[str] = set()

    def begin_window(self, key, sync_execution=True, restart=False):
        self.calls.append(("begin", key))
        assert restart or key not in self.open, key
        self.open.add(key)

    def end_window(self, key, sync_execution=True, cancel=False):
        self.calls.append(("cancel" if cancel else "end", key))
        self.open.remove(key)
        if cancel or not key.startswith(WINDOW_PREFIX):
            return Measurement(time=0.0, gpu_energy={i: 0.0 for i in self.gpu_indices})
        time, energy = self.profile(int(key[len(WINDOW_PREFIX):]))
        return Measurement(time=time, gpu_energy={i: energy for i in self.gpu_indices})


def power_limit_range_w(index: int = 0) -> tuple[int, int]:
    """(min, max) power limit of GPU `index` in W."""
    from zeus_cpp.device import get_gpus

    low, high = get_gpus().get_power_management_limit_constraints(index)
    return low // 1000, high // 1000


def current_power_limit_w(index: int = 0) -> int:
    from zeus_cpp.device import get_gpus

    return get_gpus().get_power_management_limit(index) // 1000
