"""Argument checks shared by the pure-Python wrappers: each error names the parameter."""

from __future__ import annotations

import math
import numbers
import os
from typing import Any


def check_int(name: str, value: Any, *, minimum: int | None = None) -> int:
    """An integer (not a bool), optionally at least `minimum`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return value


def check_float(
    name: str,
    value: Any,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    positive: bool = False,
) -> float:
    """A finite real number (int or float, not a bool) within the given bounds."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value}")
    if positive and value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be at most {maximum}, got {value}")
    return value


def check_str(name: str, value: Any, *, non_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    if non_empty and not value:
        raise ValueError(f"{name} must not be empty")
    return value


def check_path(name: str, value: Any) -> str | None:
    """None, or a str / os.PathLike path (returned as str)."""
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or os.PathLike) or None, not {type(value).__name__}")
    path = os.fspath(value)
    if isinstance(path, bytes):
        raise TypeError(f"{name} must be a str path, not bytes")
    if not path:
        raise ValueError(f"{name} must not be empty")
    return path
