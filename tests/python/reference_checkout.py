"""The reference (ml-energy/zeus) checkout named by ZEUS_REFERENCE_SRC, for the tests that run
its own client code unchanged."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def reference_src(required_file: str, what: str, doc: str) -> Path:
    """The checkout's root. Skips the test (saying how to run it) when ZEUS_REFERENCE_SRC is unset,
    and fails it when the checkout lacks `required_file` (a path relative to its root)."""
    configured = os.environ.get("ZEUS_REFERENCE_SRC")
    if not configured:
        pytest.skip(
            f"{what} needs a checkout of https://github.com/ml-energy/zeus: "
            f"set ZEUS_REFERENCE_SRC=/path/to/zeus (the directory holding {required_file}); "
            f"see {doc}"
        )
    path = Path(configured).resolve()
    if not (path / required_file).is_file():
        pytest.fail(f"ZEUS_REFERENCE_SRC={configured} has no {required_file}")
    return path
