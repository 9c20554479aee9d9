#!/usr/bin/env python3
"""Times a begin_window + end_window pair through the zeus_cpp bindings.

Usage (from the repository root, with a built package)::

    PYTHONPATH=build/release/python /usr/bin/python3 bench/python/bench_window.py [--json]

Runs on simulated GPUs (``ZEUS_SIMULATED_GPUS=8:h200``, set here before zeus_cpp is imported)
with ``sync_execution_with`` resolving to no hook (CPU-only or absent torch), for 1 and 8 GPUs and
without GPUs (the binding's own cost). Reports the best of several timeit repeats, in µs per
pair, and also the cost of reading the Measurement's dict. Times are the process's CPU time
(``time.process_time``), which other processes competing for the CPU do not inflate; ``--wall``
uses the wall clock instead.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import timeit

os.environ.setdefault("ZEUS_SIMULATED_GPUS", "8:h200")
# Windows of a microsecond measure 0 J (the counter does not tick); the warning is not news here.
os.environ.setdefault("ZEUS_LOG_LEVEL", "error")

from zeus_cpp import _zeus  # noqa: E402
from zeus_cpp.device import get_gpus  # noqa: E402
from zeus_cpp.monitor import ZeusMonitor  # noqa: E402

TARGETS_US = {1: 1.0, 8: 2.0}
REFERENCE_US = {1: 3.1, 8: 9.2}


TIMER = time.process_time


def time_pair(monitor: ZeusMonitor, number: int, repeat: int) -> float:
    begin = monitor.begin_window
    end = monitor.end_window
    # Warm up (fills the monitor's window free list).
    for _ in range(1000):
        begin("step")
        end("step")

    def pair() -> None:
        begin("step")
        end("step")

    times = timeit.repeat(pair, number=number, repeat=repeat, timer=TIMER)
    return min(times) / number * 1e6


def time_device_read(gpu_count: int, number: int, repeat: int) -> float:
    gpus = get_gpus()
    read = gpus.get_total_energy_consumption

    def reads() -> None:
        for index in range(gpu_count):
            read(index)

    return min(timeit.repeat(reads, number=number, repeat=repeat, timer=TIMER)) / number * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=100_000, help="pairs per repeat")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--wall", action="store_true", help="wall-clock time, not CPU time")
    args = parser.parse_args()
    global TIMER
    if args.wall:
        TIMER = time.perf_counter

    results = {
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "simulated_gpus": os.environ["ZEUS_SIMULATED_GPUS"],
        "timer": "wall" if args.wall else "process_time",
        "pairs_us": {},
    }
    # The public ZeusMonitor on the process's simulated GPUs: each energy read takes the
    # simulated GPU's mutex and reads the steady clock to integrate its power.
    for gpu_count in (0, 1, 8):
        monitor = ZeusMonitor(gpu_indices=list(range(gpu_count)), cpu_indices=[],
                              sync_execution_with="torch")
        results["pairs_us"][gpu_count] = round(time_pair(monitor, args.number, args.repeat), 3)
    # The same native monitor on a zero-cost device (simulated GPUs on a frozen clock: a read is
    # a mutex and no clock read), as the reference's figures were taken.
    results["zero_cost_pairs_us"] = {}
    for gpu_count in (1, 8):
        monitor = _zeus.ZeusMonitor(None, [], False, None, None,
                                    _zeus._benchmark_gpus(gpu_count))
        results["zero_cost_pairs_us"][gpu_count] = round(
            time_pair(monitor, args.number, args.repeat), 3)
    # Windows shorter than the counter's refresh read 0 J on real GPUs, so the zero-energy path
    # (warnings.warn each window, as the reference; Python's default filter shows it once) is a
    # hot path too. The public ZeusMonitor class on zero-cost GPUs whose counter stands still,
    # against the same GPUs with a counter that moves on each read; repeats interleaved, so that
    # the ratio holds on a loaded machine.
    results["zero_energy_pairs_us"] = {}
    results["energy_pairs_us"] = {}
    results["zero_over_energy"] = {}
    for gpu_count in (1, 8):
        monitors = {}
        for label, tick_s in (("zero", 0.0), ("energy", 1e-3)):
            monitor = ZeusMonitor.__new__(ZeusMonitor)
            _zeus.ZeusMonitor.__init__(monitor, None, [], False, None, None,
                                       _zeus._benchmark_gpus(gpu_count, "h200", tick_s))
            monitor.approx_instant_energy = False
            monitors[label] = monitor
        best = {"zero": float("inf"), "energy": float("inf")}
        for _ in range(args.repeat):
            for label, monitor in monitors.items():
                best[label] = min(best[label], time_pair(monitor, args.number, 1))
        results["zero_energy_pairs_us"][gpu_count] = round(best["zero"], 3)
        results["energy_pairs_us"][gpu_count] = round(best["energy"], 3)
        results["zero_over_energy"][gpu_count] = round(best["zero"] / best["energy"], 2)
    # A pair whose Measurement's gpu_energy dict is then read (built on first access).
    monitor = ZeusMonitor(gpu_indices=[0], cpu_indices=[], sync_execution_with="torch")
    begin, end = monitor.begin_window, monitor.end_window

    def pair_and_dict() -> None:
        begin("step")
        end("step").gpu_energy

    results["pair_and_gpu_energy_1gpu_us"] = round(
        min(timeit.repeat(pair_and_dict, number=args.number, repeat=args.repeat, timer=TIMER))
        / args.number * 1e6, 3)
    # The device alone: one energy read of a simulated GPU through the GPUs object.
    results["gpu_read_via_python_us"] = round(time_device_read(1, args.number, args.repeat), 3)

    if args.json:
        print(json.dumps(results))
        return 0
    print(f"Python {results['python']} on {results['machine']}, "
          f"ZEUS_SIMULATED_GPUS={results['simulated_gpus']}")
    for label, key in (("simulated GPUs", "pairs_us"), ("zero-cost GPUs", "zero_cost_pairs_us")):
        for gpu_count, value in results[key].items():
            target = TARGETS_US.get(gpu_count)
            note = ""
            if target is not None:
                verdict = "meets" if value < target else "MISSES"
                note = (f"  (target < {target} µs: {verdict}; reference pure Python "
                        f"{REFERENCE_US[gpu_count]} µs)")
            print(f"begin+end pair, {gpu_count} {label}: {value:.3f} µs{note}")
    for gpu_count, value in results["zero_energy_pairs_us"].items():
        print(f"begin+end pair measuring 0 J (warning path), {gpu_count} zero-cost GPUs: "
              f"{value:.3f} µs; with energy {results['energy_pairs_us'][gpu_count]:.3f} µs; "
              f"ratio {results['zero_over_energy'][gpu_count]:.2f}")
    print(f"1 GPU pair + reading Measurement.gpu_energy: "
          f"{results['pair_and_gpu_energy_1gpu_us']:.3f} µs")
    print(f"GPUs.get_total_energy_consumption(0) from Python: "
          f"{results['gpu_read_via_python_us']:.3f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
