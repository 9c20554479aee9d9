"""Resolving ``sync_execution_with``: re-exported from zeus_cpp.utils._sync (its home, in the
lower layer that zeus_cpp.utils.framework also uses), so that this older path keeps working."""

from __future__ import annotations

from zeus_cpp.utils._sync import (  # noqa: F401
    FRAMEWORKS,
    NO_FRAMEWORK_MESSAGE,
    SyncHook,
    SyncWith,
    cupy_hook,
    jax_hook,
    missing_framework_hook,
    resolve_sync_hook,
    torch_hook,
)
