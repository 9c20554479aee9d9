"""zeus_cpp.utils.framework.sync_execution behaves as the monitor's synchronisation does."""
import sys

import pytest

from zeus_cpp.utils import framework


@pytest.mark.parametrize("name", ["jax", "cupy", "torch"])
def test_a_missing_framework_raises_the_references_error(monkeypatch, name):
    monkeypatch.setitem(sys.modules, name, None)  # import fails as if not installed
    with pytest.raises(RuntimeError, match="No framework is available"):
        framework.sync_execution([0], sync_with=name)


def test_no_gpu_means_nothing_to_wait_for():
    # This machine's torch (when installed) has no CUDA: nothing happens, nothing raises.
    pytest.importorskip("torch")
    framework.sync_execution([0], sync_with="torch")


def test_an_unknown_framework_is_a_value_error():
    with pytest.raises(ValueError, match="sync_with"):
        framework.sync_execution([0], sync_with="tensorflow")
