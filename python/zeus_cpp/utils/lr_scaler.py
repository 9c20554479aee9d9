"""Learning-rate scaling rules for a batch size other than the one the rate was tuned for."""

from __future__ import annotations

import math
from dataclasses import dataclass

from zeus_cpp.utils._checks import check_float

__all__ = ["LinearScaler", "SquareRootScaler"]


@dataclass
class _Scaler:
    """A learning rate `lr` tuned for batch size `bs`, rescaled by `compute_lr`.

    As in the reference, batch sizes may be floats (e.g. a per-GPU share) and `lr` may be 0 (a
    frozen parameter group stays frozen); batch sizes must be positive and `lr` not negative.
    """

    bs: int
    lr: float

    def __post_init__(self) -> None:
        check_float("bs", self.bs, positive=True)
        check_float("lr", self.lr, minimum=0.0)

    def compute_lr(self, new_bs: int) -> float:
        """The learning rate for batch size `new_bs`."""
        check_float("new_bs", new_bs, positive=True)
        return self.lr * self._factor(new_bs / self.bs)

    def _factor(self, ratio: float) -> float:
        raise NotImplementedError


@dataclass
class SquareRootScaler(_Scaler):
    """`lr * sqrt(new_bs / bs)`, for adaptive optimizers such as Adam.

    Args:
        bs: The batch size `lr` was tuned for.
        lr: The learning rate at `bs`.
    """

    def _factor(self, ratio: float) -> float:
        return math.sqrt(ratio)


@dataclass
class LinearScaler(_Scaler):
    """`lr * new_bs / bs`, for SGD.

    Args:
        bs: The batch size `lr` was tuned for.
        lr: The learning rate at `bs`.
    """

    def _factor(self, ratio: float) -> float:
        return ratio
