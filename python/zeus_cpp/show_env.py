"""``python -m zeus_cpp.show_env``: what zeus_cpp sees on this machine.

Prints, as the reference's ``python -m zeus.show_env`` does, the package and Python versions,
which frameworks are importable (and whether they see CUDA), the GPUs and CPU packages that
zeus_cpp's own device layer finds, and whether a zeusd daemon is configured. Every section is
computed with zeus_cpp's API, so what it prints is what a ``ZeusMonitor`` would measure. A
missing device is a line saying so, never a traceback: the exit status is 0 unless printing
itself fails.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from importlib import metadata
from typing import Callable, Dict, List, Optional, TextIO

import zeus_cpp
from zeus_cpp.utils import framework

_ENV_VARIABLES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ZEUS_SIMULATED_GPUS")
_ZEUSD_VARIABLES = ("ZEUSD_SOCK_PATH", "ZEUSD_HOST_PORT")


def _distribution_version(name: str) -> Optional[str]:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _torch_line() -> str:
    if not framework.torch_is_available(ensure_cuda=False):
        return "not installed"
    try:
        import torch
    except Exception as error:  # noqa: BLE001  (a broken install is worth a line, not a crash)
        return f"installed but fails to import ({type(error).__name__}: {error})"
    try:
        cuda = torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        cuda = False
    return f"{torch.__version__} ({'with' if cuda else 'without'} CUDA support)"


def _jax_line() -> str:
    if not framework.jax_is_available(ensure_cuda=False):
        return "not installed"
    try:
        import jax
    except Exception as error:  # noqa: BLE001
        return f"installed but fails to import ({type(error).__name__}: {error})"
    try:
        gpu = any(device.platform == "gpu" for device in jax.devices())
    except Exception:  # noqa: BLE001
        gpu = False
    return f"{jax.__version__} ({'with' if gpu else 'without'} CUDA support)"


def _cupy_line() -> str:
    if not framework.cupy_is_available(ensure_cuda=False):
        return "not installed"
    version = _distribution_version("cupy") or "unknown version"
    return f"{version} (installed)"


def _cpu_models() -> Dict[int, str]:
    """{physical package id: model name} from /proc/cpuinfo (empty where it cannot be read)."""
    models: Dict[int, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            text = cpuinfo.read()
    except OSError:
        return models
    for block in text.split("\n\n"):
        fields: Dict[str, str] = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip()] = value.strip()
        if "model name" not in fields:
            continue
        try:
            package = int(fields.get("physical id", "0"))
        except ValueError:
            package = 0
        models.setdefault(package, fields["model name"])
    return models


def _gpu_lines() -> List[str]:
    from zeus_cpp.device import get_gpus

    try:
        gpus = get_gpus()
    except Exception as error:  # noqa: BLE001  (e.g. a malformed ZEUS_SIMULATED_GPUS)
        return [f"  GPUs cannot be used: {type(error).__name__}: {error}"]
    if len(gpus) == 0:
        return [
            "  No GPU found (neither NVML nor AMD SMI reports one): GPU energy is not measured.",
            "  To try zeus_cpp without a GPU, set ZEUS_SIMULATED_GPUS=<count>[:<model>] "
            "(e.g. 4:h200).",
        ]
    lines = []
    for index in range(len(gpus)):
        parts = [f"  GPU {index}: {_safe(lambda: gpus.get_name(index))}"]
        parts.append(f"physical index {_safe(lambda: gpus.physical_index(index))}")
        limit = _safe(lambda: _watts(gpus.get_power_management_limit(index)))
        bounds = _safe(
            lambda: "-".join(
                _watts(value) for value in gpus.get_power_management_limit_constraints(index)
            )
        )
        parts.append(f"power limit {limit} W (range {bounds} W)")
        energy = _safe(lambda: "yes" if gpus.supports_get_total_energy_consumption(index) else "no")
        parts.append(f"energy counter {energy}")
        # What its figures cover (devices.md, "module scope"): a Grace superchip's NVML reports
        # GPU, CPU and memory together, which a CPU figure must not be added to.
        scope = _safe(lambda: gpus.get_energy_scope(index))
        parts.append("measures the whole module (GPU + CPU + memory of its superchip)"
                     if scope == "module" else f"measures scope {scope}")
        lines.append(", ".join(parts))
    return lines


def _cpu_lines() -> List[str]:
    from zeus_cpp.device import get_cpus

    try:
        cpus = get_cpus()
    except Exception as error:  # noqa: BLE001  (no RAPL, or no permission to read it)
        return [f"  CPU energy is not measured: {type(error).__name__}: {error}"]
    if len(cpus) == 0:
        return ["  No RAPL CPU package found: CPU energy is not measured."]
    models = _cpu_models()
    lines = []
    for index in cpus.indices:
        dram = _safe(lambda: cpus.supports_get_dram_energy_consumption(index))
        dram_text = {True: "with DRAM energy", False: "without DRAM energy"}.get(dram, dram)
        model = models.get(index, "unknown model")
        lines.append(f"  CPU {index}: {model} (RAPL package, {dram_text})")
    return lines


def _zeusd_lines() -> List[str]:
    configured = [(name, os.environ[name]) for name in _ZEUSD_VARIABLES if os.environ.get(name)]
    if not configured:
        return ["  not configured (ZEUSD_SOCK_PATH and ZEUSD_HOST_PORT unset): GPUs and CPUs "
                "are read and controlled directly by this process."]
    lines = [f"  {name}={value}: GPU settings go through zeusd there" for name, value in configured]
    # What the daemon itself says (the reference's report): discovery, auth, clock, capabilities.
    from zeus_cpp.utils.zeusd import ZeusdClient, ZeusdConfig

    try:
        config = ZeusdConfig.from_env()
        if config is None:
            return lines
        lines.append(f"  Endpoint: {config.endpoint}")
        client = ZeusdClient(config)
    except Exception as error:  # noqa: BLE001  (a report, not a failure)
        return lines + [f"  Error: {type(error).__name__}: {error}"]
    lines.append(f"  GPUs: {[(gpu.id, gpu.name) for gpu in client.gpus]}")
    lines.append(f"  CPU IDs: {client.cpu_ids} (DRAM available: {client.dram_available})")
    lines.append(f"  Auth required: {client.auth_required}")
    if client.auth_required:
        if client.auth_error is not None:
            lines.append(f"  Auth error: {client.auth_error}")
        else:
            lines.append(f"  Granted scopes: {sorted(client.granted_scopes)}")
    offsets = []
    try:
        for _ in range(5):
            before_s = time.time()
            daemon_s = client.get_time()
            after_s = time.time()
            offsets.append((before_s + after_s) / 2.0 - daemon_s)
        lines.append(f"  Clock offset: {statistics.median(offsets):+.4f} s (this host - daemon)")
    except Exception as error:  # noqa: BLE001
        lines.append(f"  Clock offset: unavailable ({type(error).__name__}: {error})")
    lines.append(
        f"  can_read_gpu: {client.can_read_gpu}, can_control_gpu: {client.can_control_gpu}, "
        f"can_read_cpu: {client.can_read_cpu}"
    )
    return lines


def _watts(milliwatts: object) -> str:
    return f"{float(milliwatts) / 1000.0:g}"  # type: ignore[arg-type]


def _safe(read: Callable[[], object]) -> object:
    """What `read` returns, or a short "unavailable (...)" text when the device refuses."""
    try:
        return read()
    except Exception as error:  # noqa: BLE001
        return f"unavailable ({type(error).__name__})"


def show_env(stream: Optional[TextIO] = None) -> None:
    """Prints the environment report to `stream` (default stdout)."""
    out = stream if stream is not None else sys.stdout
    lines = [
        f"zeus_cpp version: {getattr(zeus_cpp, '__version__', 'unknown')}",
        f"Python version: {platform.python_version()} ({sys.executable})",
        f"Platform: {platform.platform()}",
        "",
        "Package availability and versions:",
        f"  PyTorch: {_torch_line()}",
        f"  JAX: {_jax_line()}",
        f"  CuPy: {_cupy_line()}",
        "",
        "Environment:",
    ]
    lines += [f"  {name}={os.environ.get(name, '(unset)')}" for name in _ENV_VARIABLES]
    lines += ["", "GPU availability:"] + _gpu_lines()
    lines += ["", "CPU availability:"] + _cpu_lines()
    lines += ["", "zeusd:"] + _zeusd_lines()
    out.write("\n".join(lines) + "\n")
    out.flush()


def main() -> int:
    show_env()
    return 0


if __name__ == "__main__":
    sys.exit(main())
