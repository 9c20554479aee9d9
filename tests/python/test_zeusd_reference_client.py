"""Compatibility of our zeusd with the reference's (ml-energy/zeus) zeusd client code.

- test_reference_client_*: the REAL reference code, unmodified, imported from the checkout named
  by ZEUS_REFERENCE_SRC (its `ZEUSD_SOCK_PATH` path: `zeus.device.get_gpus()` with
  ZeusdNVIDIAGPU, `ZeusdClient`, `require_capabilities`, `PowerStreamingClient`). Skipped without
  ZEUS_REFERENCE_SRC.
- test_wire_*: need no reference. They send what that client sends (query strings, "true"/"false"
  booleans, comma-separated ids) over a Unix socket and check every field it parses.

Our daemon runs on two simulated A100s (100-400 W, graphics clocks 210-1410 MHz, memory clock
1593 MHz). The reference tests also cover locked-clock ranges that are not list members,
non-blocking writes and --gpu-command-overrides (a script records the commands' argv). See
docs/zeusd.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from reference_checkout import reference_src

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "zeusd_reference_run.py"
RUN_TIMEOUT_S = 120
RESTORE_DEADLINE_S = 1.0
MAX_POWER_MW = 400_000


def _reference_src() -> Path:
    return reference_src("zeus/utils/zeusd.py", "the real reference zeusd client", "docs/zeusd.md")


def _run_driver(reference: Path, scenario: str, socket_path: Path, token: str | None) -> dict:
    env = dict(os.environ)
    for name in ("CUDA_VISIBLE_DEVICES", "ZEUSD_HOST_PORT", "ZEUSD_TOKEN"):
        env.pop(name, None)
    env["ZEUSD_SOCK_PATH"] = str(socket_path)
    if token is not None:
        env["ZEUSD_TOKEN"] = token
    env["PYTHONPATH"] = str(HERE)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    command = [sys.executable, str(DRIVER), str(reference), scenario]
    process = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S
    )
    where = (
        f"{' '.join(command)}\nexit {process.returncode}\n"
        f"stdout:\n{process.stdout}\nstderr:\n{process.stderr}"
    )
    assert process.returncode == 0, where
    lines = process.stdout.strip().splitlines()
    assert lines, where
    return json.loads(lines[-1])


def _issue_token(zeusd_bin: Path, key: Path, sub: str, scopes: str) -> str:
    process = subprocess.run(
        [str(zeusd_bin), "token", "issue", "--signing-key-path", str(key), "--sub", sub,
         "--scopes", scopes],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert process.returncode == 0, process.stderr
    return process.stdout.strip().splitlines()[-1]


def _signing_key(directory: Path) -> Path:
    key = directory / "signing.key"
    key.write_bytes(os.urandom(32).hex().encode())
    key.chmod(0o600)
    return key


def _limits(client: httpx.Client) -> dict[str, int]:
    response = client.get("/gpu/get_power_limit")
    assert response.status_code == 200, response.text
    return {k: v["power_limit_mw"] for k, v in response.json().items()}


def _wait_for_limits(client: httpx.Client, expected: dict[str, int], seconds: float) -> float:
    """Seconds until the daemon reports `expected`; fails after `seconds`."""
    start = time.monotonic()
    while True:
        limits = _limits(client)
        if limits == expected:
            return time.monotonic() - start
        if time.monotonic() - start > seconds:
            pytest.fail(f"limits {limits} are not back to {expected} after {seconds} s")
        time.sleep(0.01)


# -- the real reference client -------------------------------------------------------------------


def test_reference_client_controls_gpus_and_its_settings_are_restored(zeusd_processes):
    reference = _reference_src()
    daemon = zeusd_processes.start()
    out = _run_driver(reference, "control", daemon.socket_path, token=None)

    assert out["gpu_ids"] == [0, 1]
    assert out["gpu_names"] == ["NVIDIA A100-SXM4-80GB"] * 2
    assert all(len(address.split(":")) == 3 for address in out["pci_addresses"])
    assert out["energy_available"] == [True, True]
    assert out["can"] == [True, True, True]
    assert out["auth_required"] is False
    assert out["constraints"] == {"0": [100_000, 400_000], "1": [100_000, 400_000]}
    # The reference picked its daemon-backed GPU class: our daemon passed its capability check.
    assert out["gpu_classes"] == ["ZeusdNVIDIAGPU", "ZeusdNVIDIAGPU"]
    assert out["limits"] == {"0": 250_000, "1": 300_000}
    assert out["persistence"] == {"0": True, "1": False}
    assert set(out["energy_mj"]) == {"0", "1"} and all(v >= 0 for v in out["energy_mj"].values())
    assert set(out["power_mw"]) == {"0", "1"} and all(v > 0 for v in out["power_mw"].values())
    assert abs(out["daemon_time_s"] - time.time()) < 60
    errors = out["errors"]
    assert errors["below_min"].startswith("ZeusdError: Failed to set_power_limit: ")
    assert "100000" in errors["below_min"] and "50000" in errors["below_min"]
    assert errors["unknown_gpu"].startswith("ZeusdError: Failed to set_power_limit: ")
    assert "7" in errors["unknown_gpu"]
    assert errors["unsupported_clock"].startswith("ZeusdError: Failed to set_mem_locked_clocks")
    assert "1593" in errors["unsupported_clock"]
    assert errors["inverted_clocks"].startswith("ZeusdError: Failed to set_gpu_locked_clocks")
    assert out["limits_at_exit"] == {"0": 250_000, "1": 300_000}
    streamed = out["streamed_gpu_power_w"]
    assert list(streamed) == [str(daemon.socket_path)]
    assert set(streamed[str(daemon.socket_path)]) == {"0", "1"}

    # The client process has exited without restoring: the daemon puts the limits back.
    with daemon.client() as client:
        _wait_for_limits(client, {"0": MAX_POWER_MW, "1": MAX_POWER_MW}, RESTORE_DEADLINE_S)
        persistence = client.get("/gpu/get_persistence_mode").json()
        assert {k: v["enabled"] for k, v in persistence.items()} == {"0": False, "1": False}
    # Every write is logged with the peer's credentials, and so is every restore.
    log = daemon.log()
    assert "GPU 0 power_limit_mw: 400000 -> 250000 (peer pid=" in log, log
    assert "restored GPU 0 power_limit" in log, log


def test_reference_client_ranges_and_nonblocking_writes(zeusd_processes):
    reference = _reference_src()
    daemon = zeusd_processes.start()
    out = _run_driver(reference, "ranges", daemon.socket_path, token=None)

    assert out["supports_nonblocking"] == [True, True]
    # block=false writes happened, after their 200.
    assert out["limits"] == {"0": 200_000, "1": MAX_POWER_MW}
    assert out["persistence"]["0"] is True
    errors = out["errors"]
    assert errors["outside_span"].startswith("ZeusdError: Failed to set_gpu_locked_clocks: ")
    assert "outside the supported range 210-1410 MHz" in errors["outside_span"]
    # Ours validates a non-blocking request before queueing it (the reference's daemon answers 200).
    assert "210-1410 MHz" in errors["outside_span_nonblocking"]
    assert errors["below_min_nonblocking"].startswith("ZeusdError: Failed to set_power_limit: ")
    assert "100000" in errors["below_min_nonblocking"]
    log = daemon.log()
    # Ranges whose bounds are not listed clocks went through as ranges.
    assert "GPU 0 gpu_locked_clocks_mhz: unknown -> 1000-1300" in log, log
    assert "GPU 1 mem_locked_clocks_mhz: unknown -> 1500-1700" in log, log
    assert "GPU 1 gpu_locked_clocks_mhz: unknown -> 300-400" in log, log


def test_reference_client_through_command_overrides(zeusd_processes, tmp_path):
    reference = _reference_src()
    record = tmp_path / "argv.log"
    script = tmp_path / "record.sh"
    script.write_text(f'#!/bin/sh\necho "$@" >> {record}\n')
    script.chmod(0o755)
    overrides = tmp_path / "overrides.toml"
    overrides.write_text(
        f'[set_power_limit]\ncommands = ["{script} pl {{gpu_id}} {{power_limit_mw}} '
        f'{{power_limit_w}}"]\n'
        f'[set_persistence_mode]\ncommands = ["{script} pm {{gpu_id}} {{enabled}}"]\n'
        f'[set_gpu_locked_clocks]\ncommands = ["{script} lgc {{gpu_id}} {{min_clock_mhz}} '
        f'{{max_clock_mhz}}"]\n'
        f'[reset_gpu_locked_clocks]\ncommands = ["{script} rgc {{gpu_id}}"]\n'
        f'[reset_mem_locked_clocks]\ncommands = ["false"]\ntimeout_s = 5\n'
    )
    overrides.chmod(0o600)
    daemon = zeusd_processes.start("--gpu-command-overrides", str(overrides))
    out = _run_driver(reference, "overrides", daemon.socket_path, token=None)

    # The commands did the writes: the simulated GPUs' own limits did not move.
    assert out["limits"] == {"0": MAX_POWER_MW, "1": MAX_POWER_MW}
    assert out["errors"]["failing_command"].startswith("ZeusdError: ")
    failing = out["errors"]["failing_command"]
    expected = "command override for reset_mem_locked_clocks on GPU 0: `false` exited with status 1"
    assert expected in failing, failing
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and "pl 0 400000 400" not in record.read_text():
        time.sleep(0.02)
    lines = record.read_text().splitlines()
    # The reference's placeholders, one argument each; then the restore after the client exited,
    # through the same override.
    # (GPU 0's non-blocking write and GPU 1's blocking one run on different workers: any order.)
    assert sorted(lines[:4]) == ["lgc 1 1000 1300", "pl 0 200000 200", "pm 0 1", "rgc 1"], lines
    assert lines.index("pl 0 200000 200") < lines.index("pm 0 1"), lines
    assert "pl 0 400000 400" in lines[4:], lines
    assert "GPU control through the commands of" in daemon.log()


def test_reference_client_auth_matrix(zeusd_processes, zeusd_bin, tmp_path):
    reference = _reference_src()
    key = _signing_key(tmp_path)
    daemon = zeusd_processes.start("--signing-key-path", str(key))

    no_token = _run_driver(reference, "auth", daemon.socket_path, token=None)
    assert no_token["auth_required"] is True
    assert "requires authentication" in no_token["auth_error"]
    assert no_token["require_control"].startswith("ZeusdAuthError")
    assert no_token["get_gpus"].startswith("ZeusGPUInitError")
    assert no_token["set_power_limit"].startswith("ZeusdError")
    assert "401" in no_token["set_power_limit"] or "token" in no_token["set_power_limit"].lower()

    bad = _run_driver(reference, "auth", daemon.socket_path, token="not.a.token")
    assert bad["auth_error"].startswith("Token rejected")

    read_only = _issue_token(zeusd_bin, key, "alice", "gpu-read")
    reader = _run_driver(reference, "auth", daemon.socket_path, token=read_only)
    assert reader["auth_error"] is None
    assert reader["granted_scopes"] == ["gpu-read"]
    assert reader["can"] == [True, False, False]
    assert reader["require_control"].startswith("ZeusdCapabilityError")
    assert "gpu-control" in reader["require_control"]
    assert reader["get_gpus"].startswith("ZeusGPUInitError")
    assert reader["power_limit"] == {"0": MAX_POWER_MW, "1": MAX_POWER_MW}
    assert reader["set_power_limit"].startswith("ZeusdError")
    assert "gpu-control" in reader["set_power_limit"]

    full = _issue_token(zeusd_bin, key, "bob", "gpu-control,gpu-read,cpu-read")
    controller = _run_driver(reference, "auth", daemon.socket_path, token=full)
    assert controller["auth_error"] is None
    assert controller["granted_scopes"] == ["cpu-read", "gpu-control", "gpu-read"]
    assert controller["require_control"] == "no error"
    assert controller["get_gpus"] == "no error"
    assert controller["set_power_limit"] == "no error"


# -- what the reference client sends, without the reference ------------------------------------


def test_wire_discover_and_reads_have_the_fields_the_reference_parses(zeusd_processes):
    daemon = zeusd_processes.start()
    with daemon.client() as client:
        discover = client.get("/discover").json()
        assert [gpu["id"] for gpu in discover["gpus"]] == [0, 1]
        for gpu in discover["gpus"]:
            assert isinstance(gpu["name"], str) and gpu["name"]
            assert isinstance(gpu["pci_address"], str)
            assert isinstance(gpu["cumulative_energy_available"], bool)
        for cpu in discover["cpus"]:
            assert isinstance(cpu["id"], int) and isinstance(cpu["dram_available"], bool)
        assert set(discover["enabled_api_groups"]) == {"gpu-control", "gpu-read", "cpu-read"}
        assert discover["auth_required"] is False

        energy = client.get("/gpu/get_cumulative_energy", params={"gpu_ids": "0,1"}).json()
        assert {int(k) for k in energy} == {0, 1}
        assert all(isinstance(v["energy_mj"], int) for v in energy.values())
        power = client.get("/gpu/get_power").json()
        assert isinstance(power["timestamp_ms"], int)
        assert {int(k) for k in power["power_mw"]} == {0, 1}
        constraints = client.get("/gpu/get_power_limit_constraints", params={"gpu_ids": "1"})
        assert constraints.json() == {
            "1": {"min_power_limit_mw": 100_000, "max_power_limit_mw": 400_000}
        }
        persistence = client.get("/gpu/get_persistence_mode").json()
        assert all(isinstance(v["enabled"], bool) for v in persistence.values())
        assert isinstance(client.get("/time").json()["timestamp_ms"], int)


def test_wire_setters_with_the_reference_query_strings(zeusd_processes):
    daemon = zeusd_processes.start()
    with daemon.client() as client:
        for params in (
            {"gpu_ids": "0", "power_limit_mw": "250000", "block": "true"},
            {"gpu_ids": "1", "power_limit_mw": "300000", "block": "false"},
        ):
            response = client.post("/gpu/set_power_limit", params=params)
            assert response.status_code == 200, response.text
        for path, params in (
            ("/gpu/set_persistence_mode", {"gpu_ids": "0,1", "enabled": "true", "block": "true"}),
            (
                "/gpu/set_gpu_locked_clocks",
                {"gpu_ids": "0", "min_clock_mhz": "210", "max_clock_mhz": "1005", "block": "true"},
            ),
            (
                "/gpu/set_mem_locked_clocks",
                {"gpu_ids": "1", "min_clock_mhz": "1593", "max_clock_mhz": "1593", "block": "true"},
            ),
            ("/gpu/reset_gpu_locked_clocks", {"gpu_ids": "0", "block": "true"}),
            ("/gpu/reset_mem_locked_clocks", {"gpu_ids": "1", "block": "true"}),
            ("/gpu/reset_locked_clocks", {"gpu_ids": "0,1", "block": "false"}),
        ):
            response = client.post(path, params=params)
            assert response.status_code == 200, f"{path}: {response.text}"
        # The non-blocking write to GPU 1 has landed once a blocking one on GPU 1 returns.
        client.post(
            "/gpu/set_persistence_mode", params={"gpu_ids": "1", "enabled": "true", "block": "true"}
        )
        assert _limits(client) == {"0": 250_000, "1": 300_000}

        # What the reference turns into ZeusdError: a non-200 status with a readable body.
        bad = client.post(
            "/gpu/set_power_limit",
            params={"gpu_ids": "0", "power_limit_mw": "50000", "block": "true"},
        )
        assert bad.status_code == 400 and "100000" in bad.text
        unknown = client.post(
            "/gpu/set_power_limit",
            params={"gpu_ids": "0", "power_limit_mw": "250000", "block": "yes", "extra": "1"},
        )
        assert unknown.status_code == 400


def test_wire_restores_what_an_exited_client_process_changed(zeusd_processes):
    daemon = zeusd_processes.start()
    script = (
        "import httpx, sys\n"
        "client = httpx.Client(transport=httpx.HTTPTransport(uds=sys.argv[1]))\n"
        "response = client.post('http://localhost/gpu/set_power_limit',"
        " params={'gpu_ids': '0,1', 'power_limit_mw': '150000', 'block': 'true'})\n"
        "assert response.status_code == 200, response.text\n"
    )
    subprocess.run([sys.executable, "-c", script, str(daemon.socket_path)], check=True, timeout=60)
    with daemon.client() as client:
        _wait_for_limits(client, {"0": MAX_POWER_MW, "1": MAX_POWER_MW}, RESTORE_DEADLINE_S)
