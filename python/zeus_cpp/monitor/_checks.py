"""Argument checks shared by the monitors: a wrong type raises TypeError naming the parameter."""

from __future__ import annotations

import os
from typing import List, Optional, Sequence


def type_name(value: object) -> str:
    return type(value).__name__


def index_list(name: str, value: Optional[Sequence[int]]) -> Optional[List[int]]:
    """None, or a list of int from any sequence of int (bool and str are refused)."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(f"{name} must be a list of int or None, not {type_name(value)}")
    result = []
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int):
            if hasattr(item, "__index__") and not isinstance(item, bool):
                item = item.__index__()  # numpy integers
            else:
                raise TypeError(f"{name} must be a list of int, but holds {item!r}")
        if item < 0:
            raise ValueError(f"{name} must hold non-negative indices, but holds {item}")
        result.append(int(item))
    return result


def boolean(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, not {type_name(value)}")
    return value


def optional_path(name: str, value: object) -> Optional[str]:
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a str, a path or None, not {type_name(value)}")
    return os.fspath(value)  # type: ignore[arg-type]


def optional_number(name: str, value: object) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number or None, not {type_name(value)}")
    return float(value)
