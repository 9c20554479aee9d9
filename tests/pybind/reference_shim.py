"""A pytest plugin that runs the reference's (ml-energy/zeus) own test files against zeus_cpp.

Loaded with ``-p reference_shim`` by tests/pybind/test_reference_suite.py in a pytest subprocess
whose rootdir is a temporary copy of the reference's tests/ directory. It installs, before any
reference conftest is imported:

- an import alias: ``zeus`` and every ``zeus.<path>`` resolve to the very module objects
  ``zeus_cpp`` and ``zeus_cpp.<path>`` (so ``mocker.patch("zeus.x.y")`` patches ours); a path we
  do not have stays a ModuleNotFoundError naming ``zeus.<path>``;
- a stand-in ``pynvml`` module when the real one is not installed: the NVML constants the tests
  name, and a function for any other ``nvml*`` name that raises (zeus_cpp loads NVML in C++,
  so these only need to exist for ``mocker.patch("pynvml.x")``);
- a small ``mocker`` fixture when pytest-mock is not installed (patch, patch.object, patch.dict,
  MagicMock; undone after each test);
- the skip table: reference tests that cannot apply to zeus_cpp, each with its reason
  (``SKIPPED_TESTS``, applied at collection);
- fixtures that the test-time rewrites (test_reference_suite.REWRITES) call:
  ``zeus_shim_simulated_nvml`` and ``zeus_shim_bso_url``.

Nothing of the reference is copied here: its files are read from ZEUS_REFERENCE_SRC at test
time, and the adaptations are the rewrites and skips named in docs/python.md ("Running the
reference's test suite").
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import types
from pathlib import Path
from unittest import mock

import pytest


class _AliasLoader(importlib.abc.Loader):
    """Hands out the already-imported zeus_cpp module for a zeus.* name."""

    def __init__(self, module: types.ModuleType) -> None:
        self._module = module

    def create_module(self, spec):
        return self._module

    def exec_module(self, module) -> None:
        pass  # already executed as zeus_cpp.*


class ZeusAliasFinder(importlib.abc.MetaPathFinder):
    """``zeus[.x.y]`` -> ``zeus_cpp[.x.y]`` (the same module objects)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "zeus" and not fullname.startswith("zeus."):
            return None
        target_name = "zeus_cpp" + fullname[len("zeus"):]
        try:
            module = importlib.import_module(target_name)
        except ModuleNotFoundError as error:
            if error.name is not None and error.name.startswith("zeus_cpp.") and (
                error.name == target_name or target_name.startswith(error.name + ".")
            ):
                return None  # we have no such module: "No module named 'zeus....'"
            raise
        spec = importlib.machinery.ModuleSpec(
            fullname, _AliasLoader(module), is_package=hasattr(module, "__path__")
        )
        if hasattr(module, "__path__"):
            spec.submodule_search_locations = list(module.__path__)
        return spec


# NVML constants the reference's tests read from pynvml (values as NVML's headers define them).
_NVML_CONSTANTS = {
    "NVML_DEVICE_ARCH_KEPLER": 2,
    "NVML_DEVICE_ARCH_MAXWELL": 3,
    "NVML_DEVICE_ARCH_PASCAL": 4,
    "NVML_DEVICE_ARCH_VOLTA": 5,
    "NVML_DEVICE_ARCH_TURING": 6,
    "NVML_DEVICE_ARCH_AMPERE": 7,
    "NVML_DEVICE_ARCH_ADA": 8,
    "NVML_DEVICE_ARCH_HOPPER": 9,
    "NVML_SUCCESS": 0,
    "NVML_ERROR_NOT_SUPPORTED": 3,
}


class _NvmlStandInError(Exception):
    pass


def _stand_in_pynvml() -> types.ModuleType:
    module = types.ModuleType("pynvml")
    module.__doc__ = "Stand-in for pynvml (not installed): zeus_cpp loads NVML in C++."
    module.__dict__.update(_NVML_CONSTANTS)
    module.NVMLError = _NvmlStandInError

    def missing(name: str):
        if not name.startswith("nvml"):
            raise AttributeError(name)

        def call(*args, **kwargs):
            raise _NvmlStandInError(f"pynvml stand-in: {name} is not implemented")

        call.__name__ = name
        setattr(module, name, call)
        return call

    module.__getattr__ = missing  # PEP 562: any nvml* name exists, for mocker.patch
    return module


