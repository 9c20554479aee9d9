"""Stand-ins that let the reference Zeus client (ml-energy/zeus) be imported and run unchanged.

Nothing here is Zeus code. The reference client imports `zeus.monitor` and `zeus.device`, which
import third-party packages a test machine may lack, and it reads the GPU model and power limit
through NVML. `install()` puts these in `sys.modules` before the reference is imported:

- `pynvml`: always a fake NVML with one GPU (`bso_scenario.GPU_MODEL`, maximum power limit
  `bso_scenario.GPU_MAX_POWER_MW`), so the job spec the client sends is the same on every machine,
  with or without a real GPU.
- `sklearn` / `sklearn.metrics`: only if missing. `zeus.monitor.power` imports `auc` at import
  time; the client never calls it.

`ScriptedMonitor` replaces `ZeusMonitor` (the client's `monitor` argument): its clock and energy
counter only move when the test says an epoch has run.
"""

from __future__ import annotations

import importlib.util
import sys
import types

import bso_scenario


class FakeNvml(types.ModuleType):
    """The subset of `pynvml` (nvidia-ml-py) that `zeus.device.gpu.nvidia` needs: one GPU."""

    # Error codes, as in nvml.h; `zeus.device.gpu.nvidia` maps them at import time.
    NVML_SUCCESS = 0
    NVML_ERROR_UNINITIALIZED = 1
    NVML_ERROR_INVALID_ARGUMENT = 2
    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_ERROR_NO_PERMISSION = 4
    NVML_ERROR_ALREADY_INITIALIZED = 5
    NVML_ERROR_NOT_FOUND = 6
    NVML_ERROR_INSUFFICIENT_SIZE = 7
    NVML_ERROR_INSUFFICIENT_POWER = 8
    NVML_ERROR_DRIVER_NOT_LOADED = 9
    NVML_ERROR_TIMEOUT = 10
    NVML_ERROR_IRQ_ISSUE = 11
    NVML_ERROR_LIBRARY_NOT_FOUND = 12
    NVML_ERROR_FUNCTION_NOT_FOUND = 13
    NVML_ERROR_CORRUPTED_INFOROM = 14
    NVML_ERROR_GPU_IS_LOST = 15
    NVML_ERROR_RESET_REQUIRED = 16
    NVML_ERROR_OPERATING_SYSTEM = 17
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
    NVML_ERROR_MEMORY = 20
    NVML_ERROR_UNKNOWN = 999

    class NVMLError(Exception):
        def __init__(self, value: int) -> None:
            super().__init__(f"NVML error {value}")
            self.value = value

    def __init__(self) -> None:
        super().__init__("pynvml", "Fake NVML for the BSO wire tests: one simulated GPU.")
        self.device_count = 1

    # Present in the official nvidia-ml-py bindings; zeus refuses other `pynvml` packages.
    def _nvmlGetFunctionPointer(self, name: str):
        raise self.NVMLError(self.NVML_ERROR_FUNCTION_NOT_FOUND)

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return self.device_count

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        if not 0 <= index < self.device_count:
            raise self.NVMLError(self.NVML_ERROR_INVALID_ARGUMENT)
        return index

    def nvmlDeviceGetName(self, handle: int) -> str:
        return bso_scenario.GPU_MODEL

    def nvmlDeviceGetPowerManagementLimitConstraints(self, handle: int) -> list[int]:
        return [bso_scenario.GPU_MIN_POWER_MW, bso_scenario.GPU_MAX_POWER_MW]


def _sklearn_stand_in() -> tuple[types.ModuleType, types.ModuleType]:
    def auc(x, y):
        raise NotImplementedError("stand-in sklearn.metrics.auc: not needed by the BSO client")

    sklearn = types.ModuleType("sklearn", "Stand-in: scikit-learn is not installed.")
    metrics = types.ModuleType("sklearn.metrics")
    metrics.auc = auc
    sklearn.metrics = metrics
    return sklearn, metrics


def install(reference_src: str) -> None:
    """Make `import zeus...` load the reference checkout at `reference_src`, with stand-ins."""
    sys.path.insert(0, reference_src)
    sys.modules["pynvml"] = FakeNvml()
    if importlib.util.find_spec("sklearn") is None:
        sklearn, metrics = _sklearn_stand_in()
        sys.modules["sklearn"] = sklearn
        sys.modules["sklearn.metrics"] = metrics


class ScriptedMonitor:
    """What the client uses of `ZeusMonitor`, on a simulated clock and energy counter.

    `measurement_type` is the reference's `zeus.monitor.Measurement`, so the client's
    `measurement.total_energy` is computed by reference code.
    """

    def __init__(self, measurement_type: type, gpu_indices: list[int]) -> None:
        self.gpu_indices = list(gpu_indices)
        self._measurement_type = measurement_type
        self._now = 0.0
        self._energy = {index: 0.0 for index in self.gpu_indices}
        self._windows: dict[str, tuple[float, dict[int, float]]] = {}

    def run_epoch(self, seconds: float, watts_per_gpu: float) -> None:
        self._now += seconds
        for index in self._energy:
            self._energy[index] += watts_per_gpu * seconds

    def begin_window(self, key: str, sync_execution: bool = True) -> None:
        if key in self._windows:
            raise ValueError(f"Measurement window '{key}' already exists")
        self._windows[key] = (self._now, dict(self._energy))

    def end_window(self, key: str, sync_execution: bool = True, cancel: bool = False):
        started, energy_at_start = self._windows.pop(key)
        return self._measurement_type(
            time=self._now - started,
            gpu_energy={index: now - energy_at_start[index] for index, now in self._energy.items()},
        )
