"""sync_execution_with naming a framework that is not installed raises as the reference does.

The reference constructs the monitor, then raises ``RuntimeError("No framework is available.")``
from every window call that synchronises GPUs. A framework is made absent by putting None in
``sys.modules`` (``import`` then raises ImportError), so the tests hold with it installed too.
"""

from __future__ import annotations

import sys

import pytest

from zeus_cpp.monitor import ZeusMonitor
from zeus_cpp.monitor._sync import resolve_sync_hook

FRAMEWORKS = ["jax", "torch", "cupy"]


@pytest.fixture(params=FRAMEWORKS)
def absent(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setitem(sys.modules, request.param, None)
    return request.param


def test_hook_raises_the_references_error(absent: str) -> None:
    hook = resolve_sync_hook(absent)
    assert hook is not None
    with pytest.raises(RuntimeError, match=r"^No framework is available\."):
        hook([0])


def test_monitor_constructs_then_window_raises(absent: str) -> None:
    monitor = ZeusMonitor(cpu_indices=[], sync_execution_with=absent)
    assert monitor.sync_with == absent
    with pytest.raises(RuntimeError, match=rf"No framework is available.*{absent}"):
        monitor.begin_window("w")
    assert monitor.open_windows() == []
    # Not synchronising, the window works.
    monitor.begin_window("quiet", sync_execution=False)
    with pytest.raises(RuntimeError, match="No framework is available"):
        monitor.end_window("quiet")
    monitor.begin_window("quiet", sync_execution=False)
    assert monitor.end_window("quiet", sync_execution=False).time >= 0.0


def test_no_gpu_never_synchronises(absent: str) -> None:
    monitor = ZeusMonitor(gpu_indices=[], cpu_indices=[], sync_execution_with=absent)
    monitor.begin_window("w")
    assert monitor.end_window("w").gpu_energy == {}


def test_jax_absent_by_default_here() -> None:
    try:
        import jax  # noqa: F401
    except ImportError:
        monitor = ZeusMonitor(cpu_indices=[], sync_execution_with="jax")
        with pytest.raises(RuntimeError, match="No framework is available"):
            monitor.begin_window("w")
    else:
        pytest.skip("jax is installed")
