"""zeus_cpp.device.soc on fake Jetson sysfs trees (ZEUS_JETSON_ROOT): get_soc() and the Jetson
SoC, its JetsonMeasurement, and ZeusMonitor's soc_energy. The SoC is found once per process, so
each case runs in a fresh interpreter (python_runner)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zeus_cpp.device.soc import EmptySoC
from zeus_cpp.device.soc.jetson import JetsonMeasurement


def make_orin(root: Path, gpu_current_ma: int = 400) -> Path:
    """An Orin's first INA3221 under the mainline hwmon driver: 5 V on every rail, GPU
    ``gpu_current_ma``, CPU 200 mA, input 1 A; no power files (voltage x current)."""
    (root / "etc").mkdir(parents=True)
    (root / "etc/nv_tegra_release").write_text("# R35 (release)\n")
    hwmon = root / "sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3"
    hwmon.mkdir(parents=True)
    for channel, (label, current) in enumerate(
            [("VDD_GPU_SOC", gpu_current_ma), ("VDD_CPU_CV", 200), ("VIN_SYS_5V0", 1000)], 1):
        (hwmon / f"in{channel}_label").write_text(label + "\n")
        (hwmon / f"in{channel}_input").write_text("5000\n")
        (hwmon / f"curr{channel}_input").write_text(f"{current}\n")
    return hwmon


def test_measurement_subtracts_and_zeroes() -> None:
    a = JetsonMeasurement(cpu_energy_mj=10.0, gpu_energy_mj=5.0, rail_energy_mj={"CPU": 10.0},
                          skipped_reads=3)
    b = JetsonMeasurement(cpu_energy_mj=4.0, gpu_energy_mj=1.0, rail_energy_mj={"CPU": 4.0},
                          skipped_reads=1)
    d = a - b
    assert (d.cpu_energy_mj, d.gpu_energy_mj, d.total_energy_mj) == (6.0, 4.0, None)
    assert d.rail_energy_mj == {"CPU": 6.0} and d.skipped_reads == 2
    d.zero_all_fields()
    assert (d.cpu_energy_mj, d.gpu_energy_mj, d.total_energy_mj) == (0.0, 0.0, None)
    a.zeroAllFields()  # the reference's spelling
    assert a.cpu_energy_mj == 0.0
    m = JetsonMeasurement._from_rails([("VDD_GPU_SOC", "gpu", 1.5), ("VDDRQ", "other", 0.5)])
    assert m.gpu_energy_mj == 1500.0 and m.cpu_energy_mj is None
    assert m.rail_energy_mj == {"VDD_GPU_SOC": 1500.0, "VDDRQ": 500.0}


def test_get_soc_returns_a_jetson_that_measures_windows(tmp_path, python_runner) -> None:
    make_orin(tmp_path)
    out = python_runner(
        "import json, time\n"
        "from zeus_cpp.device.soc import get_soc, Jetson, SoC\n"
        "soc = get_soc()\n"
        "assert isinstance(soc, Jetson) and isinstance(soc, SoC) and soc is get_soc()\n"
        "soc.begin_window('w')\n"
        "time.sleep(0.3)\n"
        "m = soc.end_window('w')\n"
        "t = soc.get_total_energy_consumption()\n"
        "print(json.dumps({'metrics': sorted(soc.get_available_metrics()), 'model': soc.model,\n"
        "  'cpu': m.cpu_energy_mj, 'gpu': m.gpu_energy_mj, 'total': m.total_energy_mj,\n"
        "  'soc': m.soc_energy_mj, 'rails': m.rail_energy_mj, 'cum': t.gpu_energy_mj}))\n",
        env={"ZEUS_JETSON_ROOT": str(tmp_path)})
    got = json.loads(out)
    assert got["metrics"] == ["cpu_energy_mj", "gpu_energy_mj", "total_energy_mj"]
    assert got["model"] == "NVIDIA Jetson"
    # 2 W, 1 W and 5 W over about 0.3 s (wall time; generous bounds for a loaded machine).
    assert 0.25 * 2000 <= got["gpu"] <= 5.0 * 2000
    assert got["cpu"] == pytest.approx(got["gpu"] / 2, rel=1e-6)
    assert got["total"] == pytest.approx(got["gpu"] * 2.5, rel=1e-6)
    assert got["soc"] is None
    assert set(got["rails"]) == {"VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"}
    assert got["cum"] >= got["gpu"]


def test_zeus_monitor_fills_soc_energy_in_millijoules(tmp_path, python_runner) -> None:
    hwmon = make_orin(tmp_path)
    out = python_runner(
        "import json, time, pickle\n"
        "from zeus_cpp.monitor import ZeusMonitor\n"
        "from zeus_cpp.device.soc.jetson import Jetson, JetsonMeasurement\n"
        "monitor = ZeusMonitor(gpu_indices=[], cpu_indices=[])\n"
        "assert monitor.soc_is_present and isinstance(monitor.soc, Jetson)\n"
        "monitor.begin_window('w')\n"
        "time.sleep(0.2)\n"
        f"open({str(hwmon / 'in3_input')!r}, 'w').write('not a number')\n"
        "time.sleep(0.2)\n"
        "m = monitor.end_window('w')\n"
        "assert isinstance(m.soc_energy, JetsonMeasurement), repr(m)\n"
        "assert 'soc_energy=JetsonMeasurement' in repr(m)\n"
        "assert pickle.loads(pickle.dumps(m)).soc_energy == m.soc_energy\n"
        "print(json.dumps({'time': m.time, 'gpu': m.soc_energy.gpu_energy_mj,\n"
        "  'cpu': m.soc_energy.cpu_energy_mj, 'skipped': m.soc_energy.skipped_reads}))\n",
        env={"ZEUS_JETSON_ROOT": str(tmp_path), "ZEUS_SIMULATED_GPUS": None})
    got = json.loads(out)
    # Held power integrated: 2 W x the window, in mJ (the rails' power did not change).
    assert got["gpu"] == pytest.approx(2000.0 * got["time"], rel=0.02)
    assert got["cpu"] == pytest.approx(1000.0 * got["time"], rel=0.02)
    assert got["skipped"] >= 1  # the input rail's reads after it broke, counted, no crash


def test_without_a_soc_get_soc_raises_and_soc_energy_is_none(tmp_path, python_runner) -> None:
    # A Jetson without power files (a counter-less board): no SoC, and the reason.
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/nv_tegra_release").write_text("# R32\n")
    out = python_runner(
        "from zeus_cpp.device.soc import get_soc, ZeusSoCInitError\n"
        "from zeus_cpp.monitor import ZeusMonitor\n"
        "try:\n"
        "    get_soc()\n"
        "except ZeusSoCInitError as error:\n"
        "    print('raised:', error)\n"
        "monitor = ZeusMonitor(gpu_indices=[], cpu_indices=[])\n"
        "monitor.begin_window('w')\n"
        "print('soc_energy:', monitor.end_window('w').soc_energy, monitor.soc_is_present)\n",
        env={"ZEUS_JETSON_ROOT": str(tmp_path)})
    assert "raised:" in out and "no readable INA3221 power rail" in out
    assert "soc_energy: None False" in out


def test_empty_soc_is_what_a_monitor_without_a_soc_holds() -> None:
    assert EmptySoC().get_available_metrics() == set()
    with pytest.raises(ValueError, match="No SoC"):
        EmptySoC().begin_window("w")
