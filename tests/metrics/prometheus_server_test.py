#!/usr/bin/python3
"""A real Prometheus server scrapes `zeus exporter` and a ZeusMonitor training-loop stand-in.

Usage: prometheus_server_test.py ZEUS_BINARY WINDOW_DRIVER_BINARY

Starts, on loopback ports in a temporary directory:
- `zeus exporter` on two simulated H200s and a fake RAPL tree whose counter this script advances,
  with a constant carbon intensity (400 gCO2eq/kWh) and price (0.25 per kWh);
- metrics_window_driver: ZeusMonitor windows "step" (~50 ms) and "epoch" feeding the histograms;
- Debian's `prometheus` with a 1 s scrape interval pointing at both.
Then asks the Prometheus HTTP API for the expected series and checks their values are plausible.
Exit 0: passed; 1: failed (with the reason); 77: skipped (no `prometheus` binary).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import server_harness
from server_harness import (
    H200_IDLE_W,
    H200_MAX_W,
    STARTUP_S,
    Failure,
    Processes,
    expect,
    free_ports,
    start_prometheus,
    wait_until,
)

GCO2EQ_PER_KWH, PRICE_PER_KWH, JOULES_PER_KWH = 400.0, 0.25, 3.6e6


def wait_for_file(path: Path, process: subprocess.Popen, what: str) -> str:
    deadline = time.monotonic() + STARTUP_S
    while not path.exists():
        if process.poll() is not None:
            raise Failure(f"{what} exited with {process.returncode} before it was ready")
        if time.monotonic() > deadline:
            raise Failure(f"{what} wrote no {path.name} within {STARTUP_S} s")
        time.sleep(0.05)
    return path.read_text().strip()


def make_powercap_tree(root: Path) -> Path:
    zone = root / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "energy_uj").write_text("1000000\n")
    (zone / "max_energy_range_uj").write_text("262143328850\n")
    return zone / "energy_uj"


def advance_counter(path: Path, microjoules: int) -> None:
    value = int(path.read_text()) + microjoules
    temporary = path.with_suffix(".new")
    temporary.write_text(f"{value}\n")
    temporary.replace(path)


def run(zeus: str, driver: str, work: Path) -> None:
    processes = Processes(work)
    start = processes.start
    try:
        energy_file = make_powercap_tree(work / "powercap")
        env = dict(os.environ, ZEUS_SIMULATED_GPUS="2:h200", ZEUS_POWERCAP_ROOT=str(work / "powercap"))
        exporter = start(
            "exporter",
            [zeus, "exporter", "--port", "0", "--port-file", str(work / "exporter.port"),
             "--interval", "200ms", "--carbon-intensity", str(GCO2EQ_PER_KWH),
             "--price", str(PRICE_PER_KWH)],
            env,
        )  # fmt: skip
        exporter_port = wait_for_file(work / "exporter.port", exporter, "zeus exporter")
        windows = start("driver", [driver, str(work / "driver.port")], env)
        driver_port = wait_for_file(work / "driver.port", windows, "metrics_window_driver")

        (prometheus_port,) = free_ports(1)
        prometheus = start_prometheus(
            processes,
            prometheus_port,
            f"  - job_name: zeus_exporter\n    static_configs:\n"
            f"      - targets: ['127.0.0.1:{exporter_port}']\n"
            f"  - job_name: zeus_windows\n    static_configs:\n"
            f"      - targets: ['127.0.0.1:{driver_port}']\n",
        )

        wait_until(
            "both targets up",
            lambda: sorted(prometheus.values("up").values()) == [1.0, 1.0],
            poll_s=0.5,
        )
        print("both targets are up; letting Prometheus scrape for a while")
        # RAPL moves 20 J every 0.5 s (40 W) while Prometheus scrapes.
        deadline = time.monotonic() + 12.0
        while time.monotonic() < deadline:
            advance_counter(energy_file, 20_000_000)
            time.sleep(0.5)
        wait_until(
            "8 scrapes of the exporter",
            lambda: all(
                v >= 8
                for v in prometheus.values(
                    'count_over_time(zeus_gpu_energy_joules_total{job="zeus_exporter"}[1m])'
                ).values()
            )
            and prometheus.values('zeus_gpu_energy_joules_total{job="zeus_exporter"}'),
            poll_s=0.5,
        )

        energy = prometheus.values('zeus_gpu_energy_joules_total{job="zeus_exporter"}')
        expect(sorted(energy) == ["index=0,instance=127.0.0.1:" + exporter_port,
                                  "index=1,instance=127.0.0.1:" + exporter_port],
               f"one energy counter per GPU: {sorted(energy)}")  # fmt: skip
        expect(all(v > 0 for v in energy.values()), f"energy counters are positive: {energy}")
        rates = prometheus.values('rate(zeus_gpu_energy_joules_total{job="zeus_exporter"}[10s])')
        expect(
            len(rates) == 2 and all(H200_IDLE_W * 0.8 <= v <= H200_MAX_W for v in rates.values()),
            f"energy rate is an H200's power (75-700 W): {rates}",
        )
        power = prometheus.values(
            'power_monitor_gpu_power_watts{job="zeus_exporter",domain="device_instant"}'
        )
        expect(
            len(power) == 2 and all(H200_IDLE_W * 0.8 <= v <= H200_MAX_W for v in power.values()),
            f"instant power per GPU is plausible: {power}",
        )
        limits = prometheus.values('zeus_gpu_power_limit_watts{job="zeus_exporter"}')
        expect(list(limits.values()) == [700.0, 700.0], f"power limits are 700 W: {limits}")
        temperature = prometheus.values('zeus_gpu_temperature_celsius{job="zeus_exporter"}')
        expect(
            len(temperature) == 2 and all(10 <= v <= 110 for v in temperature.values()),
            f"temperatures are plausible: {temperature}",
        )
        info = prometheus.query('zeus_gpu_info{job="zeus_exporter"}')
        expect(
            sorted(s["metric"]["name"] for s in info) == ["NVIDIA H200", "NVIDIA H200"],
            "zeus_gpu_info names both GPUs",
        )
        cpu = prometheus.values('zeus_cpu_energy_joules_total{job="zeus_exporter"}')
        expect(len(cpu) == 1 and list(cpu.values())[0] >= 100, f"RAPL energy counted: {cpu}")
        cpu_rate = prometheus.values('rate(zeus_cpu_energy_joules_total{job="zeus_exporter"}[10s])')
        expect(
            len(cpu_rate) == 1 and 20 <= list(cpu_rate.values())[0] <= 80,
            f"RAPL power is about the 40 W the test drives: {cpu_rate}",
        )

        # Carbon and cost: each scrape's counters are the energy up to the last priced read times
        # the constant rate (a scrape may fall between a read and its pricing: one 200 ms read).
        job = '{job="zeus_exporter"}'
        for device in ("gpu", "cpu"):
            energy_family = f"zeus_{device}_energy_joules_total{job}"
            grams_family = f"zeus_{device}_carbon_emission_grams_total{job}"
            grams = prometheus.values(grams_family)
            expect(
                len(grams) == len(prometheus.values(energy_family))
                and all(v > 0 for v in grams.values()),
                f"one positive {device} emission counter per device: {grams}",
            )
            priced = prometheus.values(
                f"{grams_family} * {JOULES_PER_KWH} / {GCO2EQ_PER_KWH} / {energy_family}"
            )
            expect(
                len(priced) == len(grams) and all(0.8 <= v <= 1.0 + 1e-9 for v in priced.values()),
                f"{device} grams = J / 3.6e6 x 400 (to one read): {priced}",
            )
            per_gram = prometheus.values(f"zeus_{device}_energy_cost_total{job} / {grams_family}")
            expect(
                len(per_gram) == len(grams)
                and all(abs(v - PRICE_PER_KWH / GCO2EQ_PER_KWH) < 1e-9 for v in per_gram.values()),
                f"{device} cost and emissions priced at the same reads: {per_gram}",
            )
        intensity = prometheus.values(f"zeus_carbon_intensity_gco2eq_per_kwh{job}")
        price = prometheus.values(f"zeus_electricity_price_per_kwh{job}")
        expect(
            list(intensity.values()) == [GCO2EQ_PER_KWH] and list(price.values()) == [PRICE_PER_KWH],
            f"intensity and price gauges: {intensity}, {price}",
        )
        failures = prometheus.values(f"zeus_carbon_intensity_failures_total{job}")
        expect(list(failures.values()) == [0.0], f"no provider failures: {failures}")

        steps = prometheus.values('energy_monitor_gpu_energy_joules_count{window="step"}')
        expect(len(steps) == 2 and all(v >= 20 for v in steps.values()),
               f"step windows observed per GPU: {steps}")  # fmt: skip
        per_step = prometheus.values(
            'energy_monitor_gpu_energy_joules_sum{window="step"}'
            ' / energy_monitor_gpu_energy_joules_count{window="step"}'
        )
        expect(
            all(0.5 <= v <= 50 for v in per_step.values()),
            f"energy per ~50 ms step is an idle H200's (~4 J): {per_step}",
        )
        median = prometheus.values(
            "histogram_quantile(0.5, sum by (le) "
            '(rate(zeus_window_duration_seconds_bucket{window="step"}[10s])))'
        )
        expect(
            len(median) == 1 and 0 < list(median.values())[0] <= 0.5,
            f"median step duration from the histogram is within its first bucket: {median}",
        )
        epochs = prometheus.values('zeus_window_duration_seconds_count{window="epoch"}')
        expect(len(epochs) == 1 and list(epochs.values())[0] >= 1, f"epochs observed: {epochs}")
    finally:
        processes.stop()
        processes.check_exit_codes(ignore=("prometheus",))


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    zeus, driver = sys.argv[1], sys.argv[2]
    return server_harness.main(
        lambda work: run(zeus, driver, work), "zeus-prometheus-", ("prometheus",)
    )


if __name__ == "__main__":
    sys.exit(main())
