"""Runs the reference's (ml-energy/zeus) own zeusd client code, unmodified, against our zeusd.

Usage: zeusd_reference_run.py REFERENCE_SRC SCENARIO

The daemon is found the way the reference finds it: ZEUSD_SOCK_PATH (and ZEUSD_TOKEN) in the
environment. The last line of stdout is a JSON object with what the client saw; the test
(test_zeusd_reference_client.py) checks it, and checks the daemon's side over its own connection.

Scenarios:
- control: `zeus.device.get_gpus()` picks the reference's ZeusdNVIDIAGPU for every GPU and sets
  power limits, persistence mode and locked clocks through our daemon; `ZeusdClient` reads
  everything back; bad requests raise the reference's ZeusdError with our message;
  `PowerStreamingClient` receives our SSE power stream. The process then exits without
  restoring anything (the daemon must).
- auth: what the client sees of a daemon that requires tokens, with the token in ZEUSD_TOKEN
  (possibly none).
- ranges: locked-clock ranges whose bounds are not listed clocks (NVML takes ranges), a range
  outside the supported span, and non-blocking writes, valid and invalid.
- overrides: the daemon runs --gpu-command-overrides commands (the test's script records their
  argv); the client's setters, blocking and not, and a failing command.

NVML is the stand-in of reference_stand_ins.py with two GPUs shaped like the daemon's simulated
A100s: the reference reads locally through NVML and sends only the setters to the daemon.
"""

from __future__ import annotations

import json
import os
import sys
import time

import reference_stand_ins

# The daemon's simulated A100 (src/device/simulated_gpu.cpp).
GPU_NAME = "NVIDIA A100-SXM4-80GB"
MIN_POWER_MW = 100_000
MAX_POWER_MW = 400_000


class TwoGpuNvml(reference_stand_ins.FakeNvml):
    """Two local GPUs whose limits never change locally: the daemon owns the real state."""

    def __init__(self) -> None:
        super().__init__()
        self.device_count = 2

    def nvmlDeviceGetName(self, handle: int) -> str:
        return GPU_NAME

    def nvmlDeviceGetPowerManagementLimitConstraints(self, handle: int) -> list[int]:
        return [MIN_POWER_MW, MAX_POWER_MW]

    def nvmlDeviceGetPowerManagementLimit(self, handle: int) -> int:
        return MAX_POWER_MW

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle: int) -> int:
        return MAX_POWER_MW


def _error(call) -> str:
    """The message of the exception `call()` raises, prefixed with its class name."""
    try:
        call()
    except Exception as error:  # noqa: BLE001 - the class is what the test checks
        return f"{type(error).__name__}: {error}"
    return "no error"


def control(out: dict) -> None:
    from zeus.device import get_gpus
    from zeus.monitor.power_streaming import PowerStreamingClient
    from zeus.utils.zeusd import ZeusdClient, ZeusdConfig

    client = ZeusdClient()
    out["gpu_ids"] = client.gpu_ids
    out["gpu_names"] = [gpu.name for gpu in client.gpus]
    out["pci_addresses"] = [gpu.pci_address for gpu in client.gpus]
    out["energy_available"] = [gpu.cumulative_energy_available for gpu in client.gpus]
    out["can"] = [client.can_read_gpu, client.can_control_gpu, client.can_read_cpu]
    out["auth_required"] = client.auth_required
    out["constraints"] = {str(k): list(v) for k, v in client.get_power_limit_constraints().items()}

    gpus = get_gpus()
    out["gpu_classes"] = [type(gpu).__name__ for gpu in gpus.gpus]
    gpus.set_power_management_limit(0, 250_000)
    gpus.set_power_management_limit(1, 300_000, block=False)
    gpus.set_persistence_mode(0, True)
    gpus.set_gpu_locked_clocks(0, 210, 1005)
    gpus.set_memory_locked_clocks(1, 1593, 1593)
    # block=false returns before the write; a blocking write to the same GPU queues behind it.
    gpus.set_persistence_mode(1, False)

    out["limits"] = {str(k): v for k, v in client.get_power_limit().items()}
    out["persistence"] = {str(k): v for k, v in client.get_persistence_mode().items()}
    out["energy_mj"] = {str(k): v for k, v in client.get_gpu_energy([0, 1]).items()}
    out["power_mw"] = {str(k): v for k, v in client.get_gpu_power().power_mw.items()}
    out["daemon_time_s"] = client.get_time()

    out["errors"] = {
        "below_min": _error(lambda: client.set_power_limit([0], 50_000)),
        "unknown_gpu": _error(lambda: client.set_power_limit([7], 200_000)),
        "unsupported_clock": _error(lambda: client.set_mem_locked_clocks([0], 1000, 1000)),
        "inverted_clocks": _error(lambda: client.set_gpu_locked_clocks([0], 1005, 210)),
    }
    gpus.reset_gpu_locked_clocks(0)
    gpus.reset_memory_locked_clocks(1)
    client.reset_locked_clocks([0, 1])
    out["limits_at_exit"] = {str(k): v for k, v in client.get_power_limit().items()}

    streaming = PowerStreamingClient(servers=[ZeusdConfig.uds(os.environ["ZEUSD_SOCK_PATH"])])
    try:
        deadline = time.monotonic() + 10.0
        readings: dict = {}
        while time.monotonic() < deadline:
            readings = {
                endpoint: {str(k): v for k, v in reading.gpu_power_w.items()}
                for endpoint, reading in streaming.get_power().items()
                if reading.gpu_power_w
            }
            if readings:
                break
            time.sleep(0.05)
        out["streamed_gpu_power_w"] = readings
    finally:
        streaming.stop()


