"""Resolving ``sync_execution_with`` into a hook the native monitor calls before reading devices.

The hook is called with the list of monitored GPU indices. ``None`` means no hook at all, so
that windows on a machine without a GPU framework pay nothing for synchronisation.

Used by zeus_cpp.monitor (ZeusMonitor's ``sync_execution_with``) and by
zeus_cpp.utils.framework.sync_execution: it lives in utils, the lower layer, so that imports go
one way (monitor -> utils). zeus_cpp.monitor._sync re-exports it.
"""

from __future__ import annotations

import importlib
from typing import Callable, List, Optional, Union

SyncHook = Callable[[List[int]], object]
SyncWith = Union[str, Callable[..., object]]

FRAMEWORKS = ("torch", "jax", "cupy")


def _import(name: str):  # noqa: ANN202
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001  (a broken install counts as unavailable)
        return None


# The reference's message (same class), raised at each synchronising window call.
NO_FRAMEWORK_MESSAGE = "No framework is available."


def missing_framework_hook(framework: str) -> SyncHook:
    """A hook that raises the reference's RuntimeError: ``framework`` is not installed.

    Like the reference, the monitor still constructs; a window call that synchronises GPUs
    fails (``sync_execution=False``, or no monitored GPU, never calls it).
    """

    def hook(gpu_indices: List[int]) -> None:
        raise RuntimeError(
            f"{NO_FRAMEWORK_MESSAGE} (sync_execution_with={framework!r}, but {framework} cannot "
            f"be imported: install it, pass the framework the script uses or a callable, or "
            f"call the window with sync_execution=False)"
        )

    return hook


def torch_hook() -> Optional[SyncHook]:
    """torch.cuda.synchronize on each GPU; None when torch has no CUDA; raising without torch."""
    torch = _import("torch")
    if torch is None:
        return missing_framework_hook("torch")
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
    if jax is None:
        return missing_framework_hook("jax")
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
    if cupy is None:
        return missing_framework_hook("cupy")
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
