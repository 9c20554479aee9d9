"""The wheel installed with pip --no-index into a fresh venv, used from outside the repository with
no PYTHONPATH: the package imports from the venv and measures simulated GPUs, the example training
loop runs, the `zeus` console script runs the shipped CLI (exec'd: same process, same exit code),
and uninstalling leaves the venv as it was. The venv sees the system's site-packages only for
numpy and torch (this machine cannot download them); the tests run in file order, uninstall last.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Set

import pytest

from conftest import REPO, clean_environment, run


class Venv:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "bin"
        self.python = self.bin / "python"
        self.site = Path(run([str(self.python), "-c", "import sysconfig; "
                              "print(sysconfig.get_paths()['platlib'])"]).stdout.strip())

    def files(self) -> Set[str]:
        """Every path under the venv but the interpreter's caches."""
        return {path.relative_to(self.root).as_posix() for path in self.root.rglob("*")
                if "__pycache__" not in path.parts}


def system_python() -> str:
    # The interpreter the release build's extension is for; a venv of it has the same ABI.
    return "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


@pytest.fixture(scope="module")
def outside(tmp_path_factory) -> Path:
    """A working directory outside the repository (no zeus_cpp/ beside it)."""
    folder = tmp_path_factory.mktemp("outside")
    assert not folder.resolve().is_relative_to(REPO)
    return folder


@pytest.fixture(scope="module")
def venv(wheel: Path, outside: Path, tmp_path_factory) -> Venv:
    root = tmp_path_factory.mktemp("venv") / "env"
    created = run([system_python(), "-m", "venv", "--system-site-packages", str(root)],
                  env=clean_environment())
    if created.returncode != 0:
        pytest.skip(f"python3 -m venv failed (Debian: apt-get install python3-venv): "
                    f"{created.stderr.strip()}")
    environment = Venv(root)
    shadow = run([str(environment.python), "-c", "import zeus_cpp; print(zeus_cpp.__file__)"],
                 env=clean_environment(), cwd=outside)
    assert shadow.returncode != 0, (
        f"a zeus_cpp is already importable outside the venv ({shadow.stdout.strip()}): it would "
        "shadow the installed wheel; uninstall it first")
    environment.before = environment.files()  # type: ignore[attr-defined]
    installed = run([str(environment.python), "-m", "pip", "install", "--no-index", str(wheel)],
                    env=clean_environment(), cwd=outside)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return environment


def python(venv: Venv, code: str, outside: Path, **extra: str) -> subprocess.CompletedProcess:
    return run([str(venv.python), "-c", code], env=clean_environment(**extra), cwd=outside)


def test_imports_from_the_venv_and_measures_simulated_gpus(venv: Venv, outside: Path) -> None:
    result = python(venv, (
        "import json, zeus_cpp, zeus_cpp._zeus as native\n"
        "from zeus_cpp.monitor import ZeusMonitor\n"
        "monitor = ZeusMonitor(cpu_indices=[], sync_execution_with=lambda index: None)\n"
        "monitor.begin_window('w')\n"
        "sum(range(100000))\n"
        "m = monitor.end_window('w')\n"
        "print(json.dumps({'file': zeus_cpp.__file__, 'native': native.__file__,\n"
        "                  'gpus': sorted(m.gpu_energy), 'time': m.time}))\n"),
        outside, ZEUS_SIMULATED_GPUS="2:h200")
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert Path(found["file"]).is_relative_to(venv.site), found
    assert Path(found["native"]).is_relative_to(venv.site), found
    assert found["gpus"] == [0, 1] and found["time"] > 0


def test_the_descriptions_example_runs(venv: Venv, outside: Path) -> None:
    """The Python example of the wheel's own long description (wheel-description.md)."""
    text = (REPO / "packaging" / "python" / "wheel-description.md").read_text()
    example = text.split("```python\n", 1)[1].split("```", 1)[0]
    result = python(venv, example, outside, ZEUS_SIMULATED_GPUS="1:h200")
    assert result.returncode == 0, result.stderr
    time_s, energy = map(float, result.stdout.split())
    assert time_s > 0 and energy >= 0


