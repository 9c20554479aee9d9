#!/usr/bin/env python3
"""The load `zeus sensor-probe` measures a real GPU's sensor under (scripts/device-check.sh).

Runs, on one CUDA GPU through PyTorch, spans of known load and logs each one to --out as CSV
(kind,start_s,end_s,period_s; times from time.monotonic(), the clock zeus reads as its steady
clock): an idle span, short bursts at random times (is power sampled all the time?), a step from
idle to busy (how fast do the readings follow?) and square waves of several periods (do counter and
polled power agree?). Busy means back-to-back bf16 matrix products, checked against the clock
after each one, so that a span ends within a fraction of a millisecond of its target.
"""
import argparse
import random
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the load log to write")
    parser.add_argument("--device", type=int, default=0, help="the CUDA device (default 0)")
    parser.add_argument("--bursts", type=int, default=60, help="how many bursts (default 60)")
    parser.add_argument("--burst-ms", type=float, default=20.0, help="burst length (default 20)")
    parser.add_argument("--square-s", type=float, default=5.0, help="seconds per square wave")
    parser.add_argument(
        "--periods-ms",
        default="10,20,50,100,200,500,2000",
        help="square-wave periods in ms (default 10,20,50,100,200,500,2000)",
    )
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("gpu_load.py: PyTorch is not installed", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("gpu_load.py: PyTorch sees no CUDA GPU", file=sys.stderr)
        return 3
    device = torch.device("cuda", args.device)
    size = 4096  # one product is about 0.2 ms on an H100-class GPU: fine steps of load
    a = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    b = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    out = torch.empty(size, size, device=device, dtype=torch.bfloat16)
    rows = []

    def busy_until(end: float) -> None:
        while time.monotonic() < end:
            torch.matmul(a, b, out=out)
            torch.cuda.synchronize(device)

    def busy_for(seconds: float):
        start = time.monotonic()
        busy_until(start + seconds)
        return start, time.monotonic()

    def idle_until(end: float) -> None:
        left = end - time.monotonic()
        if left > 0:
            time.sleep(left)

    busy_for(1.0)  # warm up: clocks, cuBLAS's kernel choice
    start = time.monotonic() + 0.5
    idle_until(start + 3.0)
    rows.append(("idle", start, time.monotonic(), 0.0))

    rng = random.Random(29)
    for _ in range(args.bursts):
        idle_until(time.monotonic() + rng.uniform(0.35, 0.6))
        begin, end = busy_for(args.burst_ms / 1000.0)
        rows.append(("burst", begin, end, 0.0))

    start = time.monotonic() + 0.5
    idle_until(start + 2.0)
    rows.append(("idle", start, time.monotonic(), 0.0))
    begin, end = busy_for(4.0)
    rows.append(("step", begin, end, 0.0))

    for period_ms in (float(p) for p in args.periods_ms.split(",")):
        period = period_ms / 1000.0
        idle_until(time.monotonic() + 1.0)
        begin = time.monotonic()
        cycles = max(1, round(args.square_s / period))
        for cycle in range(cycles):
            cycle_start = begin + cycle * period
            busy_until(cycle_start + period / 2)
            idle_until(cycle_start + period)
        rows.append(("square", begin, time.monotonic(), period))
    idle_until(time.monotonic() + 0.5)

    with open(args.out, "w", encoding="utf-8") as log:
        log.write("kind,start_s,end_s,period_s\n")
        for kind, begin, end, period in rows:
            log.write(f"{kind},{begin:.6f},{end:.6f},{period:.6f}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
