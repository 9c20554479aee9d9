"""get_gpus() / get_cpus() and the GPU methods, on simulated GPUs (ZEUS_SIMULATED_GPUS)."""

from __future__ import annotations

import os
import warnings

import pytest
from built_binaries import find_zeusd  # tests/support, on sys.path by conftest.py

from zeus_cpp.device import get_cpus, get_gpus, get_soc
from zeus_cpp.device.cpu import CpuDramMeasurement
from zeus_cpp.exception import (
    ZeusBaseCPUError,
    ZeusGPUInvalidArgError,
    ZeusGPUNotSupportedError,
    ZeusSoCInitError,
)


def expected_count() -> int:
    return int(os.environ["ZEUS_SIMULATED_GPUS"].split(":")[0])


def test_get_gpus_is_a_singleton() -> None:
    gpus = get_gpus()
    assert gpus is get_gpus()
    assert len(gpus) == expected_count()
    assert gpus.backend == "simulated"
    assert len(gpus.gpus) == len(gpus)
    assert gpus.supports_nonblocking_setters is False  # simulated, not through zeusd


def test_readings_and_units() -> None:
    gpus = get_gpus()
    minimum, maximum = gpus.get_power_management_limit_constraints(0)
    assert 0 < minimum < maximum
    assert minimum <= gpus.get_power_management_limit(0) <= maximum
    assert isinstance(gpus.get_name(0), str) and gpus.get_name(0)
    assert gpus.supports_get_total_energy_consumption(0) is True
    first = gpus.get_total_energy_consumption(0)
    assert isinstance(first, int) and first >= 0
    assert gpus.get_instant_power_usage(0) > 0
    assert gpus.get_average_power_usage(0) > 0
    assert isinstance(gpus.get_gpu_temperature(0), int)
    assert gpus.get_supported_memory_clocks(0)
    assert gpus.get_supported_graphics_clocks(0)
    assert gpus.get_supported_graphics_clocks(0, memory_clock_mhz=None)


def test_gpu_objects_mirror_gpus() -> None:
    gpus = get_gpus()
    gpu = gpus.gpus[0]
    assert gpu.get_name() == gpus.get_name(0)
    assert gpu.get_power_management_limit_constraints() == (
        gpus.get_power_management_limit_constraints(0)
    )


def test_set_and_reset_power_limit() -> None:
    gpus = get_gpus()
    minimum, maximum = gpus.get_power_management_limit_constraints(0)
    gpus.set_power_management_limit(0, minimum)
    assert gpus.get_power_management_limit(0) == minimum
    gpus.set_power_management_limit(0, minimum, block=False)  # idempotent
    gpus.reset_power_management_limit(0)
    assert gpus.get_power_management_limit(0) > minimum
    with pytest.raises(ZeusGPUInvalidArgError):
        gpus.set_power_management_limit(0, maximum + 1_000_000)


def test_locked_clocks_and_persistence() -> None:
    gpus = get_gpus()
    clocks = gpus.get_supported_graphics_clocks(0)
    gpus.set_gpu_locked_clocks(0, min(clocks), max(clocks))
    gpus.reset_gpu_locked_clocks(0)
    gpus.reset_locked_clocks(0)
    gpus.set_persistence_mode(0, True)
    assert gpus.get_persistence_mode(0) is True
    gpus.set_persistence_mode(0, False)


def test_invalid_index_is_a_value_error_naming_valid_indices() -> None:
    gpus = get_gpus()
    with pytest.raises(ZeusGPUInvalidArgError, match="valid indices") as info:
        gpus.get_name(len(gpus))
    assert isinstance(info.value, ValueError)


def test_wrong_argument_types() -> None:
    gpus = get_gpus()
    with pytest.raises(TypeError, match="gpu_index"):
        gpus.get_name("0")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="power_limit_mw"):
        gpus.set_power_management_limit(0, -5)
    with pytest.raises(TypeError, match="ensure_homogeneous"):
        get_gpus(ensure_homogeneous="yes")  # type: ignore[arg-type]


def test_homogeneous() -> None:
    assert get_gpus(ensure_homogeneous=True) is get_gpus()


def test_deprecated_camel_case_aliases_warn_once() -> None:
    gpus = get_gpus()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert gpus.getPowerManagementLimit(0) == gpus.get_power_management_limit(0)
        gpus.getPowerManagementLimit(0)
        assert gpus.getName(0) == gpus.get_name(0)
        assert gpus.gpus[0].getName() == gpus.get_name(0)
    deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning)
                    and "getPowerManagementLimit" in str(w.message)]
    assert len(deprecations) == 1
    assert "get_power_management_limit" in str(deprecations[0].message)


def test_memory_power_on_a_simulated_gpu() -> None:
    gpus = get_gpus()
    try:
        assert gpus.get_average_memory_power_usage(0) >= 0
    except ZeusGPUNotSupportedError:
        pass


def test_pre_volta_gpu_has_no_counter(python_runner) -> None:
    out = python_runner(
        "from zeus_cpp.device import get_gpus\n"
        "from zeus_cpp.exception import ZeusGPUNotSupportedError\n"
        "g = get_gpus()\n"
        "print(g.supports_get_total_energy_consumption(0))\n"
        "try:\n    g.get_total_energy_consumption(0)\n"
        "except ZeusGPUNotSupportedError:\n    print('not supported')\n",
        env={"ZEUS_SIMULATED_GPUS": "1:p100"},
    )
    assert out.split() == ["False", "not", "supported"]