def test_the_extension_loads_the_shipped_libraries(venv: Venv, outside: Path) -> None:
    result = python(venv, "import zeus_cpp; print(open('/proc/self/maps').read())", outside)
    assert result.returncode == 0, result.stderr
    mapped = {line.split()[-1] for line in result.stdout.splitlines() if ".so" in line}
    libs = str(venv.site / "zeus_cpp.libs")
    assert any(path.startswith(libs + "/libspdlog-") for path in mapped), mapped
    for name in ("libspdlog.so", "libfmt.so", "libcpp-httplib.so", "libssl.so"):
        assert not any(Path(path).name.startswith(name) for path in mapped), (name, mapped)


def test_the_training_example_runs(venv: Venv, outside: Path) -> None:
    if run([str(venv.python), "-c", "import torch"], env=clean_environment()).returncode != 0:
        pytest.skip("torch is not installed (Debian: python3-torch)")
    example = outside / "train_mnist_like.py"
    shutil.copy(REPO / "examples" / "python" / "train_mnist_like.py", example)
    result = run([str(venv.python), str(example), "--max-epochs", "3", "--train-size", "500",
                  "--target-accuracy", "0.2"],
                 env=clean_environment(ZEUS_SIMULATED_GPUS="1:v100",
                                       ZEUS_CLI=str(venv.bin / "zeus")),
                 cwd=outside, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["reached_target"] and summary["batch_size"] > 0
    assert summary["epochs"][0]["energy"] > 0 and summary["bso_energy"] > 0


def zeus(venv: Venv, arguments: List[str], outside: Path, **extra: str):
    return run([str(venv.bin / "zeus"), *arguments],
               env=clean_environment(ZEUS_SIMULATED_GPUS="2:h200", **extra), cwd=outside)


def test_zeus_show_env(venv: Venv, outside: Path) -> None:
    result = zeus(venv, ["show-env", "--json"], outside)
    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout)["gpus"]) == 2


