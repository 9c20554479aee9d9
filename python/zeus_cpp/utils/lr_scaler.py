"""Learning-rate scaling rules for a batch size other than the one the rate was tuned for."""

from __future__ import annotations

import math
from dataclasses import dataclass

from zeus_cpp.utils._checks import check_float, check_int

__all__ = ["LinearScaler", "SquareRootScaler"]


@dataclass
class SquareRootScaler:
    """`lr * sqrt(new_bs / bs)`, for adaptive optimizers such as Adam.

    Args:
        bs: The batch size `lr` was tuned for.
        lr: The learning rate at `bs`.
    """

    bs: int
    lr: float

    def __post_init__(self) -> None:
        self.bs = check_int("bs", self.bs, minimum=1)
        self.lr = check_float("lr", self.lr, positive=True)

    def compute_lr(self, new_bs: int) -> float:
        """The learning rate for batch size `new_bs`."""
        new_bs = check_int("new_bs", new_bs, minimum=1)
        return self.lr * math.sqrt(new_bs / self.bs)


@dataclass
class LinearScaler:
    """`lr * new_bs / bs`, for SGD.

    Args:
        bs: The batch size `lr` was tuned for.
        lr: The learning rate at `bs`.
    """

    bs: int
    lr: float

    def __post_init__(self) -> None:
        self.bs = check_int("bs", self.bs, minimum=1)
        self.lr = check_float("lr", self.lr, positive=True)

    def compute_lr(self, new_bs: int) -> float:
        """The learning rate for batch size `new_bs`."""
        new_bs = check_int("new_bs", new_bs, minimum=1)
        return self.lr * new_bs / self.bs