def test_no_gpu_raises_the_references_value_error(python_runner) -> None:
    out = python_runner(
        "from zeus_cpp.device import get_gpus\n"
        "g = get_gpus()\n"
        "print(len(g))\n"
        "try:\n    g.get_name(0)\n"
        "except ValueError as e:\n    print(e)\n",
        env={"ZEUS_SIMULATED_GPUS": None, "ZEUS_NVML_LIBRARY": "/nonexistent/libnvml.so",
             "ZEUS_AMDSMI_LIBRARY": "/nonexistent/libamd_smi.so", "ZEUS_LOG_LEVEL": "off"},
    )
    assert out.splitlines() == ["0", "No GPUs available."]


def test_cuda_visible_devices_masking(python_runner) -> None:
    out = python_runner(
        "from zeus_cpp.device import get_gpus\n"
        "g = get_gpus()\n"
        "print(len(g), g.physical_index(0), g.physical_index(1))\n",
        env={"ZEUS_SIMULATED_GPUS": "4:a100", "CUDA_VISIBLE_DEVICES": "2,3"},
    )
    assert out.split() == ["2", "2", "3"]


def test_malformed_simulated_spec(python_runner) -> None:
    out = python_runner(
        "from zeus_cpp.device import get_gpus\n"
        "try:\n    get_gpus()\n"
        "except ValueError as e:\n    print(type(e).__name__)\n",
        env={"ZEUS_SIMULATED_GPUS": "lots"},
    )
    assert out.strip() == "ZeusGPUInvalidArgError"


def test_cpus() -> None:
    try:
        cpus = get_cpus()
    except ZeusBaseCPUError:
        return  # no readable RAPL here: the reference's classes
    assert len(cpus) >= 1
    index = cpus.indices[0]
    reading = cpus.get_total_energy_consumption(index)
    assert isinstance(reading, CpuDramMeasurement)
    assert reading.cpu_mj >= 0


def test_cpu_dram_measurement_arithmetic() -> None:
    a = CpuDramMeasurement(10.0, 4.0)
    b = CpuDramMeasurement(4.0, 1.0)
    assert a - b == CpuDramMeasurement(6.0, 3.0)
    assert a / 2 == CpuDramMeasurement(5.0, 2.0)
    assert (CpuDramMeasurement(1.0) - CpuDramMeasurement(0.5)).dram_mj is None


def test_get_soc_raises_without_a_soc() -> None:
    # No Jetson here (tests/pybind/test_soc.py declares one with ZEUS_JETSON_ROOT).
    with pytest.raises(ZeusSoCInitError):
        get_soc()


def test_zeusd_gpus_honour_block_false(tmp_path, python_runner) -> None:
    """Through zeusd (ZEUSD_SOCK_PATH), setters with block=False are sent as block=false, as the
    reference's zeusd GPUs do; the daemon still refuses an invalid value before queueing."""
    import subprocess
    import time

    zeusd = find_zeusd()
    if zeusd is None:
        pytest.skip("no zeusd binary (build target zeusd, or set ZEUSD_BIN / ZEUS_CLI)")
    socket_path = tmp_path / "zeusd.sock"
    log_path = tmp_path / "zeusd.log"
    env = dict(os.environ, ZEUS_SIMULATED_GPUS="1:a100")
    with open(log_path, "wb") as log:
        daemon = subprocess.Popen(
            [str(zeusd), "serve", "--socket-path", str(socket_path), "--socket-permissions", "666"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not socket_path.exists():
            assert daemon.poll() is None, log_path.read_text(errors="replace")
            assert time.monotonic() < deadline, log_path.read_text(errors="replace")
            time.sleep(0.02)
        out = python_runner(
            "from zeus_cpp.device import get_gpus\n"
            "gpus = get_gpus()\n"
            "print(gpus.supports_nonblocking_setters, gpus.gpus[0].supports_nonblocking_setters)\n"
            "low, high = gpus.get_power_management_limit_constraints(0)\n"
            "gpus.set_power_management_limit(0, low, block=False)\n"
            "gpus.set_gpu_locked_clocks(0, 1000, 1500, block=False)\n"
            "gpus.reset_gpu_locked_clocks(0, block=False)\n"
            "gpus.reset_power_management_limit(0, block=True)\n"
            "try:\n"
            "    gpus.set_gpu_locked_clocks(0, 1, 2, block=False)\n"
            "    print('accepted')\n"
            "except Exception as error:\n"
            "    print('refused', type(error).__name__)\n",
            env={"ZEUS_SIMULATED_GPUS": "1:a100", "ZEUSD_SOCK_PATH": str(socket_path)},
        )
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
    lines = out.splitlines()
    assert lines[0] == "True True", out
    assert lines[-1].startswith("refused"), out
    log = log_path.read_text(errors="replace")
    # The queued writes were carried out by the daemon's writer all the same.
    assert "gpu_locked_clocks_mhz: unknown -> 1000-1500" in log, log