def test_zeus_monitor_runs_a_command_in_the_same_process(venv: Venv, outside: Path) -> None:
    """The console script execs the CLI: the command's parent is the process pip's script started,
    and the command's exit code comes back."""
    process = subprocess.Popen(
        [str(venv.bin / "zeus"), "monitor", "--", str(venv.python), "-c",
         "import os, sys; print('parent', os.getppid()); sys.exit(3)"],
        env=clean_environment(ZEUS_SIMULATED_GPUS="2:h200"), cwd=outside,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 3, stderr
    assert f"parent {process.pid}" in stdout, stdout + stderr


def test_zeus_exit_code_for_bad_usage(venv: Venv, outside: Path) -> None:
    result = zeus(venv, ["sim", "--no-such-option"], outside)
    assert result.returncode == 2, result.stderr


def test_zeus_sim_and_report(venv: Venv, outside: Path) -> None:
    result = zeus(venv, ["sim", "--gpu", "v100", "--workload", "cifar100", "--seeds", "1",
                         "--recurrences", "5", "--out", str(outside / "sim")], outside)
    assert result.returncode == 0, result.stderr
    report = outside / "report.html"
    result = zeus(venv, ["report", str(outside / "sim"), "--out", str(report)], outside)
    assert result.returncode == 0, result.stderr
    assert "Chart.js v" in report.read_text()


def wait_for_port(path: Path, process: subprocess.Popen) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        time.sleep(0.05)
    raise AssertionError(f"no port in {path}")


def serve_and_fetch(venv: Venv, outside: Path, arguments: List[str], url_path: str) -> str:
    import urllib.error
    import urllib.request

    port_file = outside / f"port-{arguments[0]}"
    process = subprocess.Popen([str(venv.bin / "zeus"), *arguments, "--port", "0",
                                "--port-file", str(port_file)],
                               env=clean_environment(ZEUS_SIMULATED_GPUS="2:h200"), cwd=outside,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        port = wait_for_port(port_file, process)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{url_path}", timeout=10) as reply:
                return f"{reply.status} {reply.read().decode()}"
        except urllib.error.HTTPError as error:
            return f"{error.code} {error.read().decode()}"
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_zeus_bso_serve_on_sqlite(venv: Venv, outside: Path) -> None:
    body = serve_and_fetch(venv, outside,
                           ["bso", "serve", "--db", f"sqlite:///{outside / 'bso.db'}",
                            "--host", "127.0.0.1"], "/jobs/no-such-job")
    # The server's own answer for an unknown job (the reference's shape), from SQLite.
    assert body.startswith("404 ") and "no-such-job" in body, body


def test_zeus_exporter(venv: Venv, outside: Path) -> None:
    body = serve_and_fetch(venv, outside, ["exporter", "--interval", "100ms"], "/metrics")
    assert "zeus_gpu_energy_joules_total" in body


def test_postgresql_is_refused_with_what_to_do(venv: Venv, outside: Path) -> None:
    result = zeus(venv, ["bso", "serve", "--db", "postgresql://nobody@127.0.0.1:1/none"], outside)
    assert result.returncode != 0
    assert "without PostgreSQL support" in result.stderr and "sqlite:///" in result.stderr


def system_copies(stems: Set[str]) -> List[str]:
    """The files of this machine's own copies of the shipped libraries."""
    found: Set[str] = set()
    for folder in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"):
        for stem in stems:
            for path in Path(folder).glob(f"{stem}.so*"):
                if path.exists():
                    found.add(str(path.resolve()))
    return sorted(found)


def test_runs_with_the_build_libraries_hidden(venv: Venv, outside: Path) -> None:
    """In a private mount namespace, this machine's copies of the shipped libraries are replaced
    by empty files (a Linux without the build's libraries, as far as the wheel can tell), and the
    CLI, the console script and the package still work. Python's own libraries (libz) stay."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a private mount namespace")
    stems = {path.name.rsplit("-", 1)[0] for path in (venv.site / "zeus_cpp.libs").iterdir()}
    python_needs = run(["ldd", os.path.realpath(venv.python)]).stdout
    everything = system_copies(stems)
    beside_python = [path for path in everything
                     if Path(path).name.split(".so")[0] + ".so" not in python_needs]
    assert any("libspdlog" in path for path in everything), everything
    script = "\n".join([
        "set -e",
        *(f"mount --bind /dev/null {path}" for path in everything),
        f"{venv.site}/zeus_cpp/_bin/zeus show-env --json > /dev/null",
        *(f"umount {path}" for path in everything if path not in beside_python),
        f"{venv.bin}/zeus show-env --json > /dev/null",
        f"{venv.python} -c 'import zeus_cpp.monitor as m; "
        "w = m.ZeusMonitor(cpu_indices=[], sync_execution_with=lambda i: None); "
        "w.begin_window(\"a\"); print(sorted(w.end_window(\"a\").gpu_energy))'",
        # the hiding worked: the system's spdlog cannot be loaded any more
        f"! {venv.python} -c 'import ctypes; ctypes.CDLL(\"libspdlog.so.1.10\")' 2>/dev/null",
    ])
    result = run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                 env=clean_environment(ZEUS_SIMULATED_GPUS="2:h200"), cwd=outside)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[0, 1]"


def test_uninstall_leaves_nothing_behind(venv: Venv, outside: Path) -> None:
    result = run([str(venv.python), "-m", "pip", "uninstall", "-y", "zeus-cpp"],
                 env=clean_environment(), cwd=outside)
    assert result.returncode == 0, result.stdout + result.stderr
    left = venv.files() - venv.before  # type: ignore[attr-defined]
    assert left == set(), sorted(left)
    gone = venv.before - venv.files()  # type: ignore[attr-defined]
    assert gone == set(), sorted(gone)
    assert python(venv, "import zeus_cpp", outside).returncode != 0
    assert not (venv.bin / "zeus").exists()
    assert os.environ.get("ZEUS_WHEEL")
