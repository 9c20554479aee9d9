"""ZeusMonitor and Measurement through the bindings, on simulated GPUs."""

from __future__ import annotations

import csv
import inspect
import pickle
import time
from pathlib import Path
from typing import List

import pytest

from zeus_cpp import _zeus
from zeus_cpp.exception import ZeusGPUInvalidArgError
from zeus_cpp.monitor import Measurement, ZeusMonitor
from zeus_cpp.monitor._sync import resolve_sync_hook


@pytest.fixture
def monitor() -> ZeusMonitor:
    return ZeusMonitor(cpu_indices=[], sync_execution_with=lambda indices: None)


def test_window_measures_energy_over_a_sleep(monitor: ZeusMonitor) -> None:
    monitor.begin_window("sleep")
    time.sleep(0.1)
    measurement = monitor.end_window("sleep")
    assert isinstance(measurement, Measurement)
    assert 0.09 < measurement.time < 1.0
    assert sorted(measurement.gpu_energy) == monitor.gpu_indices
    for energy in measurement.gpu_energy.values():
        assert energy > 0.0
    assert measurement.total_energy == pytest.approx(sum(measurement.gpu_energy.values()))
    assert measurement.cpu_energy is None
    assert measurement.dram_energy is None
    assert measurement.soc_energy is None


def test_gpu_subset_and_order() -> None:
    monitor = ZeusMonitor(gpu_indices=[1], cpu_indices=[], sync_execution_with=lambda i: None)
    assert monitor.gpu_indices == [1]
    monitor.begin_window("w")
    assert list(monitor.end_window("w").gpu_energy) == [1]


def test_no_gpu() -> None:
    monitor = ZeusMonitor(gpu_indices=[], cpu_indices=[])
    monitor.begin_window("w")
    measurement = monitor.end_window("w")
    assert measurement.gpu_energy == {}
    assert measurement.total_energy == 0.0


def test_nested_and_overlapping_windows(monitor: ZeusMonitor) -> None:
    monitor.begin_window("outer")
    monitor.begin_window("a")
    monitor.begin_window("b")
    assert monitor.open_windows() == ["a", "b", "outer"]
    monitor.end_window("a")
    monitor.end_window("outer")
    monitor.end_window("b")
    assert monitor.open_windows() == []


def test_duplicate_window_is_a_value_error(monitor: ZeusMonitor) -> None:
    monitor.begin_window("w")
    with pytest.raises(ValueError, match="already"):
        monitor.begin_window("w")
    monitor.begin_window("w", restart=True)
    assert monitor.open_windows() == ["w"]


def test_unknown_window_is_a_value_error(monitor: ZeusMonitor) -> None:
    with pytest.raises(ValueError, match="Measurement window 'nope' does not exist") as info:
        monitor.end_window("nope")
    assert type(info.value) is ValueError


def test_cancel_returns_zeros_and_closes(monitor: ZeusMonitor) -> None:
    monitor.begin_window("w")
    measurement = monitor.end_window("w", cancel=True)
    assert measurement.time == 0.0
    assert measurement.gpu_energy == {i: 0.0 for i in monitor.gpu_indices}
    assert monitor.open_windows() == []


def test_reset_windows(monitor: ZeusMonitor) -> None:
    monitor.begin_window("a")
    monitor.begin_window("b")
    monitor.reset_windows()
    assert monitor.open_windows() == []


def test_monitor_context_manager_drops_open_windows() -> None:
    with ZeusMonitor(cpu_indices=[], sync_execution_with=lambda i: None) as monitor:
        monitor.begin_window("left open")
    assert monitor.open_windows() == []


def test_window_context_manager(monitor: ZeusMonitor) -> None:
    with monitor.window("block") as window:
        time.sleep(0.01)
    assert window.measurement is not None
    assert window.measurement.time > 0.0
    with pytest.raises(KeyError):
        with monitor.window("failing"):
            raise KeyError("boom")
    assert monitor.open_windows() == []


def test_sync_hook_called_with_gpu_indices() -> None:
    calls: List[List[int]] = []
    monitor = ZeusMonitor(cpu_indices=[], sync_execution_with=calls.append)
    monitor.begin_window("w")
    monitor.end_window("w")
    assert calls == [monitor.gpu_indices, monitor.gpu_indices]
    monitor.begin_window("quiet", sync_execution=False)
    monitor.end_window("quiet", sync_execution=False)
    assert len(calls) == 2


def test_sync_hook_not_called_without_gpus() -> None:
    calls: List[List[int]] = []
    monitor = ZeusMonitor(gpu_indices=[], cpu_indices=[], sync_execution_with=calls.append)
    monitor.begin_window("w")
    monitor.end_window("w")
    assert calls == []


