"""Where the Python tests (tests/python, tests/pybind) find the built `zeus` and `zeusd`: one rule
for all of them.

- `zeus`: ZEUS_CLI when set, else the first of build/release, build/asan, build/debug, build/py1
  and build/py2 (the CMake presets and the Python builds) with an executable src/cli/zeus.
- `zeusd`: ZEUSD_BIN when set, else the one built beside that `zeus`
  (<build>/src/cli/zeus -> <build>/src/daemon/zeusd), else the first of the same builds with one.

Each returns None when there is none; the callers skip, saying how to build it. The callers put
this folder on sys.path to import it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILDS = ("release", "asan", "debug", "py1", "py2")


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_zeus_cli() -> Optional[Path]:
    configured = os.environ.get("ZEUS_CLI")
    if configured:
        return Path(configured)
    for build in BUILDS:
        candidate = REPO_ROOT / "build" / build / "src" / "cli" / "zeus"
        if _executable(candidate):
            return candidate
    return None


def find_zeusd() -> Optional[Path]:
    configured = os.environ.get("ZEUSD_BIN")
    if configured:
        return Path(configured)
    cli = find_zeus_cli()
    if cli is not None:
        beside = cli.resolve().parent.parent / "daemon" / "zeusd"
        if _executable(beside):
            return beside
    for build in BUILDS:
        candidate = REPO_ROOT / "build" / build / "src" / "daemon" / "zeusd"
        if _executable(candidate):
            return candidate
    return None
