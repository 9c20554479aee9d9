"""The ``zeus`` console script of the wheel: runs the ``zeus`` CLI shipped in the package.

The wheel carries the C++ binary as ``zeus_cpp/_bin/zeus`` (its shared libraries under
``zeus_cpp.libs/``, found through its ``$ORIGIN``-relative search path, so it must stay inside the
package rather than be copied to ``bin/``). This entry point replaces the Python process with it
(``os.execv``, not a child process), so that the command keeps the process id, gets every signal
itself (Ctrl-C, SIGTERM from a job scheduler), and its exit status is the command's own.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import List, NoReturn, Optional


def binary_path() -> Path:
    """Where the wheel puts the CLI."""
    return Path(__file__).resolve().parent / "_bin" / "zeus"


def main(argv: Optional[List[str]] = None) -> NoReturn:
    arguments = sys.argv[1:] if argv is None else list(argv)
    binary = binary_path()
    if not binary.is_file():
        sys.stderr.write(
            f"zeus: the zeus command-line tool is not installed with this zeus_cpp ({binary} is "
            "missing). The wheel built by scripts/wheel.sh ships it; reinstall that wheel "
            "(pip install --force-reinstall zeus_cpp-*.whl), or build the CLI from source "
            "(cmake --build --preset release --target zeus) and run build/release/src/cli/zeus.\n")
        sys.exit(127)
    if not os.access(binary, os.X_OK):
        sys.stderr.write(f"zeus: {binary} is not executable; reinstall the zeus_cpp wheel.\n")
        sys.exit(126)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(binary, [sys.argv[0] if sys.argv and sys.argv[0] else "zeus", *arguments])
    except OSError as error:
        sys.stderr.write(f"zeus: cannot run {binary}: {error}\n")
        sys.exit(126)


if __name__ == "__main__":
    main()
