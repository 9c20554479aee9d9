"""Compares the signatures of the reference's public functions and methods (read from its
source with `ast`, never imported) with those of the zeus_cpp objects of the same names.

For each file zeus/<path>.py of the checkout whose module zeus_cpp.<path> imports, every public
top-level function and every public method (and ``__init__``) of a public class that zeus_cpp
also has is classified:

- "same": the same parameters, in the same order, kinds and defaults;
- "extended": every reference parameter is there with its position, kind and default, and
  zeus_cpp adds only optional ones (or gives a default where the reference has none);
- "different": anything else (the reason is given);
- "no signature": a native method whose signature inspect cannot read (pybind11 overloads).
"""

from __future__ import annotations

import ast
import importlib
import inspect
from dataclasses import dataclass, field
from pathlib import Path

_KIND = {
    inspect.Parameter.POSITIONAL_ONLY: "positional",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional",
    inspect.Parameter.VAR_POSITIONAL: "*args",
    inspect.Parameter.KEYWORD_ONLY: "keyword",
    inspect.Parameter.VAR_KEYWORD: "**kwargs",
}
_UNKNOWN = object()


@dataclass
class Comparison:
    same: list = field(default_factory=list)
    extended: list = field(default_factory=list)
    different: dict = field(default_factory=dict)  # name -> reason
    no_signature: list = field(default_factory=list)


def _reference_parameters(function: ast.FunctionDef) -> list:
    """[(name, kind, default ast node or None)], without a classmethod's `cls`."""
    arguments = function.args
    positional = arguments.posonlyargs + arguments.args
    decorators = {d.id for d in function.decorator_list if isinstance(d, ast.Name)}
    if "classmethod" in decorators:
        positional = positional[1:]
    first_default = len(positional) - len(arguments.defaults)
    parameters = []
    for i, argument in enumerate(positional):
        default = arguments.defaults[i - first_default] if i >= first_default else None
        parameters.append((argument.arg, "positional", default))
    if arguments.vararg:
        parameters.append((arguments.vararg.arg, "*args", None))
    for argument, default in zip(arguments.kwonlyargs, arguments.kw_defaults):
        parameters.append((argument.arg, "keyword", default))
    if arguments.kwarg:
        parameters.append((arguments.kwarg.arg, "**kwargs", None))
    return parameters


def _value(node: ast.expr, module) -> object:
    """A default's value: a literal, or an expression evaluated among our module's names
    (e.g. ``PowerDomain.DEVICE_INSTANT``)."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        pass
    try:
        return eval(ast.unparse(node), dict(vars(module)))  # noqa: S307 (the reference's text)
    except Exception:
        return _UNKNOWN


def _defaults_equal(reference: object, ours: object) -> bool:
    if reference is _UNKNOWN:
        return False
    return reference == ours or getattr(reference, "value", _UNKNOWN) == ours


def compare(function: ast.FunctionDef, signature: inspect.Signature, module) -> str:
    """"same", "extended", or why the signatures differ."""
    reference = _reference_parameters(function)
    ours = list(signature.parameters.values())
    exact = [(n, k) for n, k, _ in reference] == [(p.name, _KIND[p.kind]) for p in ours]
    reference_positional = [n for n, k, _ in reference if k == "positional"]
    our_positional = [p.name for p in ours if _KIND[p.kind] == "positional"]
    if our_positional[: len(reference_positional)] != reference_positional:
        return f"positional parameters {our_positional}, the reference's {reference_positional}"
    by_name = {p.name: p for p in ours}
    has_kwargs = any(_KIND[p.kind] == "**kwargs" for p in ours)
    for name, kind, default in reference:
        if kind in ("*args", "**kwargs"):
            if not any(_KIND[p.kind] == kind for p in ours):
                return f"no {kind}"
            continue
        parameter = by_name.get(name)
        if parameter is None:
            if kind == "keyword" and has_kwargs:
                continue
            return f"no parameter {name}"
        if _KIND[parameter.kind] != kind and not (kind == "keyword"):
            return f"{name} is {_KIND[parameter.kind]}, the reference's {kind}"
        if default is None:
            exact = exact and parameter.default is inspect.Parameter.empty
            continue
        if parameter.default is inspect.Parameter.empty:
            return f"{name} is required, the reference's defaults to {ast.unparse(default)}"
        if not _defaults_equal(_value(default, module), parameter.default):
            return f"{name} defaults to {parameter.default!r}, the reference's to {ast.unparse(default)}"
    names = {n for n, _, _ in reference}
    for parameter in ours:
        if (
            parameter.name not in names
            and _KIND[parameter.kind] in ("positional", "keyword")
            and parameter.default is inspect.Parameter.empty
        ):
            return f"an extra required parameter {parameter.name}"
    return "same" if exact else "extended"


def _is_property(function: ast.FunctionDef) -> bool:
    return any(
        (isinstance(d, ast.Name) and d.id in ("property", "cached_property"))
        or (isinstance(d, ast.Attribute) and d.attr in ("setter", "getter", "deleter"))
        for d in function.decorator_list
    )


def _module_name(reference_package: Path, file: Path) -> str | None:
    parts = list(file.relative_to(reference_package).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if any(p.startswith("_") and p != "__main__" for p in parts):
        return None  # private modules (_legacy, ...)
    return ".".join(["zeus_cpp"] + parts)


def compare_tree(reference_package: Path) -> Comparison:
    """Compares every public callable of the reference package folder (its zeus/) with ours."""
    result = Comparison()
    for file in sorted(reference_package.rglob("*.py")):
        module_name = _module_name(reference_package, file)
        if module_name is None:
            continue
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue  # a module we do not have
        for node in ast.parse(file.read_text()).body:
            pairs = []
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                pairs.append((node.name, node, getattr(module, node.name, None)))
            elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                cls = getattr(module, node.name, None)
                if cls is None:
                    continue
                for item in node.body:
                    if (
                        isinstance(item, ast.FunctionDef)
                        and (not item.name.startswith("_") or item.name == "__init__")
                        and not _is_property(item)
                    ):
                        pairs.append((f"{node.name}.{item.name}", item, getattr(cls, item.name, None)))
            for name, function, ours in pairs:
                if ours is None or not callable(ours):
                    continue
                qualified = f"{module_name}.{name}"
                try:
                    signature = inspect.signature(ours)
                except (TypeError, ValueError):
                    result.no_signature.append(qualified)
                    continue
                verdict = compare(function, signature, module)
                if verdict == "same":
                    result.same.append(qualified)
                elif verdict == "extended":
                    result.extended.append(qualified)
                else:
                    result.different[qualified] = verdict
    return result
