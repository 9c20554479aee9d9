"""Reference-parity attributes and module paths (issue 18, differences 6 and 7): the monitor's
and optimizer's attributes, Measurement as a dataclass, get_cpus().cpus, the framework probes'
keywords, the learning-rate scalers' accepted values and the zeus.device.* module paths."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math

import pytest

from zeus_cpp.monitor import Measurement, ZeusMonitor


def test_measurement_is_a_dataclass():
    m = Measurement(time=2.0, gpu_energy={0: 10.0, 1: 5.0}, cpu_energy={0: 3.0})
    assert dataclasses.is_dataclass(m)
    assert [f.name for f in dataclasses.fields(m)] == [
        "time", "gpu_energy", "cpu_energy", "dram_energy", "soc_energy"]
    assert dataclasses.asdict(m) == {"time": 2.0, "gpu_energy": {0: 10.0, 1: 5.0},
                                     "cpu_energy": {0: 3.0}, "dram_energy": None,
                                     "soc_energy": None}
    r = dataclasses.replace(m, time=4.0)
    assert isinstance(r, Measurement)
    assert r.time == 4.0 and r.gpu_energy == {0: 10.0, 1: 5.0} and r.cpu_energy == {0: 3.0}
    assert r.total_energy == 15.0
    assert m.time == 2.0  # the original is untouched


def test_measurement_from_a_window_is_a_dataclass():
    monitor = ZeusMonitor(gpu_indices=[0], cpu_indices=[])
    monitor.begin_window("w")
    m = monitor.end_window("w")
    d = dataclasses.asdict(m)
    assert set(d["gpu_energy"]) == {0} and d["time"] == m.time
    assert dataclasses.replace(m, gpu_energy={0: 1.0}).gpu_energy == {0: 1.0}


def test_monitor_attributes():
    from zeus_cpp.device import get_gpus

    monitor = ZeusMonitor(gpu_indices=[0, 1], cpu_indices=[], sync_execution_with="torch")
    assert monitor.sync_with == "torch"
    assert monitor.gpus is get_gpus() and len(monitor.gpus) == 2
    assert len(monitor.cpus) == len(monitor.cpus.cpus)
    assert monitor.measurement_states == {}
    monitor.begin_window("a")
    monitor.begin_window("b")
    assert set(monitor.measurement_states) == {"a", "b"}
    monitor.end_window("a")
    assert list(monitor.measurement_states) == ["b"]


def test_cpus_list():
    from zeus_cpp.device.cpu import CPU, CPUs, empty_cpus, get_cpus
    from zeus_cpp.exception import ZeusBaseCPUError

    empty = empty_cpus()
    assert isinstance(empty, CPUs) and len(empty) == 0 and empty.cpus == []
    try:
        cpus = get_cpus()
    except ZeusBaseCPUError:
        return  # no RAPL on this machine
    assert [c.index for c in cpus.cpus] == cpus.indices
    assert all(isinstance(c, CPU) for c in cpus.cpus)


def test_optimizer_state_identity_and_current_power_limit(tmp_path):
    from zeus_cpp.optimizer.power_limit import Done, GlobalPowerLimitOptimizer, Ready, Warmup

    monitor = ZeusMonitor(gpu_indices=[0], cpu_indices=[])
    plo = GlobalPowerLimitOptimizer(monitor, wait_steps=2, warmup_steps=2, profile_steps=1,
                                    pl_step=100)
    try:
        limits = plo.power_limits
        state = plo.state
        assert isinstance(state, Ready) and plo.state is state
        assert plo.current_power_limit == limits[0]
        plo.on_step_begin()
        if isinstance(plo.state, Ready):
            assert plo.state is state  # one object per phase, its steps updated in place
            assert state.steps == plo._impl.state[2]
        seen = []
        for _ in range(100):
            plo.on_step_begin()
            current = plo.state
            if isinstance(current, Warmup):
                assert plo.current_power_limit == current.current_power_limit
            seen.append(current)
            if isinstance(current, Done):
                break
        assert isinstance(plo.state, Done)
        assert plo.current_power_limit == plo.state.optimal_power_limit
        assert plo.state is plo.state
        assert len({id(s) for s in seen}) < len(seen)  # not a fresh copy per read
    finally:
        plo.close()


def test_framework_probe_keywords():
    from zeus_cpp.utils import framework

    for probe, label in ((framework.torch_is_available, "PyTorch"),
                         (framework.jax_is_available, "JAX"),
                         (framework.cupy_is_available, "CuPy")):
        params = inspect.signature(probe).parameters
        assert list(params) == ["ensure_available", "ensure_cuda"]
        assert params["ensure_available"].default is False
        assert params["ensure_cuda"].default is True
        name = {"PyTorch": "torch", "JAX": "jax", "CuPy": "cupy"}[label]
        if importlib.util.find_spec(name) is None:
            assert probe() is False and probe(ensure_cuda=False) is False
            with pytest.raises(RuntimeError, match=label):
                probe(ensure_available=True)


@pytest.mark.parametrize("name", ["SquareRootScaler", "LinearScaler"])
def test_lr_scalers_take_floats_and_zero(name):
    from zeus_cpp.utils import lr_scaler

    scaler = getattr(lr_scaler, name)
    assert scaler(bs=32, lr=0).compute_lr(128) == 0.0
    expected = math.sqrt(2.0) if name == "SquareRootScaler" else 2.0
    assert scaler(bs=16.0, lr=1.0).compute_lr(32.0) == pytest.approx(expected)
    assert scaler(bs=16, lr=1).compute_lr(32) == pytest.approx(expected)
    with pytest.raises(ValueError, match="lr"):
        scaler(bs=8, lr=-0.5)
    with pytest.raises(ValueError, match="bs"):
        scaler(bs=-1.0, lr=0.1)


@pytest.mark.parametrize(("module", "names"), [
    ("zeus_cpp.device.common", ["has_sys_admin"]),
    ("zeus_cpp.device.gpu.common", ["GPU", "GPUs", "ZeusGPUInitError"]),
    ("zeus_cpp.device.cpu.common", ["CPU", "CPUs", "CpuDramMeasurement", "ZeusCPUInitError"]),
    ("zeus_cpp.device.gpu.nvidia", ["nvml_is_available"]),
    ("zeus_cpp.device.gpu.amd", ["amdsmi_is_available"]),
    ("zeus_cpp.device.gpu", ["nvml_is_available", "amdsmi_is_available"]),  # re-exported there
    ("zeus_cpp.device.cpu.rapl", ["rapl_is_available"]),
])
def test_device_module_paths(module, names):
    imported = importlib.import_module(module)
    for name in names:
        assert hasattr(imported, name), f"{module}.{name}"


def test_availability_probes_on_simulated_gpus():
    from zeus_cpp.device.cpu.common import CPUs
    from zeus_cpp.device.cpu import CPUs as cpu_CPUs
    from zeus_cpp.device.gpu.amd import amdsmi_is_available
    from zeus_cpp.device.gpu.nvidia import nvml_is_available

    assert CPUs is cpu_CPUs
    # The tests run on simulated GPUs: neither vendor library is in use.
    assert nvml_is_available() is False
    assert amdsmi_is_available() is False
