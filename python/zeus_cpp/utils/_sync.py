"""Resolving ``sync_execution_with`` into a hook the native monitor calls before reading devices.

The hook is called with the list of monitored GPU indices. ``None`` means no hook at all, so
that windows on a machine without a GPU framework pay nothing for synchronisation.

Used by zeus_cpp.monitor (ZeusMonitor's ``sync_execution_with``) and by
zeus_cpp.utils.framework.sync_execution: it lives in utils, the lower layer, so that imports go
one way (monitor -> utils). zeus_cpp.monitor._sync re-exports it.
"""

from __future__ import annotations

import importlib
import sys
from typing import Callable, List, Optional, Union

SyncHook = Callable[[List[int]], object]
SyncWith = Union[str, Callable[..., object]]

FRAMEWORKS = ("torch", "jax", "cupy")


class _ImportFailed:
    """Why ``framework`` could not be imported (an ImportError: not installed; anything else: a
    broken or half-imported install)."""

    def __init__(self, error: Exception) -> None:
        self.error = error


def _import(name: str):  # noqa: ANN202
    # Only Exception is caught: a KeyboardInterrupt (Ctrl-C during a slow import) or SystemExit
    # propagates and nothing is remembered, so the next attempt imports again.
    try:
        return importlib.import_module(name)
    except Exception as error:  # noqa: BLE001  (reported by missing_framework_hook)
        return _ImportFailed(error)


# The reference's message (same class), raised at each synchronising window call.
NO_FRAMEWORK_MESSAGE = "No framework is available."


def missing_framework_hook(framework: str, error: Optional[Exception] = None) -> SyncHook:
    """A hook that raises the reference's RuntimeError: ``framework`` cannot be imported.

    Like the reference, the monitor still constructs; a window call that synchronises GPUs
    fails (``sync_execution=False``, or no monitored GPU, never calls it). ``error`` (what the
    import raised) is named in the message and chained: a framework that is installed but fails
    to import is told apart from one that is missing.
    """
    if error is None or (isinstance(error, ModuleNotFoundError) and error.name == framework):
        why = f"{framework} is not installed"
    else:
        why = (
            f"importing {framework} failed with {type(error).__name__}: {error} (an import "
            f"interrupted earlier in this interpreter can leave it half-imported: restart it)"
        )

    def hook(gpu_indices: List[int]) -> None:
        raise RuntimeError(
            f"{NO_FRAMEWORK_MESSAGE} (sync_execution_with={framework!r}, but {why}: install or "
            f"repair it, pass the framework the script uses or a callable, or call the window "
            f"with sync_execution=False)"
        ) from error

    return hook


def torch_hook() -> Optional[SyncHook]:
    """torch.cuda.synchronize on each GPU; None when torch has no CUDA; raising without torch."""
    torch = _import("torch")
    if isinstance(torch, _ImportFailed):
        return missing_framework_hook("torch", torch.error)
    if not torch.cuda.is_available():
        return None
    synchronize = torch.cuda.synchronize

    def hook(gpu_indices: List[int]) -> None:
        for index in gpu_indices:
            synchronize(index)

    return hook


def jax_hook() -> Optional[SyncHook]:
    """Waits for a computation on each JAX GPU; None when JAX has no GPU; raising without JAX."""
    jax = _import("jax")
    if isinstance(jax, _ImportFailed):
        return missing_framework_hook("jax", jax.error)
    try:
        devices = jax.devices("gpu")
    except RuntimeError:
        return None
    if not devices:
        return None

    def hook(gpu_indices: List[int]) -> None:
        for index in gpu_indices:
            (jax.device_put(0.0, device=devices[index]) + 0).block_until_ready()

    return hook


def cupy_hook() -> Optional[SyncHook]:
    """cupy.cuda.Device(i).synchronize() on each GPU; None when CuPy has no GPU; raising without
    CuPy."""
    cupy = _import("cupy")
    if isinstance(cupy, _ImportFailed):
        return missing_framework_hook("cupy", cupy.error)
    try:
        if not cupy.cuda.is_available():
            return None
    except Exception:  # noqa: BLE001
        return None
    device = cupy.cuda.Device

    def hook(gpu_indices: List[int]) -> None:
        for index in gpu_indices:
            device(index).synchronize()

    return hook


def resolve_sync_hook(sync_execution_with: SyncWith) -> Optional[SyncHook]:
    """The hook for ``sync_execution_with`` ("torch", "jax", "cupy" or a callable).

    A framework that is installed but has no GPU gives no hook (nothing to wait for); one that
    is not installed gives a hook raising the reference's ``RuntimeError("No framework is
    available.")`` when a window synchronises GPUs. A callable is used as is
    (called with the list of monitored GPU indices). Anything else raises ValueError.
    """
    if isinstance(sync_execution_with, str):
        if sync_execution_with == "torch":
            return torch_hook()
        if sync_execution_with == "jax":
            return jax_hook()
        if sync_execution_with == "cupy":
            return cupy_hook()
    elif callable(sync_execution_with):
        return sync_execution_with
    raise ValueError(
        "sync_execution_with must be 'torch', 'jax', 'cupy' or a callable taking the list of "
        f"GPU indices, not {sync_execution_with!r}"
    )


_RESOLVERS = {"torch": torch_hook, "jax": jax_hook, "cupy": cupy_hook}


class LazySyncHook:
    """A framework's hook resolved at its first call, not when the monitor is built.

    Importing torch takes a second or two, which a monitor that never synchronises (the CLI,
    ``sync_execution=False`` windows, no monitored GPU) should not pay. The first call imports
    the framework and keeps what :func:`resolve_sync_hook` would have given: the framework's
    hook, nothing to do (no GPU), or the reference's "No framework is available." error. An
    import interrupted by Ctrl-C (KeyboardInterrupt) propagates and is not remembered: the next
    call imports again.
    """

    __slots__ = ("framework", "_hook", "_resolved")

    def __init__(self, framework: str) -> None:
        self.framework = framework
        self._hook: Optional[SyncHook] = None
        self._resolved = False

    def __call__(self, gpu_indices: List[int]) -> None:
        if not self._resolved:
            self._hook = _RESOLVERS[self.framework]()
            self._resolved = True
        if self._hook is not None:
            self._hook(gpu_indices)

    def __repr__(self) -> str:
        state = "resolved" if self._resolved else "not imported yet"
        return f"LazySyncHook({self.framework!r}, {state})"


def lazy_sync_hook(sync_execution_with: SyncWith) -> Optional[SyncHook]:
    """:func:`resolve_sync_hook`, deferring a framework's import to the first synchronisation.

    A framework that is already imported is resolved now (no cost left to defer, and a framework
    without a GPU then costs the windows nothing); otherwise a :class:`LazySyncHook`. Checks the
    value (ValueError) as resolve_sync_hook does.
    """
    if isinstance(sync_execution_with, str) and sync_execution_with in _RESOLVERS:
        if sync_execution_with in sys.modules:
            return resolve_sync_hook(sync_execution_with)
        return LazySyncHook(sync_execution_with)
    return resolve_sync_hook(sync_execution_with)