def auth(out: dict) -> None:
    from zeus.device import get_gpus
    from zeus.utils.zeusd import ZeusdClient, require_capabilities

    client = ZeusdClient()
    out["auth_required"] = client.auth_required
    out["auth_error"] = client.auth_error
    out["granted_scopes"] = sorted(client.granted_scopes)
    out["can"] = [client.can_read_gpu, client.can_control_gpu, client.can_read_cpu]
    out["require_control"] = _error(lambda: require_capabilities(client, control_gpu=True))
    out["get_gpus"] = _error(get_gpus)
    if client.can_read_gpu:
        out["power_limit"] = {str(k): v for k, v in client.get_power_limit().items()}
    out["set_power_limit"] = _error(lambda: client.set_power_limit([0], 200_000))


def ranges(out: dict) -> None:
    from zeus.device import get_gpus
    from zeus.utils.zeusd import ZeusdClient

    client = ZeusdClient()
    gpus = get_gpus()
    # The simulated A100 lists 1410 MHz down to 210 in 15 MHz steps: 1000 and 1300 are not listed.
    gpus.set_gpu_locked_clocks(0, 1000, 1300)
    gpus.set_memory_locked_clocks(1, 1500, 1700)  # around the one memory clock, 1593
    # Non-blocking: the reference client sends block=false; the daemon answers once queued.
    gpus.set_power_management_limit(0, 200_000, block=False)
    gpus.set_persistence_mode(0, True, block=False)
    gpus.set_gpu_locked_clocks(1, 300, 400, block=False)
    out["supports_nonblocking"] = [gpu.supports_nonblocking_setters for gpu in gpus.gpus]
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and (
        client.get_power_limit().get(0) != 200_000 or not client.get_persistence_mode().get(0)
    ):
        time.sleep(0.02)
    out["limits"] = {str(k): v for k, v in client.get_power_limit().items()}
    out["persistence"] = {str(k): v for k, v in client.get_persistence_mode().items()}
    out["errors"] = {
        "outside_span": _error(lambda: client.set_gpu_locked_clocks([0], 100, 200)),
        "outside_span_nonblocking": _error(
            lambda: client.set_gpu_locked_clocks([0], 100, 200, block=False)
        ),
        "below_min_nonblocking": _error(lambda: client.set_power_limit([0], 50_000, block=False)),
    }
    gpus.reset_gpu_locked_clocks(0)
    gpus.reset_memory_locked_clocks(1)
    gpus.reset_gpu_locked_clocks(1, block=False)


def overrides(out: dict) -> None:
    from zeus.device import get_gpus
    from zeus.utils.zeusd import ZeusdClient

    client = ZeusdClient()
    gpus = get_gpus()
    gpus.set_power_management_limit(0, 200_000)
    gpus.set_gpu_locked_clocks(1, 1000, 1300)
    gpus.set_persistence_mode(0, True, block=False)
    gpus.reset_gpu_locked_clocks(1)
    out["limits"] = {str(k): v for k, v in client.get_power_limit().items()}
    out["errors"] = {"failing_command": _error(lambda: gpus.reset_memory_locked_clocks(0))}


def main() -> None:
    reference_src, scenario = sys.argv[1], sys.argv[2]
    reference_stand_ins.install(reference_src)
    sys.modules["pynvml"] = TwoGpuNvml()
    out: dict = {"scenario": scenario}
    {"control": control, "auth": auth, "ranges": ranges, "overrides": overrides}[scenario](out)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
