"""The type stub of the native module (python/zeus_cpp/_zeus.pyi) names only what exists.

Every class and every method or property the stub declares must exist on the compiled
``zeus_cpp._zeus`` module, so that a stub entry cannot outlive (or precede) its binding.
"""
import ast
from pathlib import Path

import zeus_cpp._zeus as native

STUB = Path(__file__).resolve().parents[2] / "python" / "zeus_cpp" / "_zeus.pyi"


def declared():
    tree = ast.parse(STUB.read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            members = [
                item.name
                for item in node.body
                if isinstance(item, ast.FunctionDef) and not item.name.startswith("__")
            ]
            yield node.name, members
        elif isinstance(node, ast.FunctionDef):
            yield node.name, None


def test_every_stub_entry_exists_in_the_native_module():
    missing = []
    for name, members in declared():
        if not hasattr(native, name):
            missing.append(name)
            continue
        for member in members or []:
            if not hasattr(getattr(native, name), member):
                missing.append(f"{name}.{member}")
    assert not missing, f"declared in _zeus.pyi but not bound: {missing}"


def test_the_in_process_policy_is_declared():
    names = dict(declared())
    assert "_BatchSizePolicy" in names
    for member in ("next", "report", "fail", "cost_threshold", "save", "restore"):
        assert member in names["_BatchSizePolicy"]
