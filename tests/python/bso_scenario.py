"""The peer scenario of docs/bso-wire-protocol.md §5, shared by the BSO wire tests.

One fake H200 (max power 700 W), batch sizes 16..1024 with default 128, eta 0.5, beta 2,
target metric 0.9, at most 30 epochs, 2 pruning rounds. Every batch size has a synthetic,
deterministic workload; run 2 is aborted after 3 epochs. Each run is summarised as
"<batch size>:<outcome><epochs>" with outcome c (converged), t (the server stopped a run that
did not converge) or a (aborted by the client).
"""

from __future__ import annotations

from dataclasses import dataclass

JOB_ID_PREFIX = "peer"
JOB_ID = "peer-bso-compat"
GPU_MODEL = "NVIDIA H200"
GPU_MAX_POWER_MW = 700_000
GPU_MIN_POWER_MW = 200_000

# The user-facing job parameters (the reference's `JobSpec`, without the GPU fields).
JOB_PARAMS = {
    "job_id": JOB_ID,
    "job_id_prefix": JOB_ID_PREFIX,
    "batch_sizes": [16, 32, 64, 128, 256, 512, 1024],
    "default_batch_size": 128,
    "eta_knob": 0.5,
    "beta_knob": 2.0,
    "target_metric": 0.9,
    "higher_is_better_metric": True,
    "max_epochs": 30,
    "num_pruning_rounds": 2,
    "window_size": 0,
    "mab_prior_mean": 0.0,
    "mab_prior_precision": 0.0,
    "mab_num_explorations": 2,
    "mab_seed": 123456,
}

RUNS = 14
ABORTED_RUN = 2  # 1-based
ABORT_AFTER_EPOCHS = 3

EXPECTED_SEQUENCE = [
    "128:c10",
    "64:a3",
    "64:c8",
    "32:t8",
    "256:c16",
    "512:t30",
    "128:c10",
    "64:c8",
    "256:c16",
] + ["128:c10"] * 5

# 1-based run numbers whose client raises ZeusBSOTrainFailError, with a substring of the message.
EXPECTED_TRAIN_FAILURES = {
    4: "cost upper bound",
    6: "Train failed to converge within max_epoch",
}


@dataclass(frozen=True)
class Workload:
    """What one epoch of training costs on one GPU at a batch size."""

    epoch_seconds: float
    watts: float
    epochs_to_target: int | None  # None: never reaches the target

    def metric(self, epoch: int) -> float:
        """Validation metric after `epoch` (1-based) epochs: 0.92 once at target, else below 0.9."""
        if self.epochs_to_target is not None and epoch >= self.epochs_to_target:
            return 0.92
        horizon = self.epochs_to_target or 10
        return round(0.5 + 0.35 * min(epoch, horizon) / horizon, 6)


WORKLOADS = {
    16: Workload(40.0, 200.0, 50),
    32: Workload(24.0, 250.0, 30),
    64: Workload(14.0, 300.0, 8),
    128: Workload(8.0, 400.0, 10),
    256: Workload(5.0, 550.0, 16),
    512: Workload(3.5, 650.0, None),
    1024: Workload(2.5, 690.0, None),
}


def max_power_watts(number_of_gpus: int = 1) -> float:
    """What the reference client sends as max_power: NVML max limit (mW) // 1000 per GPU."""
    return float(GPU_MAX_POWER_MW // 1000 * number_of_gpus)


def summary(batch_size: int, outcome: str, epochs: int) -> str:
    return f"{batch_size}:{outcome}{epochs}"
