"""Metrics: the Zeus cost."""

from __future__ import annotations

from zeus_cpp import _zeus
from zeus_cpp.utils._checks import check_float

__all__ = ["zeus_cost"]


def zeus_cost(energy: float, time: float, eta_knob: float, max_power: int | float) -> float:
    """The Zeus cost: `eta_knob * energy + (1 - eta_knob) * max_power * time`.

    Args:
        energy: Joules.
        time: Seconds.
        eta_knob: Weight of energy against time, in [0, 1].
        max_power: The maximum power limit of one GPU (W) times the number of GPUs.

    Raises:
        ValueError: `eta_knob` is outside [0, 1].
    """
    energy = check_float("energy", energy)
    time = check_float("time", time)
    eta_knob = check_float("eta_knob", eta_knob)
    max_power = check_float("max_power", max_power)
    if not 0.0 <= eta_knob <= 1.0:
        raise ValueError(f"eta_knob must be between 0 and 1, got {eta_knob}")
    return _zeus.zeus_cost(energy, time, eta_knob, max_power)
