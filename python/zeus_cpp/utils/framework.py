"""Framework helpers: which frameworks are importable, and torch.distributed collectives.

The power-limit optimizer combines per-process measurements with `all_reduce` (energy summed,
time maximised over the ranks) when `torch.distributed` is initialised, and the batch-size
optimizer client broadcasts the batch size from rank 0 with `broadcast_ints`. Without an
initialised process group every helper works on the local values unchanged.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import Literal, Sequence

from zeus_cpp import _zeus
from zeus_cpp.utils._sync import resolve_sync_hook

__all__ = [
    "torch_is_available",
    "jax_is_available",
    "cupy_is_available",
    "is_distributed",
    "get_rank",
    "get_world_size",
    "all_reduce",
    "broadcast_ints",
    "sync_execution",
    "TorchDistributedReducer",
]


def _has_cuda(name: str) -> bool:
    """Whether the imported framework `name` sees a CUDA GPU (False when asking fails)."""
    try:
        if name == "torch":
            import torch

            return bool(torch.cuda.is_available())
        if name == "jax":
            import jax

            return any(device.platform == "gpu" for device in jax.devices())
        import cupy

        return bool(cupy.cuda.is_available())
    except Exception:  # noqa: BLE001  (a broken CUDA setup means "no CUDA", not a crash)
        return False


def _probe(name: str, label: str, ensure_available: bool, ensure_cuda: bool) -> bool:
    # find_spec first: a framework that is not installed costs no import attempt.
    try:
        if importlib.util.find_spec(name) is None:
            raise ImportError(f"No module named {name!r}")
        importlib.import_module(name)
    except ImportError as error:
        if ensure_available:
            raise RuntimeError(f"Failed to import {label}") from error
        return False
    if ensure_cuda and not _has_cuda(name):
        if ensure_available:
            raise RuntimeError(f"{label} is available but does not have CUDA support.")
        return False
    return True


# The reference's keywords and defaults: ensure_available=True raises RuntimeError instead of
# returning False; ensure_cuda=True (the default) also asks for a CUDA GPU. Unlike the
# reference, a framework without CUDA under ensure_cuda=True returns False rather than raising
# unless ensure_available is set. Cached per argument pair.
@functools.lru_cache(maxsize=None)
def torch_is_available(ensure_available: bool = False, ensure_cuda: bool = True) -> bool:
    """Whether PyTorch can be imported (and, with `ensure_cuda`, sees a CUDA GPU)."""
    return _probe("torch", "PyTorch", ensure_available, ensure_cuda)


@functools.lru_cache(maxsize=None)
def jax_is_available(ensure_available: bool = False, ensure_cuda: bool = True) -> bool:
    """Whether JAX can be imported (and, with `ensure_cuda`, sees a CUDA GPU)."""
    return _probe("jax", "JAX", ensure_available, ensure_cuda)


@functools.lru_cache(maxsize=None)
def cupy_is_available(ensure_available: bool = False, ensure_cuda: bool = True) -> bool:
    """Whether CuPy can be imported (and, with `ensure_cuda`, sees a CUDA GPU)."""
    return _probe("cupy", "CuPy", ensure_available, ensure_cuda)


def is_distributed() -> bool:
    """Whether a torch.distributed process group is initialised."""
    if not torch_is_available(ensure_cuda=False):
        return False
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def get_rank() -> int:
    """This process's rank (0 when not distributed)."""
    if not is_distributed():
        return 0
    import torch.distributed as dist

    return dist.get_rank()


def get_world_size() -> int:
    """How many processes take part (1 when not distributed)."""
    if not is_distributed():
        return 1
    import torch.distributed as dist

    return dist.get_world_size()


def _collective_device():
    import torch
    import torch.distributed as dist

    # NCCL reduces only CUDA tensors; gloo (and MPI) work on CPU tensors.
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_reduce(object: Sequence[float], operation: Literal["sum", "max"]) -> list[float]:  # noqa: A002
    """Element-wise sum or maximum of the values in `object` over all ranks (the values
    unchanged when not distributed). Every rank must call it with as many values."""
    if operation not in ("sum", "max"):
        raise ValueError(f"operation must be 'sum' or 'max', got {operation!r}")
    values = [float(value) for value in object]
    if not is_distributed():
        return values
    import torch
    import torch.distributed as dist

    tensor = torch.tensor(values, dtype=torch.float64, device=_collective_device())
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM if operation == "sum" else dist.ReduceOp.MAX)
    return [float(value) for value in tensor.cpu().tolist()]


def broadcast_ints(values: Sequence[int], src: int = 0) -> list[int]:
    """Rank `src`'s `values` on every rank (each rank passes as many; the others' are ignored).
    Unchanged when not distributed."""
    values = [int(value) for value in values]
    if not is_distributed():
        return values
    import torch
    import torch.distributed as dist

    tensor = torch.tensor(values, dtype=torch.int64, device=_collective_device())
    dist.broadcast(tensor, src=src)
    return [int(value) for value in tensor.cpu().tolist()]


def sync_execution(gpu_devices: Sequence[int], sync_with: Literal["torch", "jax", "cupy"] = "torch") -> None:
    """Waits for the GPUs' queued work, as ZeusMonitor's windows do (one implementation:
    zeus_cpp.utils._sync). A framework without a GPU has nothing to wait for; one that is not
    installed raises the reference's ``RuntimeError("No framework is available. ...")``."""
    if sync_with not in ("torch", "jax", "cupy"):
        raise ValueError(f"sync_with must be 'torch', 'jax' or 'cupy', got {sync_with!r}")
    hook = resolve_sync_hook(sync_with)
    if hook is not None:
        hook(list(gpu_devices))


class TorchDistributedReducer(_zeus.Reducer):
    """A `Reducer` over torch.distributed: sums and maxima over every rank of the default
    process group (one all_reduce per call; every rank must make the same calls)."""

    def __init__(self) -> None:
        super().__init__()
        if not is_distributed():
            raise RuntimeError("TorchDistributedReducer needs an initialised torch.distributed "
                               "process group (torch.distributed.init_process_group)")

    def sum(self, value: float) -> float:
        return all_reduce([value], "sum")[0]

    def max(self, value: float) -> float:
        return all_reduce([value], "max")[0]

    def world_size(self) -> int:
        return get_world_size()
