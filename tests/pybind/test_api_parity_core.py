"""The core API has the reference's module paths, names and signatures (zeus-reference.md §1, §2)."""

from __future__ import annotations

import importlib
import inspect

import pytest

from zeus_cpp.device import get_gpus


def parameters(callable_: object) -> list:
    return list(inspect.signature(callable_).parameters)


@pytest.mark.parametrize(
    "module, names",
    [
        ("zeus_cpp.monitor", ["ZeusMonitor", "Measurement", "PowerMonitor", "PowerDomain"]),
        ("zeus_cpp.monitor.energy", ["ZeusMonitor", "Measurement"]),
        ("zeus_cpp.monitor.power", ["PowerMonitor", "PowerDomain", "PowerSample"]),
        ("zeus_cpp.device", ["get_gpus", "get_cpus", "get_soc"]),
        ("zeus_cpp.device.gpu", ["get_gpus", "GPUs", "GPU", "ZeusGPUInitError"]),
        ("zeus_cpp.device.cpu", ["get_cpus", "CpuDramMeasurement", "ZeusCPUInitError"]),
        ("zeus_cpp.device.exception", ["ZeusBaseGPUError", "ZeusBaseCPUError", "ZeusdError"]),
        ("zeus_cpp.exception", ["ZeusBaseError"]),
        ("zeus_cpp.monitor.price", [
            "ZeusElectricityPriceHTTPError", "ZeusElectricityPriceNotFoundError",
            "ElectricityPriceProvider", "OpenEIClient", "EnergyCostMeasurement",
            "EnergyCostMonitor",
        ]),
    ],
)
def test_module_paths(module: str, names: list) -> None:
    loaded = importlib.import_module(module)
    for name in names:
        assert hasattr(loaded, name), f"{module}.{name}"


def test_zeus_monitor_signatures() -> None:
    from zeus_cpp.monitor import ZeusMonitor

    signature = inspect.signature(ZeusMonitor)
    assert [(p.name, p.default) for p in signature.parameters.values()] == [
        ("gpu_indices", None), ("cpu_indices", None), ("approx_instant_energy", False),
        ("log_file", None), ("sync_execution_with", "torch"),
    ]
    assert parameters(ZeusMonitor.begin_window) == ["self", "key", "sync_execution", "restart"]
    assert parameters(ZeusMonitor.end_window) == ["self", "key", "sync_execution", "cancel"]
    assert callable(ZeusMonitor.reset_windows)


def test_price_signatures() -> None:
    from zeus_cpp.monitor.price import EnergyCostMonitor, OpenEIClient

    signature = inspect.signature(OpenEIClient)
    assert [(p.name, p.default) for p in list(signature.parameters.values())[:4]] == [
        ("location", inspect.Parameter.empty), ("label", inspect.Parameter.empty),
        ("sector", "Residential"), ("radius", 0),
    ]
    assert all(p.kind is p.KEYWORD_ONLY for p in list(signature.parameters.values())[4:])
    signature = inspect.signature(EnergyCostMonitor)
    assert [(p.name, p.default) for p in list(signature.parameters.values())[:4]] == [
        ("electricity_price_provider", inspect.Parameter.empty), ("gpu_indices", None),
        ("cpu_indices", None), ("sync_execution_with", "torch"),
    ]
    assert parameters(EnergyCostMonitor.begin_window) == ["self", "key", "sync_execution"]
    assert parameters(EnergyCostMonitor.end_window)[:3] == ["self", "key", "sync_execution"]
    assert parameters(OpenEIClient.get_current_electricity_prices) == ["self"]


def test_measurement_fields() -> None:
    from zeus_cpp.monitor import Measurement

    m = Measurement(time=1.0, gpu_energy={0: 1.0}, cpu_energy=None, dram_energy=None,
                    soc_energy=None)
    for field in ("time", "gpu_energy", "cpu_energy", "dram_energy", "soc_energy",
                  "total_energy"):
        assert hasattr(m, field)


def test_power_monitor_signatures() -> None:
    from zeus_cpp.monitor import PowerDomain, PowerMonitor

    assert parameters(PowerMonitor) == [
        "gpu_indices", "update_period", "max_samples_per_gpu", "power_domains"
    ]
    assert parameters(PowerMonitor.get_power_timeline) == [
        "self", "power_domain", "gpu_index", "start_time", "end_time"
    ]
    assert parameters(PowerMonitor.get_all_power_timelines) == [
        "self", "gpu_index", "start_time", "end_time"
    ]
    assert parameters(PowerMonitor.get_energy) == [
        "self", "start_time", "end_time", "power_domain"
    ]
    assert parameters(PowerMonitor.get_power) == ["self", "time", "power_domain"]
    assert [d.value for d in PowerDomain] == [
        "device_instant", "device_average", "memory_average"
    ]


GPU_METHODS = [
    "get_name", "get_power_management_limit_constraints", "get_power_management_limit",
    "set_power_management_limit", "reset_power_management_limit", "set_persistence_mode",
    "get_supported_memory_clocks", "set_memory_locked_clocks", "reset_memory_locked_clocks",
    "get_supported_graphics_clocks", "set_gpu_locked_clocks", "reset_gpu_locked_clocks",
    "reset_locked_clocks", "get_average_power_usage", "get_instant_power_usage",
    "get_average_memory_power_usage", "supports_get_total_energy_consumption",
    "get_total_energy_consumption", "get_gpu_temperature",
]


@pytest.mark.parametrize("name", GPU_METHODS)
def test_gpus_methods(name: str) -> None:
    gpus = get_gpus()
    assert callable(getattr(gpus, name))
    assert callable(getattr(gpus.gpus[0], name))
    doc = getattr(type(gpus), name).__doc__
    assert "gpu_index" in doc  # pybind11's signature line names the parameters


def test_gpus_keyword_names() -> None:
    gpus = get_gpus()
    limit = gpus.get_power_management_limit(gpu_index=0)
    gpus.set_power_management_limit(gpu_index=0, power_limit_mw=limit, block=True)
    gpus.get_supported_graphics_clocks(gpu_index=0, memory_clock_mhz=None)
    clocks = gpus.get_supported_graphics_clocks(0)
    gpus.set_gpu_locked_clocks(gpu_index=0, min_clock_mhz=min(clocks), max_clock_mhz=max(clocks))
    gpus.reset_gpu_locked_clocks(gpu_index=0, block=True)
    gpus.set_persistence_mode(gpu_index=0, enabled=False, block=True)


def test_get_gpus_signature() -> None:
    from zeus_cpp.device import get_gpus as public

    assert parameters(public) == ["ensure_homogeneous"]
