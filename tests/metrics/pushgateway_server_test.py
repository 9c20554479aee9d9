#!/usr/bin/python3
"""A real Prometheus scrapes a real Pushgateway that the reference's push classes push to.

Usage: pushgateway_server_test.py [--driver PUSH_DRIVER_BINARY] [--python PACKAGE_DIR]

Starts, on loopback ports in a temporary directory, Debian's `prometheus-pushgateway` and
`prometheus` (1 s scrape interval, honor_labels: true, so that the pushed job label is kept), then
pushes for a few seconds on two simulated H200s:
- with --driver, from C++ (pushgateway_push_driver: jobs cpp_hist, cpp_counter, cpp_power);
- with --python, from zeus_cpp.metric's EnergyHistogram, EnergyCumulativeCounter and PowerGauge
  imported from PACKAGE_DIR (jobs py_hist, py_counter, py_power);
and asks Prometheus's HTTP API until the series appear with the right labels and plausible values.
Exit 0: passed; 1: failed (with the reason); 77: skipped (a binary is missing).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import server_harness
from server_harness import (
    H200_IDLE_W,
    H200_MAX_W,
    Failure,
    Processes,
    Prometheus,
    expect,
    free_ports,
    start_prometheus,
    wait_until,
)

PUSH_S = 3.0

PYTHON_PUSHER = """
import sys, time, warnings
from zeus_cpp.metric import EnergyCumulativeCounter, EnergyHistogram, PowerGauge

url, seconds = sys.argv[1], float(sys.argv[2])
warnings.simplefilter("ignore", UserWarning)  # energies below the smallest bucket
warnings.simplefilter("error", RuntimeWarning)  # a failed periodic push fails the test
histogram = EnergyHistogram([], [0, 1], url, "py_hist")
counter = EnergyCumulativeCounter([], [0, 1], 0.2, url, "py_counter")
power = PowerGauge([0, 1], 0.2, url, "py_power")
counter.begin_window("epoch")
power.begin_window("epoch")
end = time.monotonic() + seconds
steps = 0
while time.monotonic() < end:
    histogram.begin_window("step", sync_execution=False)
    time.sleep(0.05)
    histogram.end_window("step", sync_execution=False)
    steps += 1
counter.end_window("epoch")
power.end_window("epoch")
print(f"pushed {steps} step windows")
"""


def check_pushed(prometheus: Prometheus, prefix: str) -> None:
    """The three classes' series from one pusher (jobs <prefix>_hist, _counter, _power)."""

    def by_index(promql: str) -> dict[str, float]:
        out = {}
        for series in prometheus.query(promql):
            labels = dict(series["metric"])
            labels.pop("__name__", None)
            if set(labels) != {"job", "window", "index"}:
                raise Failure(f"{promql}: labels {sorted(labels)} are not job, window, index")
            out[labels["index"]] = float(series["value"][1])
        return out

    steps_query = f'energy_monitor_gpu_energy_joules_count{{job="{prefix}_hist",window="step"}}'
    steps = wait_until(
        f"{prefix} step histograms", lambda: (lambda v: v if len(v) == 2 else None)(by_index(steps_query))
    )
    expect(sorted(steps) == ["0", "1"] and all(v >= 5 for v in steps.values()),
           f"{prefix}: step windows observed per GPU: {steps}")  # fmt: skip
    per_step = by_index(
        f'energy_monitor_gpu_energy_joules_sum{{job="{prefix}_hist",window="step"}}'
        f' / energy_monitor_gpu_energy_joules_count{{job="{prefix}_hist",window="step"}}'
    )
    expect(all(0.5 <= v <= 50 for v in per_step.values()) and len(per_step) == 2,
           f"{prefix}: energy per ~50 ms step is an idle H200's (~4 J): {per_step}")  # fmt: skip
    buckets = prometheus.query(
        f'energy_monitor_gpu_energy_joules_bucket{{job="{prefix}_hist",window="step",index="0"}}'
    )
    expect(
        sorted(s["metric"]["le"] for s in buckets)
        == sorted(["50", "100", "200", "500", "1000", "+Inf"]),
        f"{prefix}: the reference's GPU buckets",
    )

    counter_query = (
        f'energy_monitor_gpu_energy_joules_total{{job="{prefix}_counter",window="epoch"}}'
    )
    counters = wait_until(
        f"{prefix} energy counters",
        lambda: (lambda v: v if len(v) == 2 else None)(by_index(counter_query)),
    )
    low_j, high_j = 0.4 * H200_IDLE_W * PUSH_S, H200_MAX_W * (PUSH_S + 2)
    expect(all(low_j <= v <= high_j for v in counters.values()),
           f"{prefix}: energy counted over ~{PUSH_S} s per GPU within {low_j:.0f}-{high_j:.0f} J: "
           f"{counters}")  # fmt: skip

    power_query = f'power_monitor_gpu_power_watts{{job="{prefix}_power",window="epoch"}}'
    power = wait_until(
        f"{prefix} power gauges",
        lambda: (lambda v: v if len(v) == 2 else None)(by_index(power_query)),
    )
    expect(all(H200_IDLE_W * 0.8 <= v <= H200_MAX_W for v in power.values()),
           f"{prefix}: instant power per GPU is an H200's: {power}")  # fmt: skip


def run(driver: str | None, package: str | None, work: Path) -> None:
    processes = Processes(work)
    try:
        gateway_port, prometheus_port = free_ports(2)
        gateway_url = f"http://127.0.0.1:{gateway_port}"
        processes.start(
            "pushgateway",
            ["prometheus-pushgateway", f"--web.listen-address=127.0.0.1:{gateway_port}"],
        )
        prometheus = start_prometheus(
            processes,
            prometheus_port,
            "  - job_name: pushgateway\n    honor_labels: true\n    static_configs:\n"
            f"      - targets: ['127.0.0.1:{gateway_port}']\n",
        )
        wait_until(
            "the Pushgateway target up",
            lambda: [s for s in prometheus.query('up{job="pushgateway"}') if s["value"][1] == "1"],
        )
        print("Prometheus scrapes the Pushgateway; pushing")
        env = dict(os.environ, ZEUS_SIMULATED_GPUS="2:h200")
        pushers = []
        if driver:
            pushers.append(("cpp", [driver, gateway_url, str(PUSH_S)], env))
        if package:
            python_env = dict(env, PYTHONPATH=package)
            pushers.append(
                ("py", [sys.executable, "-c", PYTHON_PUSHER, gateway_url, str(PUSH_S)], python_env)
            )
        for prefix, command, pusher_env in pushers:
            done = subprocess.run(
                command, env=pusher_env, capture_output=True, text=True, timeout=120
            )
            if done.returncode != 0:
                raise Failure(f"the {prefix} pusher exited with {done.returncode}:\n"
                              f"{done.stdout}{done.stderr}")  # fmt: skip
            print(f"  {prefix}: {done.stdout.strip()}")
        for prefix, _, _ in pushers:
            check_pushed(prometheus, prefix)
    finally:
        processes.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--driver", help="pushgateway_push_driver binary (the C++ pushers)")
    parser.add_argument("--python", help="directory holding the zeus_cpp package")
    args = parser.parse_args()
    if not args.driver and not args.python:
        parser.error("give --driver, --python or both")
    return server_harness.main(
        lambda work: run(args.driver, args.python, work),
        "zeus-pushgateway-",
        ("prometheus", "prometheus-pushgateway"),
        failures=(Failure, subprocess.TimeoutExpired),
    )


if __name__ == "__main__":
    sys.exit(main())
