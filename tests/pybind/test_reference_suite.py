"""The reference's (ml-energy/zeus) own test files, run against zeus_cpp.

With ZEUS_REFERENCE_SRC naming a checkout of the reference, its tests/ directory is copied into
a temporary folder, a few lines are rewritten there (REWRITES: each one replaces a mock of the
reference's internals with our equivalent, and must still match, so a changed reference is
noticed), and the files of RUNS are run in pytest subprocesses with the plugin reference_shim.py,
which makes ``import zeus...`` import ``zeus_cpp...``. Each run gets its own simulated GPUs (GPUs
are discovered once per process). EXPECTED says, per file, how many tests must pass at least and
which tests by name; a regression in compatibility fails here. Files that cannot apply to zeus_cpp
are in NOT_RUN, tests in reference_shim's skip table, each with the reason. Nothing of the
reference is kept in this repository; without ZEUS_REFERENCE_SRC the tests skip.

See docs/python.md, "Running the reference's test suite".
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

import reference_shim  # noqa: E402


def _load_reference_checkout():
    """tests/python/reference_checkout.py (the ZEUS_REFERENCE_SRC lookup the other reference
    tests use), loaded by path: tests/python is not on this directory's import path."""
    import importlib.util

    path = REPO / "tests" / "python" / "reference_checkout.py"
    spec = importlib.util.spec_from_file_location("reference_checkout", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


reference_src = _load_reference_checkout().reference_src

RUN_TIMEOUT_S = 540

PLO = "tests/optimizer/test_power_limit_optimizer.py"
BSO_CLIENT = "tests/optimizer/batch_size/test_client.py"
BSO_SERVER = "tests/optimizer/batch_size/test_server.py"
BSO_CONFTEST = "tests/optimizer/batch_size/conftest.py"
STREAMING = "tests/monitor/test_power_streaming.py"
ZEUSD = "tests/utils/test_zeusd.py"
SOCKET = "tests/device/cpu/test_socket_detection.py"


@dataclass(frozen=True)
class Rewrite:
    """In `file`, replace `old` (which must occur) by `new`; `why` is what it adapts."""

    file: str
    old: str
    new: str
    why: str


REWRITES = [
    Rewrite(PLO, "import pynvml\n", "import pynvml\nimport reference_shim\n", "the shim's helpers"),
    Rewrite(
        PLO,
        'pynvml_mock = mocker.patch("zeus.device.gpu.nvidia.pynvml", autospec=True)',
        "pynvml_mock = reference_shim.simulated_nvml(mocker)",
        "zeus_cpp drives NVML from C++: the simulated GPUs' power-limit changes, read after each "
        "optimizer call, are recorded as the nvmlDeviceSetPowerManagementLimit calls",
    ),
    Rewrite(
        PLO,
        'mocker.patch("zeus.device.gpu.nvml_is_available", return_value=True)',
        "pass  # zeus_shim: simulated GPUs need no NVML probe",
        "patching the probe would change nothing: zeus_cpp picks the GPU library in C++, and the "
        "simulated GPUs are there without NVML",
    ),
    Rewrite(
        PLO,
        "gpu._disable_sys_admin_warning = True",
        "pass  # zeus_shim: no such private switch",
        "a private attribute of the reference's GPU classes",
    ),
    Rewrite(
        PLO,
        "get_gpus()._disable_sys_admin_warning = True",
        "pass  # zeus_shim: no such private switch",
        "a private attribute of the reference's GPUs class",
    ),
    Rewrite(
        BSO_CLIENT,
        "from pytest_mock import MockerFixture\n",
        "from pytest_mock import MockerFixture\nimport reference_shim\n",
        "the shim's helpers",
    ),
    Rewrite(
        BSO_CLIENT,
        'mock_monitor, "", job',
        "mock_monitor, reference_shim.bso_url(), job",
        "the reference routes the client's httpx calls into FastAPI's TestClient; our client "
        "speaks HTTP from C++, to our `zeus bso serve`",
    ),
    Rewrite(
        ZEUSD,
        "import httpx\n",
        "import httpx\nimport reference_shim\n",
        "the shim's helpers",
    ),
    Rewrite(
        ZEUSD,
        'monkeypatch.setattr(ZeusdConfig, "make_client", patched_make_client)',
        'monkeypatch.setattr(ZeusdConfig, "make_client", '
        "reference_shim.httpx_make_client(patched_make_client))",
        "our make_client returns a native transport; the test's httpx mock daemon is put behind it",
    ),
    Rewrite(
        ZEUSD,
        'monkeypatch.setattr(ZeusdConfig, "make_client", failing_make_client)',
        'monkeypatch.setattr(ZeusdConfig, "make_client", '
        "reference_shim.httpx_make_client(failing_make_client))",
        "as above",
    ),
    Rewrite(SOCKET, "    CONTAINER_RAPL_DIR,\n", "", "a private constant of the reference"),
    Rewrite(
        SOCKET,
        "    get_current_rapl_zone_id,\n)\n",
        "    get_current_rapl_zone_id,\n)\nimport reference_shim\n\n"
        'CONTAINER_RAPL_DIR = "/zeus_sys/class/powercap/intel-rapl"  # zeus_shim\n',
        "the reference's container mount of powercap, which ours also looks at",
    ),
    Rewrite(
        SOCKET,
        'patch("zeus.device.cpu.rapl.glob", side_effect=mock_glob),',
        "reference_shim.listdir_from_glob(mock_glob),",
        "ours lists the powercap folder with os.listdir where the reference globs it: the "
        "test's fake zones are listed through its glob replacement",
    ),
]


def bso_conftest(reference_text: str) -> str:
    """The reference's batch_size/conftest.py reduced to its `Helpers` class and `helpers`
    fixture (the job descriptions), with a `client` that talks to our `zeus bso serve` instead of
    FastAPI's TestClient over the reference's server and database."""
    tree = ast.parse(reference_text)
    lines = reference_text.splitlines()
    kept = []
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name in ("Helpers", "helpers"):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            kept.append("\n".join(lines[first - 1 : node.end_lineno]))
    if len(kept) != 2:
        pytest.fail(f"the reference's {BSO_CONFTEST} no longer defines Helpers and helpers")
    ours = '''

@pytest.fixture
def client(zeus_shim_bso_server):
    """zeus_shim: an httpx client of our `zeus bso serve` (one per test module)."""
    if zeus_shim_bso_server is None:
        pytest.fail("no BSO server for this module")
    with httpx.Client(base_url=zeus_shim_bso_server) as c:
        yield c
'''
    return "from __future__ import annotations\n\nimport httpx\nimport pytest\n\n\n" + (
        "\n\n\n".join(kept) + "\n" + ours
    )


@dataclass(frozen=True)
class Run:
    """One pytest subprocess: `files` on `gpus` simulated GPUs, replaying the profile logs of
    `profile_model`."""

    name: str
    gpus: str
    profile_model: str
    files: tuple


RUNS = [
    Run("v100", "2:v100", "V100", (PLO, STREAMING, ZEUSD, SOCKET)),
    # The reference's BSO client test mocks four GPUs of 300 W: four simulated A40s.
    Run("a40", "4:a40", "A40", (PLO, BSO_CLIENT, BSO_SERVER)),
]


@dataclass(frozen=True)
class Expect:
    """At least `passed` tests of the file pass in the run, `named` among them (test names
    without parameters match every parametrisation, which must all pass)."""

    passed: int
    named: tuple = field(default=())


EXPECTED = {
    ("v100", PLO): Expect(121, ("test_power_limit_optimizer", "test_HFGPLO_signature_equivalence")),
    ("a40", PLO): Expect(121, ("test_power_limit_optimizer", "test_HFGPLO_signature_equivalence")),
    # test_distributed_setting: a known difference (reference_shim.KNOWN_FAILURES).
    ("a40", BSO_CLIENT): Expect(3, ("test_register_job", "test_batch_sizes", "test_converge_fail")),
    ("a40", BSO_SERVER): Expect(8),
    ("v100", STREAMING): Expect(18),
    ("v100", ZEUSD): Expect(79),
    # test_get_current_rapl_zone_id_linux skips where the machine has no RAPL.
    ("v100", SOCKET): Expect(1, ("test_get_current_rapl_zone_id",)),
}

# Reference test files that are not run, and why.
NOT_RUN = {
    "tests/test_metric.py": "mocks prometheus_client's Histogram, multiprocessing and "
    "http.client inside zeus.metric; zeus_cpp pushes from C++ (tests/pybind/test_metric_push.py "
    "runs ours against a real Pushgateway)",
    "tests/test_skill_examples.py": "type-checks the reference's skills/*.md examples with `ty`",
    "tests/monitor/test_energy.py": "mocks pynvml's energy counters, time.time, PowerMonitor and "
    "the CPUs inside zeus.monitor.energy; zeus_cpp measures in C++ (tests/pybind/test_monitor.py "
    "covers these cases on simulated GPUs)",
    "tests/monitor/test_power.py": "imports the private infer_counter_update_period and mocks "
    "the GPUs inside zeus.monitor.power",
    "tests/monitor/test_carbon.py": "imports the reference's private Op and _polling_process "
    "(its polling subprocess); zeus_cpp.monitor.carbon has the public classes, tested in "
    "tests/pybind/test_carbon_monitor.py",
    "tests/monitor/test_price.py": "imports the reference's private Op and _polling_process "
    "(its polling subprocess) and mocks requests.get; zeus_cpp.monitor.price has the public "
    "classes, tested in tests/pybind/test_price_monitor.py (OpenEIClient against a local "
    "server)",
    "tests/optimizer/batch_size/test_explorer.py": "unit tests of the reference server's "
    "Python internals (zeus.optimizer.batch_size.server.explorer)",
    "tests/optimizer/batch_size/test_simulator.py": "the reference's legacy simulator "
    "(zeus._legacy) against its server's Python internals",
    "tests/device/gpu/test_amd.py": "mocks amdsmi inside zeus.device.gpu.amd; zeus_cpp loads "
    "AMD SMI in C++",
    "tests/device/cpu/test_rapl.py": "mocks the reference's RAPL file readers and their "
    "wraparound process; zeus_cpp reads RAPL in C++",
    "tests/device/cpu/test_emi.py": "zeus_cpp has no zeus.device.cpu.emi",
    "tests/device/soc/apple/test_apple.py": "zeus_cpp has no Apple silicon support",
    "tests/device/test_deprecated_alias.py": "imports the private DeprecatedAliasABCMeta",
    "tests/utils/test_env.py": "zeus_cpp has no zeus.utils.env (get_env)",
    "tests/utils/test_multiprocessing.py": "zeus_cpp has no zeus.utils.multiprocessing",
}


def _reference() -> Path:
    return reference_src(PLO, "the reference's own test suite", "docs/python.md")


@pytest.fixture(scope="module")
def reference_tree(tmp_path_factory) -> Path:
    """The reference's tests/ copied into a temporary folder, with REWRITES applied."""
    source = _reference() / "tests"
    root = tmp_path_factory.mktemp("reference-suite")
    shutil.copytree(source, root / "tests")
    for rewrite in REWRITES:
        path = root / rewrite.file
        text = path.read_text()
        if rewrite.old not in text:
            pytest.fail(
                f"{rewrite.file} in ZEUS_REFERENCE_SRC no longer contains {rewrite.old!r} "
                f"(rewrite: {rewrite.why}); update REWRITES in {Path(__file__).name}"
            )
        path.write_text(text.replace(rewrite.old, rewrite.new))
    conftest = root / BSO_CONFTEST
    conftest.write_text(bso_conftest(conftest.read_text()))
    return root


def test_every_reference_file_is_decided():
    """Each test file of the reference is run or listed in NOT_RUN with a reason."""
    source = _reference()
    files = {str(p.relative_to(source)) for p in (source / "tests").rglob("test_*.py")}
    run = {f for r in RUNS for f in r.files}
    undecided = sorted(files - run - set(NOT_RUN))
    assert not undecided, f"reference test files neither in RUNS nor in NOT_RUN: {undecided}"
    gone = sorted(run - files)
    assert not gone, f"files in RUNS that the reference no longer has: {gone}"


def _environment(run: Run, results: Path) -> dict:
    env = dict(os.environ)
    for name in (
        "CUDA_VISIBLE_DEVICES", "ZEUSD_SOCK_PATH", "ZEUSD_HOST_PORT", "ZEUSD_TOKEN",
        "ZEUS_POWERCAP_ROOT",
    ):  # fmt: skip
        env.pop(name, None)
    import zeus_cpp

    # This file's folder (the plugin) and the zeus_cpp that this session imports.
    python_path = [str(HERE), str(Path(zeus_cpp.__file__).resolve().parents[1])]
    env["PYTHONPATH"] = os.pathsep.join(python_path + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["ZEUS_SIMULATED_GPUS"] = run.gpus
    env["ZEUS_SHIM_PROFILE_MODEL"] = run.profile_model
    env["ZEUS_SHIM_RESULTS"] = str(results)
    env["ZEUS_SHIM_INSTALL"] = "1"
    if "ZEUS_CLI" not in env:
        from built_binaries import find_zeus_cli  # tests/support, on sys.path by conftest.py

        cli = find_zeus_cli()
        if cli is not None:
            env["ZEUS_CLI"] = str(cli)
    return env


def _outcomes(results: Path) -> dict:
    """{node id: "passed" | "failed" | "skipped"} from the shim's result lines."""
    outcomes: dict = {}
    for line in results.read_text().splitlines():
        report = json.loads(line)
        node, outcome = report["nodeid"], report["outcome"]
        if outcome == "failed" or outcomes.get(node) == "failed":
            outcomes[node] = "failed"
        elif report["when"] == "call" or outcome == "skipped":
            outcomes[node] = outcome
    return outcomes


@pytest.mark.parametrize("run", RUNS, ids=lambda r: r.name)
def test_reference_files(run: Run, reference_tree: Path, tmp_path: Path):
    results = tmp_path / "results.jsonl"
    results.touch()
    env = _environment(run, results)
    servers = {}
    for file in run.files:
        if file in (BSO_CLIENT, BSO_SERVER):
            if "ZEUS_CLI" not in env:
                pytest.skip("no zeus binary for the BSO tests: build it or set ZEUS_CLI")
            servers[file] = reference_shim.BsoServer(env["ZEUS_CLI"], tmp_path / Path(file).stem)
    env["ZEUS_SHIM_BSO_URLS"] = json.dumps({f: s.url for f, s in servers.items()})
    command = [
        sys.executable, "-m", "pytest", "-p", "reference_shim", "-p", "no:cacheprovider",
        "-q", "-rfE", "--rootdir", str(reference_tree), *run.files,
    ]  # fmt: skip
    try:
        process = subprocess.run(
            command, cwd=reference_tree, env=env, capture_output=True, text=True,
            timeout=RUN_TIMEOUT_S,
        )  # fmt: skip
    finally:
        stopped = {f: s.stop() for f, s in servers.items()}
    for file, status in stopped.items():
        assert status == 0, f"zeus bso serve of {file} exited {status}:\n{servers[file].log()}"
    where = f"{' '.join(command)} (in {reference_tree}, ZEUS_SIMULATED_GPUS={run.gpus})\n"
    tail = "\n".join(process.stdout.splitlines()[-60:]) + "\n" + process.stderr[-4000:]
    outcomes = _outcomes(results)
    problems = []
    for file in run.files:
        expect = EXPECTED[(run.name, file)]
        mine = {n: o for n, o in outcomes.items() if n.startswith(file + "::")}
        failed = sorted(n for n, o in mine.items() if o == "failed")
        if failed:
            problems.append(f"{file}: {len(failed)} failed: {failed[:10]}")
        passed = sum(1 for o in mine.values() if o == "passed")
        skipped = sum(1 for o in mine.values() if o == "skipped")
        print(f"{run.name}: {file}: {passed} passed, {skipped} skipped or xfailed, {len(failed)} failed")
        if passed < expect.passed:
            problems.append(f"{file}: {passed} passed, expected at least {expect.passed}")
        for name in expect.named:
            cases = {
                n: o for n, o in mine.items() if n.split("::")[-1].split("[")[0] == name
            }
            if not cases or any(o != "passed" for o in cases.values()):
                bad = sorted(n for n, o in cases.items() if o != "passed")[:5]
                problems.append(f"{file}::{name} must pass: {bad or 'not run'}")
    assert not problems, where + "\n".join(problems) + "\n" + tail


# Reference signatures that zeus_cpp's differ from, and why (reference_signatures.py).
SIGNATURE_DIFFERENCES = {
    "zeus_cpp.device.gpu.common.GPU.__init__": "built by get_gpus(), not by users",
    "zeus_cpp.device.gpu.common.GPUs.__init__": "built by get_gpus(), not by users",
    "zeus_cpp.device.cpu.common.CPU.__init__": "built by get_cpus(), not by users",
    "zeus_cpp.device.cpu.common.CPUs.__init__": "built by get_cpus(), not by users",
}
# Signatures that must stay exactly the reference's.
SAME_SIGNATURES = [
    "zeus_cpp.device.gpu.get_gpus",
    "zeus_cpp.device.cpu.get_cpus",
    "zeus_cpp.monitor.energy.ZeusMonitor.__init__",
    "zeus_cpp.monitor.energy.ZeusMonitor.begin_window",
    "zeus_cpp.monitor.energy.ZeusMonitor.end_window",
    "zeus_cpp.monitor.power.PowerMonitor.__init__",
    "zeus_cpp.optimizer.power_limit.GlobalPowerLimitOptimizer.__init__",
    "zeus_cpp.optimizer.power_limit.HFGlobalPowerLimitOptimizer.__init__",
    "zeus_cpp.optimizer.batch_size.client.BatchSizeOptimizer.__init__",
    "zeus_cpp.optimizer.batch_size.client.BatchSizeOptimizer.get_batch_size",
    "zeus_cpp.optimizer.batch_size.client.BatchSizeOptimizer.on_train_begin",
    "zeus_cpp.optimizer.batch_size.client.BatchSizeOptimizer.on_evaluate",
    "zeus_cpp.utils.testing.ReplayZeusMonitor.__init__",
    "zeus_cpp.monitor.price.EnergyCostMonitor.begin_window",
    "zeus_cpp.monitor.price.OpenEIClient.get_current_electricity_prices",
]
MIN_SAME_SIGNATURES = 120
MIN_COMPATIBLE_SIGNATURES = 130  # same + extended


def test_reference_signatures():
    """The reference's public functions and methods that zeus_cpp has take the same parameters
    (zeus_cpp may add optional ones), compared on the reference's source text."""
    import reference_signatures

    result = reference_signatures.compare_tree(_reference() / "zeus")
    print(
        f"signatures: {len(result.same)} same, {len(result.extended)} extended, "
        f"{len(result.different)} different, {len(result.no_signature)} without one (native)"
    )
    unexpected = {n: r for n, r in result.different.items() if n not in SIGNATURE_DIFFERENCES}
    assert not unexpected, f"signatures that differ from the reference's: {unexpected}"
    missing = [n for n in SAME_SIGNATURES if n not in result.same]
    assert not missing, f"no longer the reference's signature: {missing}"
    assert len(result.same) >= MIN_SAME_SIGNATURES, result.same
    assert len(result.same) + len(result.extended) >= MIN_COMPATIBLE_SIGNATURES
