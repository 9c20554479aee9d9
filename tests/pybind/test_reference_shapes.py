"""What the reference's users read off its objects (issue 31, items 3 and 7): power timelines as
lists of (time, W) tuples, PowerMonitor.measurement_domains, ZeusMonitor.soc / soc_is_present /
power_monitor, infer_counter_update_period, the vendor classes for isinstance, one report of a
0 J window, and no "No GPU found" when no GPU was asked for."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

from conftest import subprocess_env
from zeusd_daemon import daemons  # noqa: F401  (the fixture)
from zeus_cpp import _zeus
from zeus_cpp.device import get_cpus, get_gpus
from zeus_cpp.device.cpu import empty_cpus
from zeus_cpp.device.cpu.common import EmptyCPUs
from zeus_cpp.device.cpu.rapl import RAPLCPU, RAPLCPUs, ZeusdRAPLCPU
from zeus_cpp.device.gpu.amd import AMDGPUs
from zeus_cpp.device.gpu.common import EmptyGPUs
from zeus_cpp.device.gpu.nvidia import NVIDIAGPUs
from zeus_cpp.device.soc.common import EmptySoC
from zeus_cpp.exception import ZeusGPUInitError
from zeus_cpp.monitor import PowerDomain, PowerMonitor, ZeusMonitor
from zeus_cpp.monitor.power import infer_counter_update_period


@pytest.fixture(scope="module")
def power_monitor():
    monitor = PowerMonitor(update_period=0.01,
                           power_domains=[PowerDomain.DEVICE_INSTANT, PowerDomain.DEVICE_AVERAGE])
    time.sleep(0.2)
    yield monitor
    monitor.stop()


def test_power_timelines_are_lists_of_tuples(power_monitor: PowerMonitor) -> None:
    timelines = power_monitor.get_power_timeline(PowerDomain.DEVICE_INSTANT)
    assert sorted(timelines) == power_monitor.gpu_indices
    for gpu, timeline in timelines.items():
        assert type(timeline) is list and timeline  # `if timeline:` works
        assert all(type(sample) is tuple and len(sample) == 2 for sample in timeline)
        t, watts = timeline[0]
        assert type(t) is float and type(watts) is float
        assert sorted(timeline) == timeline
        json.dumps(timeline)
        # Concatenation appends a sample (an array would add element-wise).
        longer = timeline + [(t + 1.0, 1.0)]
        assert len(longer) == len(timeline) + 1 and longer[-1] == (t + 1.0, 1.0)
    every = power_monitor.get_all_power_timelines()
    assert sorted(every) == ["device_average", "device_instant"]
    assert all(type(timeline) is list for per_gpu in every.values() for timeline in per_gpu.values())


def test_the_array_form_holds_the_same_samples(power_monitor: PowerMonitor) -> None:
    end = time.time()
    listed = power_monitor.get_power_timeline("device_instant", 0, None, end)[0]
    array = power_monitor.get_power_timeline_array("device_instant", 0, None, end)[0]
    assert isinstance(array, np.ndarray) and array.shape == (len(listed), 2)
    assert [tuple(row) for row in array.tolist()] == listed
    arrays = power_monitor.get_all_power_timeline_arrays(gpu_index=0)
    assert all(isinstance(a[0], np.ndarray) for a in arrays.values())


def test_measurement_domains_is_the_references_name(power_monitor: PowerMonitor) -> None:
    assert power_monitor.measurement_domains == power_monitor.power_domains
    assert PowerDomain.DEVICE_INSTANT in power_monitor.measurement_domains


def test_infer_counter_update_period() -> None:
    period = infer_counter_update_period([0, 1])
    assert 0.001 <= period <= 0.1
    with pytest.raises(TypeError):
        infer_counter_update_period("0")  # type: ignore[arg-type]


def test_zeus_monitor_soc_and_power_monitor() -> None:
    monitor = ZeusMonitor(cpu_indices=[], sync_execution_with=lambda i: None)
    assert monitor.soc_is_present is False
    assert isinstance(monitor.soc, EmptySoC)
    assert monitor.soc.get_available_metrics() == set()
    with pytest.raises(ValueError, match="No SoC"):
        monitor.soc.get_total_energy_consumption()
    assert monitor.power_monitor is None  # V100s have an energy counter


def test_pre_volta_gpus_get_a_power_monitor(python_runner) -> None:
    out = python_runner(
        "from zeus_cpp.monitor import ZeusMonitor, PowerMonitor\n"
        "m = ZeusMonitor(cpu_indices=[], sync_execution_with=lambda i: None)\n"
        "p = m.power_monitor\n"
        "print(isinstance(p, PowerMonitor), p.gpu_indices, m.power_monitor is p)\n"
        "p.stop()\n",
        env={"ZEUS_SIMULATED_GPUS": "2:p100"},
    )
    assert out.split() == ["True", "[0,", "1]", "True"]


def test_vendor_classes_answer_isinstance() -> None:
    gpus = get_gpus()
    assert gpus.backend == "simulated"
    assert not isinstance(gpus, NVIDIAGPUs)
    assert not isinstance(gpus, AMDGPUs)
    assert not isinstance(gpus, EmptyGPUs)
    assert not isinstance(object(), NVIDIAGPUs)
    with pytest.raises(ZeusGPUInitError, match="NVML"):
        NVIDIAGPUs()
    with pytest.raises(TypeError, match="EmptyGPUs"):
        EmptyGPUs()
    assert isinstance(empty_cpus(), EmptyCPUs)
    assert not isinstance(empty_cpus(), RAPLCPUs)
    # The reference's constructor parameters, for code (and the signature check) that reads them.
    assert list(inspect.signature(NVIDIAGPUs.__init__).parameters) == ["self", "ensure_homogeneous"]
    assert list(inspect.signature(RAPLCPU.__init__).parameters) == ["self", "cpu_index", "rapl_dir"]
    with pytest.raises(TypeError, match="get_cpus"):
        RAPLCPU(0, "/sys/class/powercap/intel-rapl")
    assert not isinstance(gpus, RAPLCPUs)


def test_rapl_classes_on_a_fake_tree(python_runner, tmp_path) -> None:
    zone = tmp_path / "intel-rapl:0"
    zone.mkdir()
    for name, text in (("name", "package-0"), ("energy_uj", "5"),
                       ("max_energy_range_uj", "262143328850")):
        (zone / name).write_text(text + "\n")
    out = python_runner(
        "from zeus_cpp.device import get_cpus\n"
        "from zeus_cpp.device.cpu.rapl import RAPLCPUs, RAPLCPU, ZeusdRAPLCPU\n"
        "from zeus_cpp.device.cpu.common import EmptyCPUs\n"
        "cpus = get_cpus()\n"
        "print(isinstance(cpus, RAPLCPUs), isinstance(cpus, EmptyCPUs),\n"
        "      isinstance(cpus.cpus[0], RAPLCPU), isinstance(cpus.cpus[0], ZeusdRAPLCPU))\n",
        env={"ZEUS_POWERCAP_ROOT": str(tmp_path), "ZEUSD_SOCK_PATH": None,
             "ZEUSD_HOST_PORT": None},
    )
    assert out.split() == ["True", "False", "True", "False"]


def _no_gpu_python(code: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=subprocess_env({"ZEUS_SIMULATED_GPUS": None, "CUDA_VISIBLE_DEVICES": ""}),
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result


def test_no_gpu_asked_for_says_nothing_about_gpus() -> None:
    result = _no_gpu_python(
        "from zeus_cpp.monitor import ZeusMonitor\n"
        "m = ZeusMonitor(gpu_indices=[], cpu_indices=[])\n"
        "m.begin_window('w'); print(m.end_window('w').gpu_energy)\n"
    )
    assert result.stdout.strip() == "{}"
    assert "No GPU found" not in result.stderr, result.stderr


def test_no_gpu_machine_has_empty_gpus() -> None:
    result = _no_gpu_python(
        "from zeus_cpp.device import get_gpus\n"
        "from zeus_cpp.device.gpu.common import EmptyGPUs\n"
        "print(isinstance(get_gpus(), EmptyGPUs), EmptyGPUs() is get_gpus())\n"
    )
    assert result.stdout.split() == ["True", "True"]


def test_a_zero_joule_window_is_reported_once() -> None:
    code = (
        "import warnings\n"
        "from zeus_cpp import _zeus\n"
        "from zeus_cpp.monitor import ZeusMonitor\n"
        "gpus = _zeus._benchmark_gpus(1)  # a clock that never moves: every window reads 0 J\n"
        "monitor = _zeus.ZeusMonitor([0], [], False, None, None, gpus)\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    monitor.begin_window('w')\n"
        "    m = monitor.end_window('w')\n"
        "print(m.gpu_energy, len(caught), 'approx_instant_energy' in str(caught[0].message))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], env=subprocess_env(),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["{0:", "0.0}", "1", "True"]
    # Python's warning only: not also the native log's line.
    assert "0 J" not in result.stderr, result.stderr


def test_cpus_of_this_machine_are_never_zeusd_without_a_daemon() -> None:
    assert _zeus._cpus_through_zeusd() is False
    try:
        cpus = get_cpus()
    except Exception:  # noqa: BLE001  (no RAPL here)
        return
    assert all(not isinstance(cpu, ZeusdRAPLCPU) for cpu in cpus.cpus)
    assert all(isinstance(cpu, RAPLCPU) for cpu in cpus.cpus)


def test_packages_read_through_zeusd_are_zeusd_rapl_cpus(daemons, python_runner,  # noqa: F811
                                                         tmp_path) -> None:
    daemon = daemons()
    out = python_runner(
        "from zeus_cpp.device import get_cpus\n"
        "from zeus_cpp.device.cpu.rapl import RAPLCPUs, RAPLCPU, ZeusdRAPLCPU\n"
        "cpus = get_cpus()\n"
        "print(isinstance(cpus, RAPLCPUs), isinstance(cpus.cpus[0], RAPLCPU),\n"
        "      isinstance(cpus.cpus[0], ZeusdRAPLCPU))\n",
        env={"ZEUSD_SOCK_PATH": str(daemon.socket_path), "ZEUSD_HOST_PORT": None,
             "ZEUS_POWERCAP_ROOT": str(tmp_path / "no-local-rapl")},
    )
    assert out.split() == ["True", "True", "True"]
