"""`python -m zeus_cpp.show_env`: run in a subprocess on simulated GPUs and on none."""

from __future__ import annotations

import subprocess
import sys
from typing import Dict, Optional

from conftest import subprocess_env
from zeusd_daemon import daemons  # noqa: F401  (the fixture)


def run_module(args: list, env: Optional[Dict[str, Optional[str]]] = None,
               timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], env=subprocess_env(env), capture_output=True,
                          text=True, timeout=timeout)


def test_show_env_lists_simulated_gpus() -> None:
    result = run_module(["zeus_cpp.show_env"], {"ZEUS_SIMULATED_GPUS": "3:a100",
                                               "CUDA_VISIBLE_DEVICES": None})
    assert result.returncode == 0, result.stderr
    out = result.stdout
    import zeus_cpp

    assert f"zeus_cpp version: {zeus_cpp.__version__}" in out
    assert "Python version: " in out
    assert "PyTorch: " in out and "JAX: " in out and "CuPy: " in out
    assert "ZEUS_SIMULATED_GPUS=3:a100" in out
    assert "CUDA_VISIBLE_DEVICES=(unset)" in out
    gpu_lines = [line for line in out.splitlines() if line.startswith("  GPU ")]
    assert len(gpu_lines) == 3, out
    assert gpu_lines[0].startswith("  GPU 0: NVIDIA A100")
    assert "physical index 0" in gpu_lines[0] and "power limit " in gpu_lines[0]
    assert "energy counter yes" in gpu_lines[2]
    assert "measures scope gpu" in gpu_lines[2]
    assert "CPU availability:" in out and "zeusd:" in out
    assert "Traceback" not in result.stderr


def test_show_env_says_a_superchip_measures_its_whole_module() -> None:
    """A Grace Hopper's NVML reports GPU + CPU + memory (docs/devices.md, module scope)."""
    result = run_module(["zeus_cpp.show_env"], {"ZEUS_SIMULATED_GPUS": "1:h200:module"})
    assert result.returncode == 0, result.stderr
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("  GPU ")]
    assert "measures the whole module (GPU + CPU + memory of its superchip)" in line


def test_show_env_without_gpus_says_so_and_exits_0() -> None:
    result = run_module(["zeus_cpp.show_env"], {"ZEUS_SIMULATED_GPUS": None})
    assert result.returncode == 0, result.stderr
    # This machine may have a real GPU; the report then lists it instead.
    if "  GPU 0:" not in result.stdout:
        assert "No GPU found" in result.stdout


def test_show_env_with_a_malformed_simulation_reports_the_error() -> None:
    result = run_module(["zeus_cpp.show_env"], {"ZEUS_SIMULATED_GPUS": "bogus"})
    assert result.returncode == 0, result.stderr
    assert "GPUs cannot be used: ZeusGPUInvalidArgError" in result.stdout
    assert "Traceback" not in result.stderr


def test_show_env_reports_a_configured_zeusd() -> None:
    result = run_module(["zeus_cpp.show_env"], {"ZEUSD_SOCK_PATH": None,
                                               "ZEUSD_HOST_PORT": None})
    assert "zeusd:\n  not configured" in result.stdout
    with_zeusd = run_module(["zeus_cpp.show_env"], {"ZEUSD_SOCK_PATH": "/nonexistent/zeusd.sock",
                                                   "ZEUS_SIMULATED_GPUS": "1:v100"})
    assert with_zeusd.returncode == 0, with_zeusd.stderr
    assert "ZEUSD_SOCK_PATH=/nonexistent/zeusd.sock" in with_zeusd.stdout


def test_show_env_asks_a_running_zeusd(daemons) -> None:  # noqa: F811
    """With ZEUSD_SOCK_PATH set, the report says what the daemon itself answers (its GPUs, auth,
    clock offset, capabilities), as the reference's show_env does."""
    daemon = daemons(auth=True)
    token = daemon.token("gpu-read", "cpu-read")
    result = run_module(["zeus_cpp.show_env"], {"ZEUSD_SOCK_PATH": str(daemon.socket_path),
                                               "ZEUSD_TOKEN": token, "ZEUSD_HOST_PORT": None,
                                               "ZEUS_SIMULATED_GPUS": "2:a100"})  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"  Endpoint: {daemon.socket_path}" in out, out
    assert "  GPUs: [(0, 'NVIDIA A100" in out, out
    assert "  Auth required: True" in out and "  Granted scopes: ['cpu-read', 'gpu-read']" in out
    assert "  Clock offset: " in out and " s (this host - daemon)" in out
    assert "can_read_gpu: True, can_control_gpu: False, can_read_cpu: True" in out, out

    bad = run_module(["zeus_cpp.show_env"], {"ZEUSD_SOCK_PATH": str(daemon.socket_path),
                                            "ZEUSD_TOKEN": "not-a-token", "ZEUSD_HOST_PORT": None,
                                            "ZEUS_SIMULATED_GPUS": "2:a100"})  # fmt: skip
    assert bad.returncode == 0, bad.stderr
    assert "  Auth error: " in bad.stdout, bad.stdout
    assert "can_read_gpu: False" in bad.stdout


def test_show_env_reports_an_unreachable_zeusd_without_failing(tmp_path) -> None:
    result = run_module(["zeus_cpp.show_env"], {"ZEUSD_SOCK_PATH": str(tmp_path / "none.sock"),
                                               "ZEUSD_HOST_PORT": None,
                                               "ZEUS_SIMULATED_GPUS": "1:v100"})  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "  Error: ZeusdConnectionError: " in result.stdout, result.stdout
    assert "Traceback" not in result.stderr
