"""The CPython interpreters that wheels are built and tested for (docs/python.md, "Python
versions"): 3.10 to 3.13, each found as Debian's ``/usr/bin/python3.X`` or a pyenv install
(``$PYENV_ROOT/versions/3.X.*/bin/python3.X``, default root ``~/.pyenv``), and usable only with
its headers (``Python.h``), which building the extension needs.

``python3 zeus_pythons.py`` prints one line per version, ``<version> <interpreter>``, or
``<version> -`` and why on stderr when this machine has none (scripts/wheel.sh reads it).
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from pathlib import Path
from typing import List, Optional, Tuple

VERSIONS = ("3.10", "3.11", "3.12", "3.13")

_HAS_HEADERS = ("import os, sys, sysconfig; "
                "sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], "
                "'Python.h')))")


def candidates(version: str) -> List[str]:
    root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    pyenv = sorted(glob.glob(f"{root}/versions/{version}.*/bin/python{version}"), reverse=True)
    return [f"/usr/bin/python{version}", *pyenv]


def find(version: str) -> Tuple[Optional[str], str]:
    """(interpreter, "") or (None, why not)."""
    tried = []
    for candidate in candidates(version):
        if not os.access(candidate, os.X_OK):
            continue
        try:
            usable = subprocess.run([candidate, "-c", _HAS_HEADERS], capture_output=True,
                                    timeout=60).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            usable = False
        if usable:
            return candidate, ""
        tried.append(f"{candidate} (no Python.h: install its -dev package)")
    if tried:
        return None, f"no CPython {version} with headers: " + ", ".join(tried)
    return None, (f"no CPython {version} found (looked for /usr/bin/python{version} and "
                  f"pyenv's versions/{version}.*): its wheel is not built or tested")


def main() -> int:
    for version in VERSIONS:
        interpreter, why = find(version)
        print(version, interpreter or "-")
        if interpreter is None:
            print(f"zeus_pythons: {why}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
