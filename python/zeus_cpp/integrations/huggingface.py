"""Hugging Face Transformers adapter: the power-limit optimizer as a `TrainerCallback`.

    from transformers import Trainer
    from zeus_cpp.monitor import ZeusMonitor
    from zeus_cpp.optimizer.power_limit import HFGlobalPowerLimitOptimizer

    monitor = ZeusMonitor(gpu_indices=[0])
    trainer = Trainer(..., callbacks=[HFGlobalPowerLimitOptimizer(monitor)])

`transformers` is looked up when the adapter is created (not when this module is imported), so
the adapter works whenever `transformers` is importable then; without it, creating one raises
ImportError.

The adapter lives in `zeus_cpp.optimizer.power_limit` (as the reference's), beside the optimizer it
wraps; this module re-exports it, so imports go one way (integrations -> optimizer).
"""

from __future__ import annotations

from zeus_cpp.optimizer.power_limit import HFGlobalPowerLimitOptimizer

__all__ = ["HFGlobalPowerLimitOptimizer"]
