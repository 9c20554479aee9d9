"""Optimizers: the just-in-time power-limit optimizer and the batch-size-optimizer client."""

from zeus_cpp.optimizer.power_limit import GlobalPowerLimitOptimizer, HFGlobalPowerLimitOptimizer

__all__ = ["GlobalPowerLimitOptimizer", "HFGlobalPowerLimitOptimizer"]