def test_sync_hook_error_propagates() -> None:
    def hook(indices: List[int]) -> None:
        raise RuntimeError("sync failed")

    monitor = ZeusMonitor(cpu_indices=[], sync_execution_with=hook)
    with pytest.raises(RuntimeError, match="sync failed"):
        monitor.begin_window("w")
    assert monitor.open_windows() == []


@pytest.mark.parametrize("value", ["tensorflow", "", 5, None, ["torch"]])
def test_bad_sync_value_is_a_value_error(value: object) -> None:
    with pytest.raises(ValueError, match="sync_execution_with"):
        ZeusMonitor(sync_execution_with=value)  # type: ignore[arg-type]


def test_torch_without_cuda_installs_no_hook() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("CUDA is available: the torch hook is installed")
    assert resolve_sync_hook("torch") is None
    ZeusMonitor(cpu_indices=[], sync_execution_with="torch")  # constructs, no hook


@pytest.mark.parametrize("framework", ["jax", "cupy"])
def test_missing_framework_installs_a_raising_hook(framework: str) -> None:
    # As the reference: a window that synchronises raises (test_sync_jax.py covers more).
    try:
        __import__(framework)
    except ImportError:
        hook = resolve_sync_hook(framework)
        assert hook is not None
        with pytest.raises(RuntimeError, match="No framework is available"):
            hook([0])
    else:
        pytest.skip(f"{framework} is installed")


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"gpu_indices": "0"}, "gpu_indices"),
        ({"gpu_indices": 0}, "gpu_indices"),
        ({"gpu_indices": [0.5]}, "gpu_indices"),
        ({"cpu_indices": [None]}, "cpu_indices"),
        ({"approx_instant_energy": 1}, "approx_instant_energy"),
        ({"log_file": 5}, "log_file"),
    ],
)
def test_wrong_constructor_types_name_the_parameter(kwargs: dict, name: str) -> None:
    with pytest.raises(TypeError, match=name):
        ZeusMonitor(sync_execution_with=lambda i: None, **kwargs)


def test_negative_index_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="gpu_indices"):
        ZeusMonitor(gpu_indices=[-1])


