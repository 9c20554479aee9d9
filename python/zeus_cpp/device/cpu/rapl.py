"""Intel/AMD RAPL CPU packages at the reference's path ``zeus.device.cpu.rapl``.

RAPL is read from C++; this module only offers the reference's availability probe.
"""

from __future__ import annotations

import os

# Where the kernel's powercap driver lists the RAPL zones.
RAPL_DIR = "/sys/class/powercap/intel-rapl"


def rapl_is_available() -> bool:
    """Whether the kernel exposes RAPL (its powercap folder exists; reading it may still need
    privileges)."""
    return os.path.exists(RAPL_DIR)


__all__ = ["rapl_is_available", "RAPL_DIR"]
