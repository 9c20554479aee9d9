"""The native log through Python's :mod:`logging` (docs/python.md, "Logging").

Every line the C++ core logs becomes a record of the logger named after its module
(``zeus_cpp.device``, ``zeus_cpp.monitor``, ``zeus_cpp.optimizer.power_limit``,
``zeus_cpp.optimizer.batch_size``, ``zeus_cpp.metric``, ...; ``zeus_cpp`` for the rest), so the
user's handlers, filters and levels apply. The native loggers follow the Python loggers'
effective levels (kept in step whenever a level is set with ``Logger.setLevel``,
``logging.config`` or ``logging.disable``), so a level that is off costs the native side nothing.
``ZEUS_LOG_LEVEL`` (trace, debug, info, warn, error, critical, off) sets the level of the
``zeus_cpp`` logger when the program has not set one.

With no handler configured anywhere (no ``logging.basicConfig``, no handler on ``zeus_cpp`` or the
root), a line is written to stderr as the CLI writes it: ``[zeus W] ...``.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
from typing import Dict, List

from zeus_cpp import _zeus

# Native (spdlog) levels, in order: trace, debug, info, warn, error, critical, off.
_TRACE = 5
_TO_PYTHON = (_TRACE, logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL)
_LETTERS = ("T", "D", "I", "W", "E", "C")
_FROM_NAME: Dict[str, int] = {
    "trace": _TRACE, "debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
    "warning": logging.WARNING, "err": logging.ERROR, "error": logging.ERROR,
    "critical": logging.CRITICAL, "off": logging.CRITICAL + 1,
}

_modules: List[str] = list(_zeus._log_modules())


def _native_level(python_level: int) -> int:
    """The lowest native level whose lines a Python logger at ``python_level`` lets through."""
    for native, level in enumerate(_TO_PYTHON):
        if level >= python_level:
            return native
    return len(_TO_PYTHON)  # off


def sync_levels() -> None:
    """Sets each native logger's level from its Python logger's effective level (and
    ``logging.disable``). Called by itself whenever a level is set through logging's API."""
    disabled = logging.root.manager.disable
    for name in _modules:
        logger = logging.getLogger(name)
        level = max(logger.getEffectiveLevel(), disabled + 1 if disabled else 0)
        _zeus._log_set_level(name, _native_level(level))


def _emit(name: str, level: int, text: str, native_thread: int) -> None:
    logger = logging.getLogger(name)
    python_level = _TO_PYTHON[min(level, len(_TO_PYTHON) - 1)]
    if not logger.isEnabledFor(python_level):
        return
    if not logger.hasHandlers():
        # Nothing configured: the line as before (and as the CLI writes it), not logging's bare
        # last-resort output.
        if sys.stderr is not None:
            sys.stderr.write(f"[zeus {_LETTERS[min(level, 5)]}] {text}\n")
        return
    record = logger.makeRecord(name, python_level, "zeus_cpp._zeus", 0, text, None, None)
    if native_thread:
        record.thread = native_thread
        record.threadName = f"zeus-native-{native_thread:x}"
    logger.handle(record)


def _hook_level_changes() -> None:
    # Logger.setLevel, logging.disable and logging.config all end in Manager._clear_cache (CPython
    # 3.7 and later); the native levels follow from there.
    manager = logging.Logger.manager
    original = getattr(manager, "_clear_cache", None)
    if original is None or getattr(original, "_zeus_cpp_sync", False):
        return

    def _clear_cache() -> None:
        original()
        sync_levels()

    _clear_cache._zeus_cpp_sync = True  # type: ignore[attr-defined]
    manager._clear_cache = _clear_cache


def install() -> None:
    configured = os.environ.get("ZEUS_LOG_LEVEL", "").strip().lower()
    package = logging.getLogger("zeus_cpp")
    if configured in _FROM_NAME and package.level == logging.NOTSET:
        package.setLevel(_FROM_NAME[configured])
    _hook_level_changes()
    sync_levels()
    _zeus._log_attach(_emit)
    atexit.register(_zeus._log_detach)


def flush(timeout_s: float = 5.0) -> bool:
    """Waits until the lines logged by native threads have reached their handlers; says whether
    they all did within ``timeout_s``."""
    return bool(_zeus._log_flush(timeout_s))