def test_wrong_window_key_type(monitor: ZeusMonitor) -> None:
    with pytest.raises(TypeError, match="key must be a str"):
        monitor.begin_window(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key must be a str"):
        monitor.end_window(None)  # type: ignore[arg-type]


def test_wrong_flag_type_is_a_type_error(monitor: ZeusMonitor) -> None:
    with pytest.raises(TypeError, match="sync_execution"):
        monitor.begin_window("w", sync_execution="yes")  # type: ignore[arg-type]


def test_invalid_gpu_index() -> None:
    with pytest.raises(ZeusGPUInvalidArgError, match="GPU index 7"):
        ZeusMonitor(gpu_indices=[7], sync_execution_with=lambda i: None)


def test_gpu_listed_twice() -> None:
    with pytest.raises(ValueError, match="twice"):
        ZeusMonitor(gpu_indices=[0, 0], sync_execution_with=lambda i: None)


def test_log_file(tmp_path: Path) -> None:
    log = tmp_path / "sub" / "log.csv"
    monitor = ZeusMonitor(cpu_indices=[], log_file=log, sync_execution_with=lambda i: None)
    monitor.begin_window("first")
    monitor.end_window("first")
    monitor.begin_window("cancelled")
    monitor.end_window("cancelled", cancel=True)
    rows = list(csv.reader(log.open()))
    gpus = monitor.gpu_indices
    assert rows[0] == ["start_time", "window_name", "elapsed_time"] + [
        f"gpu{i}_energy" for i in gpus
    ]
    assert len(rows) == 2
    assert rows[1][1] == "first"
    with pytest.raises(ValueError, match="comma"):
        monitor.begin_window("a,b")


def test_unwritable_log_file_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        ZeusMonitor(log_file=tmp_path, sync_execution_with=lambda i: None)


def test_approx_instant_energy_fills_zero_windows() -> None:
    monitor = ZeusMonitor(cpu_indices=[], approx_instant_energy=True,
                          sync_execution_with=lambda i: None)
    for _ in range(20):
        monitor.begin_window("tiny")
        measurement = monitor.end_window("tiny")
        assert all(energy > 0.0 for energy in measurement.gpu_energy.values())


def test_signatures() -> None:
    parameters = inspect.signature(ZeusMonitor).parameters
    assert list(parameters) == [
        "gpu_indices", "cpu_indices", "approx_instant_energy", "log_file", "sync_execution_with"
    ]
    assert parameters["sync_execution_with"].default == "torch"
    assert str(inspect.signature(ZeusMonitor.begin_window)) == (
        "(self, key, sync_execution=True, restart=False)"
    )
    assert str(inspect.signature(ZeusMonitor.end_window)) == (
        "(self, key, sync_execution=True, cancel=False)"
    )


# ---- Measurement ----


def test_measurement_construction_and_equality() -> None:
    a = Measurement(time=1.5, gpu_energy={0: 10.0, 1: 20.0})
    assert a.time == 1.5
    assert a.total_energy == 30.0
    assert a.cpu_energy is None and a.dram_energy is None and a.soc_energy is None
    b = Measurement(1.5, {0: 10.0, 1: 20.0}, None, None)
    assert a == b
    assert a != Measurement(1.5, {0: 10.0})
    assert "gpu_energy={0: 10.0, 1: 20.0}" in repr(a)
    with pytest.raises(TypeError, match="gpu_energy"):
        Measurement(1.0, [1.0])  # type: ignore[arg-type]


def test_measurement_dicts_are_mutable_and_pickle(monitor: ZeusMonitor) -> None:
    monitor.begin_window("w")
    measurement = monitor.end_window("w")
    measurement.gpu_energy[0] = 123.0
    assert measurement.gpu_energy[0] == 123.0
    copy = pickle.loads(pickle.dumps(measurement))
    assert copy == measurement
    assert copy.gpu_energy[0] == 123.0


def test_measurement_cpu_energy_dicts() -> None:
    m = Measurement(1.0, {0: 1.0}, cpu_energy={0: 2.0}, dram_energy={0: 0.5})
    assert m.cpu_energy == {0: 2.0}
    assert m.dram_energy == {0: 0.5}
    assert m.total_energy == 1.0


# ---- The C++ WindowMonitor interface (what the optimizers hold) ----


def test_zeus_monitor_through_the_native_interface(monitor: ZeusMonitor) -> None:
    indices, measurement = _zeus._window_roundtrip(monitor, "native")
    assert indices == monitor.gpu_indices
    assert sorted(measurement.gpu_energy) == monitor.gpu_indices


def test_python_window_monitor_through_the_native_interface() -> None:
    class Fake(_zeus.WindowMonitor):
        def __init__(self) -> None:
            super().__init__()
            self.gpu_indices = [0, 3]
            self.calls: List[str] = []

        def begin_window(self, key: str, sync_execution: bool = True,
                         restart: bool = False) -> None:
            self.calls.append(f"begin {key}")

        def end_window(self, key: str, sync_execution: bool = True,
                       cancel: bool = False) -> Measurement:
            self.calls.append(f"end {key}")
            return Measurement(2.0, {0: 1.0, 3: 2.0})

    fake = Fake()
    indices, measurement = _zeus._window_roundtrip(fake, "x")
    assert fake.calls == ["begin x", "end x"]
    assert indices == [0, 3]
    assert measurement.total_energy == 3.0


def test_not_a_monitor_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="monitor"):
        _zeus._window_roundtrip(object(), "x")


def test_measurement_signature_and_subclass() -> None:
    assert str(inspect.signature(Measurement)) == (
        "(time, gpu_energy, cpu_energy=None, dram_energy=None, soc_energy=None)"
    )

    class Tagged(Measurement):
        pass

    tagged = Tagged(1.0, {0: 2.0})
    assert tagged.total_energy == 2.0
    assert repr(tagged).startswith("Tagged(")
    with pytest.raises(TypeError):
        hash(tagged)


@pytest.mark.parametrize(
    "args, error, name",
    [
        (("1.0", {0: 1.0}), TypeError, "time"),
        ((1.0, None), TypeError, "gpu_energy"),
        ((1.0, {"0": 1.0}), TypeError, "gpu_energy"),
        ((1.0, {0: "x"}), TypeError, "gpu_energy"),
        ((1.0, {0: 1.0}, [1]), TypeError, "cpu_energy"),
    ],
)
def test_measurement_bad_arguments(args: tuple, error: type, name: str) -> None:
    with pytest.raises(error, match=name):
        Measurement(*args)


def test_window_keywords_and_numpy_bools(monitor: ZeusMonitor) -> None:
    np = pytest.importorskip("numpy")
    monitor.begin_window(key="k", sync_execution=np.bool_(False), restart=False)
    assert monitor.end_window(key="k", cancel=np.bool_(True)).time == 0.0
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        monitor.begin_window("k", bogus=True)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="missing required argument 'key'"):
        monitor.end_window()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="multiple values"):
        monitor.begin_window("k", key="k")  # type: ignore[misc]
    with pytest.raises(TypeError, match="cancel must be a bool"):
        monitor.end_window("k", True, "yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs a ZeusMonitor"):
        ZeusMonitor.begin_window(object(), "k")  # type: ignore[arg-type]
    assert monitor.open_windows() == []
