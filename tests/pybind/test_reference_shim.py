"""The pieces of the reference-suite run that need no reference checkout: the zeus -> zeus_cpp
import alias and stand-ins (reference_shim.install), the recorder of power-limit changes that
stands in for the reference's NVML mock, and the signature comparison (reference_signatures)."""

from __future__ import annotations

import ast
import inspect
from unittest import mock

import pytest

import reference_shim
import reference_signatures
from plo_helpers import ScriptedMonitor


def test_the_alias_imports_the_same_modules(python_runner):
    code = """
import reference_shim
import zeus, zeus_cpp
import zeus.monitor, zeus_cpp.monitor
from zeus.optimizer.power_limit import GlobalPowerLimitOptimizer
from zeus_cpp.optimizer import power_limit
assert zeus is zeus_cpp and zeus.monitor is zeus_cpp.monitor
assert GlobalPowerLimitOptimizer is power_limit.GlobalPowerLimitOptimizer
try:
    import zeus.no_such_module
except ModuleNotFoundError as error:
    assert error.name == "zeus.no_such_module", error.name
else:
    raise AssertionError("zeus.no_such_module imported")
import pynvml, pytest_mock
assert hasattr(pynvml, "nvmlDeviceGetCount")
print("ok")
"""
    import os

    import zeus_cpp

    package_root = os.path.dirname(os.path.dirname(zeus_cpp.__file__))
    path = [os.path.dirname(reference_shim.__file__), package_root]
    env = {"ZEUS_SHIM_INSTALL": "1", "PYTHONPATH": os.pathsep.join(path)}
    assert python_runner(code, env=env).strip().endswith("ok")


def test_importing_the_module_installs_nothing():
    import sys

    assert not any(isinstance(f, reference_shim.ZeusAliasFinder) for f in sys.meta_path)
    for name in ("pynvml", "pytest_mock"):
        module = sys.modules.get(name)
        assert module is None or getattr(module, "__spec__", None) is not None, name


def test_simulated_nvml_records_the_optimizers_limit_changes():
    from zeus_cpp.device import get_gpus
    from zeus_cpp.optimizer.power_limit import Energy, GlobalPowerLimitOptimizer

    gpus = get_gpus()
    low, high = gpus.get_power_management_limit_constraints(0)
    before = [gpus.get_power_management_limit(i) for i in range(len(gpus))]
    mocker = reference_shim._MiniMocker()
    try:
        nvml = reference_shim.simulated_nvml(mocker)
        assert gpus.get_power_management_limit(0) == low  # so that the first limit is a change
        monitor = ScriptedMonitor(lambda watts: (1.0, float(watts)), gpu_indices=[0])
        plo = GlobalPowerLimitOptimizer(
            monitor, Energy(), wait_steps=0, warmup_steps=0, profile_steps=1, pl_step=25
        )
        for _ in range(20):
            plo.on_step_begin()
            plo.on_step_end()
        calls = nvml.nvmlDeviceSetPowerManagementLimit.call_args_list
        # The maximum first, then each lower limit once, then the optimum (the lowest energy).
        assert calls[0] == mock.call("handle0", high)
        limits = [c.args[1] for c in calls]
        assert limits[: len(range(high, low - 1, -25_000))] == list(range(high, low - 1, -25_000))
        assert all(c.args[0] == "handle0" for c in calls)
        plo.close()
    finally:
        mocker.stopall()
        for index, limit in enumerate(before):  # the process's GPUs are shared with other tests
            gpus.set_power_management_limit(index, limit)
    assert GlobalPowerLimitOptimizer.on_step_begin.__name__ == "on_step_begin"  # unpatched


def _function(source: str) -> ast.FunctionDef:
    return ast.parse(source).body[0]


@pytest.mark.parametrize(
    ("reference", "ours", "verdict"),
    [
        ("def f(a, b=1, *, c=None): ...", lambda a, b=1, *, c=None: None, "same"),
        ("def f(a, b=1): ...", lambda a, b=1, *, extra=2: None, "extended"),
        ("def f(a, b=1): ...", lambda a, b=2: None, "b defaults to 2, the reference's to 1"),
        ("def f(a, b): ...", lambda b, a: None, "positional parameters ['b', 'a'], the reference's ['a', 'b']"),
        ("def f(a): ...", lambda a, extra: None, "an extra required parameter extra"),
        ("def f(a, **kw): ...", lambda a: None, "no **kwargs"),
    ],
)
def test_signature_comparison(reference, ours, verdict):
    result = reference_signatures.compare(_function(reference), inspect.signature(ours), inspect)
    assert result == verdict
