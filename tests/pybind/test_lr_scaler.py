"""zeus_cpp.utils.lr_scaler: the learning rate for another batch size, and bad input."""

from __future__ import annotations

import math

import pytest

from zeus_cpp.utils.lr_scaler import LinearScaler, SquareRootScaler


def test_square_root_and_linear_rules():
    assert SquareRootScaler(bs=64, lr=0.01).compute_lr(256) == pytest.approx(0.02)
    assert SquareRootScaler(bs=64, lr=0.01).compute_lr(64) == pytest.approx(0.01)
    assert SquareRootScaler(bs=100, lr=1.0).compute_lr(50) == pytest.approx(math.sqrt(0.5))
    assert LinearScaler(bs=64, lr=0.1).compute_lr(32) == pytest.approx(0.05)
    assert LinearScaler(bs=64, lr=0.1).compute_lr(640) == pytest.approx(1.0)


@pytest.mark.parametrize("scaler", [SquareRootScaler, LinearScaler])
def test_bad_values_name_the_parameter(scaler):
    with pytest.raises(ValueError, match="bs"):
        scaler(bs=0, lr=0.1)
    with pytest.raises(ValueError, match="lr"):
        scaler(bs=8, lr=-1.0)
    with pytest.raises(TypeError, match="bs"):
        scaler(bs="8", lr=0.1)
    with pytest.raises(ValueError, match="new_bs"):
        scaler(bs=8, lr=0.1).compute_lr(0)
