"""Parts, not mixins: no amptui class has more than two amptui-defined bases, and no class is typed
by stubs (`if TYPE_CHECKING: def ...: ...`) or by a base that is `object` at run time
(`_Screen = object`). Screens compose area widgets that talk through Textual messages instead.
Read from the source (ast), so it is fast and imports nothing."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from support.paths import FEWEST_MODULES, PACKAGE, modules, parsed

import amptui


def _modules() -> dict[str, ast.Module]:
    return {str(path.relative_to(PACKAGE.parent)): parsed(path)
            for path in modules()}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _base_name(base: ast.expr) -> str | None:
    if isinstance(base, ast.Name):
        return base.id
    if isinstance(base, ast.Attribute):
        return base.attr
    if isinstance(base, ast.Subscript):
        return _base_name(base.value)
    return None


def test_no_class_has_more_than_two_amptui_bases():
    modules = _modules()
    ours = {node.name for tree in modules.values() for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    found = []
    for path, tree in modules.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = [name for name in map(_base_name, node.bases) if name in ours]
                if len(bases) > 2:
                    found.append(f"{path}:{node.lineno} {node.name}({', '.join(bases)})")
    assert not found, "classes with more than two amptui bases:\n" + "\n".join(found)


def test_no_type_checking_stubs_or_object_bases():
    found = []
    for path, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                found += [f"{path}:{stub.lineno} a method stub under TYPE_CHECKING: {stub.name}"
                          for stub in node.body if isinstance(stub, (ast.FunctionDef, ast.AsyncFunctionDef))]
                found += [f"{path}:{alias.lineno} {ast.unparse(alias.targets[0])} = object"
                          for alias in node.orelse if isinstance(alias, ast.Assign)
                          and isinstance(alias.value, ast.Name) and alias.value.id == "object"]
    assert not found, "\n".join(found)


def test_the_scan_finds_amptui_wherever_this_file_moves(tmp_path):
    assert PACKAGE == Path(amptui.__file__).resolve().parent and len(_modules()) >= FEWEST_MODULES
    with pytest.raises(AssertionError, match="would check nothing"):
        modules(tmp_path)  # a scan pointed at the wrong folder fails instead of passing on no files
