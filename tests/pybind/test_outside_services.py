"""Hostile outside services against the Python API: a carbon or price service that trickles its
answer a byte at a time costs end_window the fetch's deadline, not forever; a BSO server that
trickles or sends a 4 GiB answer costs BatchSizeOptimizer a bounded time and memory
(docs/security.md, "Outside services")."""

from __future__ import annotations

import json
import os
import resource
import time

import pytest

os.environ.setdefault("ZEUS_SIMULATED_GPUS", "2:v100")

from local_http import NO_SYNC, HostileService  # noqa: E402
from zeus_cpp import _zeus  # noqa: E402
from zeus_cpp.exception import ZeusCarbonIntensityHTTPError  # noqa: E402
from zeus_cpp.monitor import ZeusMonitor  # noqa: E402
from zeus_cpp.monitor.carbon import CarbonEmissionMonitor, ElectricityMapsClient  # noqa: E402
from zeus_cpp.monitor.price import EnergyCostMonitor, OpenEIClient  # noqa: E402
from zeus_cpp.optimizer.batch_size.client import BatchSizeOptimizer  # noqa: E402
from zeus_cpp.optimizer.batch_size.common import JobSpec  # noqa: E402
from zeus_cpp.optimizer.batch_size.exceptions import ZeusBSORuntimError  # noqa: E402


@pytest.fixture
def trickle():
    service = HostileService("trickle")
    yield service
    service.stop()


@pytest.fixture
def huge():
    service = HostileService("huge")
    yield service
    service.stop()


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_carbon_end_window_against_a_trickling_service_ends_at_the_deadline(trickle):
    provider = ElectricityMapsClient(zone="DE", base_url=trickle.url + "/v3", total_timeout_s=1.5)
    monitor = CarbonEmissionMonitor(provider, **NO_SYNC)
    monitor.begin_window("w")
    start = time.monotonic()
    with pytest.raises(ZeusCarbonIntensityHTTPError, match="1.5 s deadline"):
        monitor.end_window("w")
    assert time.monotonic() - start < 6.0  # 1.5 s and a loaded machine's margin
    assert trickle.connections == 1  # not retried


def test_price_end_window_against_a_trickling_service_ends_at_the_deadline(trickle):
    provider = OpenEIClient((42.28, -83.74), "some-rate", api_key="key", base_url=trickle.url,
                            timezone_offset_hours=0.0, total_timeout_s=1.5, fallback=0.2)
    monitor = EnergyCostMonitor(provider, **NO_SYNC)
    monitor.begin_window("w")
    start = time.monotonic()
    measurement = monitor.end_window("w")  # the fallback price, once the deadline passed
    assert time.monotonic() - start < 6.0
    assert all(cost >= 0 for cost in measurement.gpu_energy_cost.values())
    assert "deadline" in provider.last_fallback_reason()


def job_json() -> str:
    spec = JobSpec(job_id_prefix="pytest", batch_sizes=[32, 64], default_batch_size=32,
                   target_metric=0.9, max_epochs=5, mab_seed=1)
    return json.dumps({**spec.dict(), "max_power": 1.0, "number_of_gpus": 1, "gpu_model": "x"})


def test_bso_client_against_a_trickling_server_ends_at_the_exchange_deadline(trickle):
    monitor = ZeusMonitor(gpu_indices=[0], cpu_indices=[])
    start = time.monotonic()
    with pytest.raises(ZeusBSORuntimError, match="deadline"):
        _zeus._BatchSizeOptimizer(monitor, trickle.url, job_json(), max_attempts=3, timeout=0.5)
    assert time.monotonic() - start < 6.0  # 3 x 0.5 s for the one attempt, not retried
    assert trickle.connections == 1


def test_bso_client_against_a_huge_answer_reads_at_most_its_cap(huge):
    monitor = ZeusMonitor(gpu_indices=[0], cpu_indices=[])
    before = peak_rss_mib()
    start = time.monotonic()
    with pytest.raises(ZeusBSORuntimError, match="over 16777216 bytes"):
        BatchSizeOptimizer(monitor, huge.url, JobSpec(
            job_id_prefix="pytest", batch_sizes=[32, 64], default_batch_size=32,
            target_metric=0.9, max_epochs=5, mab_seed=1))
    assert time.monotonic() - start < 10.0
    # The service sent 256 MiB before closing; the client kept at most its 16 MiB cap.
    assert peak_rss_mib() - before < 100
    assert huge.connections == 1  # not retried
