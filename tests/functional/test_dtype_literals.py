"""A dtype is asked, never spelled (issue 42): outside the dtype table (amptui/core/config/dtypes.py)
no module compares a dtype name with a literal (`== "bfloat16"`, `in ("float16", ...)`,
`.startswith("bf16")`); it asks the table (`wide`, `narrow`, a `Dtype`'s fields) or the precision
mode instead, so a new dtype or mode is one entry, not a hunt through every rule."""

from __future__ import annotations

import ast

from support.paths import PACKAGE, modules

from amptui.core.config.dtypes import DTYPES

TABLE = PACKAGE / "core" / "config" / "dtypes.py"


def _dtype_word(node: ast.AST) -> str | None:
    """The dtype a literal names: a DTYPES name or short name, or a variant built on one ("fp16+scaler")."""
    names = {d.name for d in DTYPES.values()} | {d.short for d in DTYPES.values()}
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.split("+")[0] in names:
        return node.value
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return next((w for e in node.elts if (w := _dtype_word(e))), None)
    return None


def literal_comparisons(source: str, where: str) -> list[str]:
    """Every comparison of a value with a dtype literal in one module's source, as "where:line 'word'"."""
    found = []
    for node in ast.walk(ast.parse(source, where)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("startswith", "endswith", "removeprefix", "removesuffix"):
            sides = list(node.args)
        else:
            continue
        found += [f"{where}:{node.lineno} {w!r}" for side in sides if (w := _dtype_word(side))]
    return found


def test_no_module_outside_the_dtype_table_compares_with_a_dtype_literal():
    offenders = [hit for path in modules() if path != TABLE
                 for hit in literal_comparisons(path.read_text(), str(path.relative_to(PACKAGE.parent)))]
    assert offenders == [], ("ask the dtype table (amptui.core.config.dtypes: wide, narrow, a Dtype's fields) or "
                             "the precision mode instead of comparing with a literal: " + ", ".join(offenders))


def test_the_scan_sees_each_spelling_it_forbids():
    """The scan is not blind: each form a rule used to take is found, lookups and messages are not."""
    forbidden = ['x == "bfloat16"', 'x != "float16"', '"bfloat16" in slow', 'd not in ("cpu", "float16")',
                 'x in {"fp16", "bf16"}', 'v.startswith("bf16")', '("cuda", "float16") not in seen', 'v == "fp16+scaler"']
    for line in forbidden:
        assert literal_comparisons(line, "snippet"), line
    allowed = ['DTYPES["float16"]', 'f(dtype="bfloat16")', 'print("bfloat16 is wide")', 'x == "float32"',
               'x == wide_dtype()', 'v.endswith("+scaler")']
    assert [hit for line in allowed for hit in literal_comparisons(line, "snippet")] == []
