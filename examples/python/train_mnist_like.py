#!/usr/bin/env python3
"""Train a small CNN on an MNIST-like data set with zeus_cpp measuring and optimising energy.

Everything is local and runs on the CPU: the data set (10 classes of noisy 14x14 glyphs) is
generated here, the GPUs are simulated (ZEUS_SIMULATED_GPUS, default one V100), and the batch
size comes from a `zeus bso serve` process: the one at --server-url, or one this script starts on
a temporary SQLite database. Each epoch is measured with ZeusMonitor; the power-limit optimizer's
hooks run at every step and epoch; the batch-size optimizer gets the validation accuracy after
every epoch and stops training once the target accuracy is reached.

    PYTHONPATH=build/py2/python /usr/bin/python3 examples/python/train_mnist_like.py \
        --server-url http://127.0.0.1:8000

Prints one line per epoch (time, energy, accuracy, power limit) and, last, one JSON line with the
summary (the tests read it). Exit status: 0 when the target accuracy was reached, 2 when the BSO
server stopped the trial (early stopping or max epochs: run the job again, with the same --job-id,
and the server tries another batch size), 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Simulated GPUs unless the caller chose (must be set before zeus_cpp discovers GPUs).
os.environ.setdefault("ZEUS_SIMULATED_GPUS", "1:v100")

REPO_ROOT = Path(__file__).resolve().parents[2]

try:
    import zeus_cpp  # noqa: F401
except ImportError:  # running from a source checkout: use a build tree's package
    for build in ("py2", "py1", "release"):
        candidate = REPO_ROOT / "build" / build / "python"
        if (candidate / "zeus_cpp").is_dir():
            sys.path.insert(0, str(candidate))
            break

import torch  # noqa: E402
from torch import nn  # noqa: E402

from zeus_cpp.callback import CallbackSet  # noqa: E402
from zeus_cpp.monitor import ZeusMonitor  # noqa: E402
from zeus_cpp.optimizer.batch_size.client import BatchSizeOptimizer  # noqa: E402
from zeus_cpp.optimizer.batch_size.common import JobSpec  # noqa: E402
from zeus_cpp.optimizer.batch_size.exceptions import ZeusBSOTrainFailError  # noqa: E402
from zeus_cpp.optimizer.power_limit import GlobalPowerLimitOptimizer, MaxSlowdownConstraint  # noqa: E402
from zeus_cpp.utils.lr_scaler import SquareRootScaler  # noqa: E402

IMAGE = 14
CLASSES = 10
NOISE = 0.5


def make_dataset(count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`count` noisy images of 10 fixed random glyphs (shifted by up to one pixel), and labels."""
    glyphs = torch.Generator().manual_seed(1234)  # the same classes for every split
    templates = (torch.rand(CLASSES, IMAGE, IMAGE, generator=glyphs) > 0.6).float()
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, CLASSES, (count,), generator=generator)
    images = templates[labels]
    shifts = torch.randint(-1, 2, (count, 2), generator=generator)
    images = torch.stack(
        [torch.roll(image, shifts=(int(dy), int(dx)), dims=(0, 1)) for image, (dy, dx) in zip(images, shifts)]
    )
    images = images + NOISE * torch.randn(images.shape, generator=generator)
    return images.unsqueeze(1), labels


class SmallCnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )  # fmt: skip
        self.classifier = nn.Linear(16 * (IMAGE // 4) * (IMAGE // 4), CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).flatten(1))


def find_zeus_cli() -> Path | None:
    configured = os.environ.get("ZEUS_CLI")
    if configured:
        return Path(configured)
    for build in ("py2", "py1", "release", "asan", "debug"):
        candidate = REPO_ROOT / "build" / build / "src" / "cli" / "zeus"
        if candidate.is_file():
            return candidate
    return None


def start_server(directory: Path) -> tuple[subprocess.Popen, str]:
    zeus = find_zeus_cli()
    if zeus is None:
        sys.exit("no --server-url and no zeus binary to start one (set ZEUS_CLI)")
    port_file = directory / "port"
    process = subprocess.Popen(
        [str(zeus), "bso", "serve", "--db", f"sqlite:///{directory / 'bso.db'}",
         "--host", "127.0.0.1", "--port", "0", "--port-file", str(port_file)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not (port_file.exists() and port_file.read_text().strip()):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            sys.exit("zeus bso serve did not start")
        time.sleep(0.02)
    return process, f"http://127.0.0.1:{int(port_file.read_text())}"


def evaluate(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        accuracy = (model(images).argmax(1) == labels).float().mean().item()
    model.train()
    return accuracy


def train(args: argparse.Namespace, server_url: str) -> dict:
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    train_images, train_labels = make_dataset(args.train_size, seed=args.seed)
    test_images, test_labels = make_dataset(500, seed=args.seed + 1)

    monitor = ZeusMonitor(gpu_indices=[0], cpu_indices=[])
    plo = GlobalPowerLimitOptimizer(
        monitor,
        optimum_selector=MaxSlowdownConstraint(factor=1.1),
        wait_steps=1,
        warmup_steps=1,
        profile_steps=2,
        pl_step=50,
    )
    bso = BatchSizeOptimizer(
        monitor,
        server_url,
        JobSpec(
            job_id=args.job_id,
            job_id_prefix="mnist-like",
            batch_sizes=[32, 64, 128],
            default_batch_size=64,
            target_metric=args.target_accuracy,
            max_epochs=args.max_epochs,
            mab_seed=1,
        ),
    )
    callbacks = CallbackSet([plo, bso])
    batch_size = bso.get_batch_size()
    lr = SquareRootScaler(bs=64, lr=0.01).compute_lr(batch_size)
    model = SmallCnn()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    print(f"job {bso.job.job_id}: batch size {batch_size}, learning rate {lr:.4f}, "
          f"power limits {[pl // 1000 for pl in plo.power_limits]} W", flush=True)  # fmt: skip

    epochs = []
    accuracy = 0.0
    failed = False
    callbacks.on_train_begin()
    for epoch in range(1, args.max_epochs + 1):
        callbacks.on_epoch_begin()
        monitor.begin_window("epoch")
        order = torch.randperm(len(train_images))
        for start in range(0, len(order), batch_size):
            index = order[start : start + batch_size]
            callbacks.on_step_begin()
            optimizer.zero_grad()
            loss = loss_fn(model(train_images[index]), train_labels[index])
            loss.backward()
            optimizer.step()
            callbacks.on_step_end()
        measurement = monitor.end_window("epoch")
        callbacks.on_epoch_end()
        accuracy = evaluate(model, test_images, test_labels)
        state = type(plo.state).__name__
        epochs.append({"epoch": epoch, "time": measurement.time, "energy": measurement.total_energy,
                       "accuracy": accuracy, "plo_state": state})  # fmt: skip
        print(f"epoch {epoch}: {measurement.time:.3f} s, {measurement.total_energy:.2f} J "
              f"(GPU 0), accuracy {accuracy:.3f}, power limit optimizer: {state}", flush=True)  # fmt: skip
        try:
            callbacks.on_evaluate(accuracy)
        except ZeusBSOTrainFailError as error:
            print(f"the BSO server stopped this trial: {error}", flush=True)
            failed = True
            break
        if bso.training_finished:
            break
    callbacks.on_train_end()
    summary = {
        "job_id": bso.job.job_id,
        "batch_size": batch_size,
        "epochs": epochs,
        "accuracy": accuracy,
        "reached_target": accuracy >= args.target_accuracy,
        "trial_failed": failed,
        "training_finished": bso.training_finished,
        "power_limits_w": [pl // 1000 for pl in plo.power_limits],
        "optimal_power_limit_w": None if plo.optimal_power_limit is None else plo.optimal_power_limit // 1000,
        "profiled": [{"power_limit": m.power_limit, "energy": m.energy, "time": m.time} for m in plo.measurements],
        "bso_energy": bso.consumed_energy,
        "bso_time": bso.running_time,
    }
    bso.close()
    plo.close()
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server-url", help="a running `zeus bso serve`; default: start one")
    parser.add_argument("--job-id", help="the recurring job's id (starts with 'mnist-like'); "
                        "default: the server assigns a new one")
    parser.add_argument("--target-accuracy", type=float, default=0.9)
    parser.add_argument("--max-epochs", type=int, default=10)
    parser.add_argument("--train-size", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    server = None
    with tempfile.TemporaryDirectory() as directory:
        server_url = args.server_url
        if server_url is None:
            server, server_url = start_server(Path(directory))
        try:
            summary = train(args, server_url)
        finally:
            if server is not None:
                server.send_signal(signal.SIGTERM)
                server.wait(timeout=30)
    print(json.dumps(summary), flush=True)
    if summary["reached_target"]:
        return 0
    # The server stopped the trial (early stopping or max epochs): an ordinary outcome while it
    # explores batch sizes; run the job again.
    return 2 if summary["trial_failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