def install() -> None:
    """The alias and the stand-ins, for this process. Only the reference-suite subprocesses
    (ZEUS_SHIM_INSTALL=1) do this: the test that starts them imports this module for BsoServer
    and must leave `zeus`, `pynvml` and `pytest_mock` unimportable in the tests/pybind process."""
    if not any(isinstance(finder, ZeusAliasFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, ZeusAliasFinder())
    try:
        import pynvml  # noqa: F401
    except ImportError:
        sys.modules["pynvml"] = _stand_in_pynvml()
    try:
        import pytest_mock  # noqa: F401
    except ImportError:
        # Some reference files import MockerFixture at module level (for annotations only).
        stand_in = types.ModuleType("pytest_mock")
        stand_in.MockerFixture = _MiniMocker
        sys.modules["pytest_mock"] = stand_in


# ---- mocker, when pytest-mock is not installed ----


class _Patch:
    def __init__(self, owner: "_MiniMocker") -> None:
        self._owner = owner

    def __call__(self, target, *args, **kwargs):
        return self._owner._start(mock.patch(target, *args, **kwargs))

    def object(self, target, attribute, *args, **kwargs):
        return self._owner._start(mock.patch.object(target, attribute, *args, **kwargs))

    def dict(self, in_dict, values=(), clear=False, **kwargs):
        return self._owner._start(mock.patch.dict(in_dict, values, clear, **kwargs))

    def multiple(self, target, **kwargs):
        return self._owner._start(mock.patch.multiple(target, **kwargs))


class _MiniMocker:
    """The part of pytest-mock's MockerFixture that the reference's tests use."""

    MagicMock = mock.MagicMock
    Mock = mock.Mock
    AsyncMock = mock.AsyncMock
    PropertyMock = mock.PropertyMock
    call = mock.call
    ANY = mock.ANY
    DEFAULT = mock.DEFAULT
    sentinel = mock.sentinel

    def __init__(self) -> None:
        self._patches: list = []
        self.patch = _Patch(self)

    def _start(self, patcher):
        started = patcher.start()
        self._patches.append(patcher)
        return started

    def stopall(self) -> None:
        while self._patches:
            self._patches.pop().stop()


if os.environ.get("ZEUS_SHIM_INSTALL") == "1":
    if importlib.util.find_spec("pytest_mock") is None:

        @pytest.fixture
        def mocker():
            """pytest-mock's fixture, the part the reference's tests use."""
            fixture = _MiniMocker()
            try:
                yield fixture
            finally:
                fixture.stopall()

    install()


# ---- the skip table ----

# (file, test name prefix or "" for every test of the file) -> why it cannot apply to zeus_cpp.
SKIPPED_TESTS: dict[tuple[str, str], str] = {}


# (file, test name prefix) -> a difference of zeus_cpp that makes the test fail. Marked as a
# strict xfail: the test still runs, and passing (the difference fixed) fails the run, so that
# the entry is removed and the test counted among those that must pass.
KNOWN_FAILURES: dict[tuple[str, str], str] = {
}



# ---- outcomes, for the test that runs this ----


def pytest_runtest_logreport(report) -> None:
    """Appends {nodeid, when, outcome} to the file ZEUS_SHIM_RESULTS names (one JSON a line)."""
    path = os.environ.get("ZEUS_SHIM_RESULTS")
    if path:
        with open(path, "a") as out:
            out.write(
                json.dumps({"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome})
                + "\n"
            )


# ---- which profile files this run replays ----

# The power-limit optimizer's profile cases need as many simulated GPUs as the log has columns,
# of the log's model (GPUs are discovered once per process): each pytest run replays the logs of
# one model, named by ZEUS_SHIM_PROFILE_MODEL (e.g. "A40"); the other cases are deselected.
PLO_FILE = "tests/optimizer/test_power_limit_optimizer.py"


def _deselect_other_models(config, items) -> None:
    model = os.environ.get("ZEUS_SHIM_PROFILE_MODEL")
    if not model:
        return
    keep, drop = [], []
    for item in items:
        if item.nodeid.startswith(PLO_FILE + "::test_power_limit_optimizer["):
            (keep if f"profile_data/{model}+" in item.nodeid else drop).append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_collection_modifyitems(config, items) -> None:
    _deselect_other_models(config, items)
    for item in items:
        file, _, name = item.nodeid.partition("::")
        for (skip_file, prefix), reason in SKIPPED_TESTS.items():
            if file == skip_file and name.startswith(prefix):
                item.add_marker(pytest.mark.skip(reason=f"zeus_cpp: {reason}"))
                break
        for (xfail_file, prefix), reason in KNOWN_FAILURES.items():
            if file == xfail_file and name.startswith(prefix):
                item.add_marker(pytest.mark.xfail(reason=f"zeus_cpp: {reason}", strict=True))
                break


# ---- the power-limit optimizer's NVML calls, observed on simulated GPUs ----


def simulated_nvml(mocker) -> mock.MagicMock:
    """Stands in for the reference's ``mocker.patch("zeus.device.gpu.nvidia.pynvml")``.

    Returns a MagicMock on which the test may set what it likes (GPU count, constraints: our
    simulated GPUs of the log's model already have them) and whose
    ``nvmlDeviceSetPowerManagementLimit`` records, as ``call("handle<i>", mW)``, every change of
    a simulated GPU's power limit that a GlobalPowerLimitOptimizer made: the GPUs' limits are read
    after the optimizer's constructor and after each of its hooks, and each GPU whose limit
    differs from the last reading is recorded, in index order. The reference's optimizer skips
    a call that would not change the limit, so its calls are exactly these changes. The GPUs
    start at their minimum limit, so that the optimizer's first limit (the maximum) is a change,
    as the reference's first NVML call is.
    """
    from zeus_cpp.device import get_gpus
    from zeus_cpp.optimizer import power_limit

    gpus = get_gpus()
    for index in range(len(gpus)):
        minimum, _ = gpus.get_power_management_limit_constraints(index)
        gpus.set_power_management_limit(index, minimum)
    last = {i: gpus.get_power_management_limit(i) for i in range(len(gpus))}
    nvml = mock.MagicMock(name="simulated pynvml")
    recorder = nvml.nvmlDeviceSetPowerManagementLimit

    def observe() -> None:
        for index in range(len(gpus)):
            now = gpus.get_power_management_limit(index)
            if now != last[index]:
                last[index] = now
                recorder(f"handle{index}", now)

    cls = power_limit.GlobalPowerLimitOptimizer
    for name in ("__init__", "on_step_begin", "on_step_end", "on_epoch_begin", "on_epoch_end"):
        original = getattr(cls, name)

        def observed(self, *args, __original=original, **kwargs):
            try:
                return __original(self, *args, **kwargs)
            finally:
                observe()

        mocker.patch.object(cls, name, observed)
    return nvml


# ---- the RAPL zone folders, listed as the reference's test globs them ----


def listdir_from_glob(glob_mock):
    """A ``mock.patch("os.listdir", ...)`` that lists a folder from the reference test's
    replacement of ``glob`` (zeus_cpp lists the powercap folder with os.listdir; the reference
    globs ``intel-rapl:*``). Other folders are listed for real."""
    real_listdir = os.listdir

    def listdir(folder="."):
        folder = os.fspath(folder).rstrip("/")
        names = [
            os.path.basename(path)
            for path in glob_mock(os.path.join(folder, "intel-rapl:*"))
            if os.path.dirname(path) == folder
        ]
        return names if names else real_listdir(folder)

    return mock.patch("os.listdir", side_effect=listdir)


# ---- our BSO server, for the reference's client and server tests ----


class BsoServer:
    """`zeus bso serve` (the `cli` binary) on a fresh SQLite database in `directory`, as the
    reference gives each test module a fresh database. The test that runs the reference's files
    starts one per BSO module and stops it after the pytest subprocess has exited (our client
    ends its trial at interpreter exit, which the reference's tests mock away)."""

    def __init__(self, cli: str, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        port_file = directory / "port"
        self.log_path = directory / "server.log"
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [cli, "bso", "serve", "--db", f"sqlite:///{directory / 'bso.db'}",
                 "--host", "127.0.0.1", "--port", "0", "--port-file", str(port_file)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while not port_file.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"zeus bso serve did not start:\n{self.log()}")
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{int(port_file.read_text())}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def _bso_urls() -> dict:
    """{test file relative to the rootdir: URL of its server} from ZEUS_SHIM_BSO_URLS."""
    return json.loads(os.environ.get("ZEUS_SHIM_BSO_URLS", "{}"))


_current_bso_url: str | None = None


def bso_url() -> str:
    """The URL of the `zeus bso serve` of the running test module."""
    if _current_bso_url is None:
        raise RuntimeError("no BSO server for this module (ZEUS_SHIM_BSO_URLS)")
    return _current_bso_url


@pytest.fixture(scope="module", autouse=True)
def zeus_shim_bso_server(request):
    """The module's BSO server URL, or None for modules that have none."""
    global _current_bso_url
    file = Path(str(request.fspath)).relative_to(request.config.rootpath).as_posix()
    _current_bso_url = _bso_urls().get(file)
    try:
        yield _current_bso_url
    finally:
        _current_bso_url = None


# ---- the reference's httpx mock daemon, behind our zeusd transport ----


class _HttpxTransport:
    """Our ZeusdConfig.make_client() result (``request(method, path_and_query)`` ->
    ``(status, body bytes)``) over the ``httpx.Client`` that a reference test's patched
    make_client builds on an ``httpx.MockTransport``."""

    def __init__(self, client, config) -> None:
        self._client = client
        self._config = config

    def request(self, method: str, path_and_query: str):
        import httpx

        from zeus_cpp.utils.zeusd import ZeusdConnectionError

        try:
            response = self._client.request(method, self._config.url(path_and_query))
        except httpx.TransportError as error:
            raise ZeusdConnectionError(str(error)) from error
        return response.status_code, response.content

    def close(self) -> None:
        self._client.close()


class _ConfigView:
    """A ZeusdConfig as a reference test's make_client sees it: with the reference's private
    ``_auth_headers()`` (the Bearer header of the token, which our native transport sends)."""

    def __init__(self, config) -> None:
        self._config = config

    def __getattr__(self, name):
        return getattr(self._config, name)

    def _auth_headers(self) -> dict:
        token = self._config.token
        return {"Authorization": f"Bearer {token}"} if token else {}


def httpx_make_client(patched):
    """Wraps a reference test's ``make_client(self)`` replacement (returning an httpx.Client)
    as our ``make_client(self, timeout_s=None)``."""

    def make_client(config, timeout_s=None):
        return _HttpxTransport(patched(_ConfigView(config)), config)

    return make_client
