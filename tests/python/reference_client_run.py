"""One training run of the peer scenario, driven by the REAL reference client (one process).

Usage: reference_client_run.py REFERENCE_SRC SERVER_URL [--abort-after N] [--trace FILE]

REFERENCE_SRC is a checkout of ml-energy/zeus; its `zeus` package is imported as is (see
reference_stand_ins.py for what is stood in). Each run is its own interpreter so that the
client's `atexit` hook (PATCH /trials) fires exactly as it does at the end of a real training
script. Prints one JSON line: batch_size, trial_number, epochs, outcome ("c", "t" or "a"),
error (exception class name or null) and message.

With --abort-after N the run stops after reporting N epochs by raising an exception out of the
script, as a crashing training script would; the interpreter still runs the atexit hook.

With --trace FILE every exchange of the module-level httpx.get/post/patch functions (which the
client calls) is appended to FILE as one JSON line (bso_wire.record), atexit's PATCH included.
The client's code is not touched; only the httpx functions it looks up are wrapped.
"""

from __future__ import annotations

import argparse
import json
import sys


class SimulatedAbort(RuntimeError):
    pass


def trace_httpx(path: str) -> None:
    import httpx

    import bso_wire

    def traced(function):
        def call(*args, **kwargs):
            response = function(*args, **kwargs)
            with open(path, "a") as trace:
                trace.write(json.dumps(bso_wire.record(response)) + "\n")
            return response

        return call

    for name in ("get", "post", "patch"):
        setattr(httpx, name, traced(getattr(httpx, name)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("reference_src")
    parser.add_argument("server_url")
    parser.add_argument("--abort-after", type=int, default=0)
    parser.add_argument("--trace")
    args = parser.parse_args()
    if args.trace:
        trace_httpx(args.trace)

    import reference_stand_ins

    reference_stand_ins.install(args.reference_src)

    import bso_scenario
    from zeus.monitor import Measurement
    from zeus.optimizer.batch_size.client import BatchSizeOptimizer
    from zeus.optimizer.batch_size.common import JobSpec
    from zeus.optimizer.batch_size.exceptions import ZeusBSOTrainFailError

    monitor = reference_stand_ins.ScriptedMonitor(Measurement, gpu_indices=[0])
    bso = BatchSizeOptimizer(monitor, args.server_url, JobSpec(**bso_scenario.JOB_PARAMS))
    batch_size = bso.get_batch_size()
    workload = bso_scenario.WORKLOADS[batch_size]

    result = {
        "job_id": bso.job.job_id,
        "batch_size": batch_size,
        "trial_number": bso.trial_number,
        "epochs": 0,
        "outcome": None,
        "error": None,
        "message": None,
    }
    bso.on_train_begin()
    for epoch in range(1, bso_scenario.JOB_PARAMS["max_epochs"] + 1):
        monitor.run_epoch(workload.epoch_seconds, workload.watts)
        try:
            bso.on_evaluate(workload.metric(epoch))
        except ZeusBSOTrainFailError as error:
            result.update(outcome="t", error=type(error).__name__, message=str(error))
            break
        finally:
            result["epochs"] = bso.cur_epoch
        if bso.training_finished:
            result["outcome"] = "c"
            break
        if epoch == args.abort_after:
            result["outcome"] = "a"
            print(json.dumps(result), flush=True)
            raise SimulatedAbort(f"simulated abort after {epoch} epochs")
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    sys.exit(main())
