"""Range headroom per layer ([numerics]) and the first non-finite module: the real Trainer in this
process on a tiny float16 + GradScaler model (scaler-lab's small CNN, width 8), with a large
activation put into a known module (forward) or a large gradient into one (backward)."""

from __future__ import annotations

import json

import pytest
from support.cli import amptui as amptui_cli
from support.cli import one_clear_line
from support.numerics import FP16, TINY
from support.records import only_run

pytestmark = pytest.mark.timeout(300)


def as_set(values: dict) -> list[str]:
    """--set KEY=VALUE arguments (values as TOML: strings quoted, booleans lower-case)."""
    def toml(v):
        return f'"{v}"' if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else repr(v)
    return [arg for k, v in values.items() for arg in ("--set", f"{k}={toml(v)}")]


@pytest.mark.slow
def test_numerics_command_table_and_json(runs_dir):
    run = amptui_cli("run", "scaler-lab", "--runs-dir", str(runs_dir),
                     *as_set({**TINY, **FP16, "numerics.every": 1, "run.max_steps": 2}), timeout=240)
    assert run.returncode == 0, run.stderr
    run_id = only_run(runs_dir).name
    table = amptui_cli("numerics", run_id, "--runs-dir", str(runs_dir), check=True).stdout
    assert "features.4" in table and "float16" in table and "2 samples" in table
    data = json.loads(amptui_cli("numerics", run_id, "--runs-dir", str(runs_dir), "--format", "json",
                                 check=True).stdout)
    assert data["dtype"] == "float16" and data["samples"] == 2 and "narrowest" in data
    assert [layer["name"] for layer in data["layers"]][:2] == ["features.0", "features.1"]
    assert "no run" in one_clear_line(amptui_cli("numerics", "nope", "--runs-dir", str(runs_dir)))


@pytest.mark.slow
def test_the_numerics_command_fits_an_80_column_terminal(runs_dir):
    """The real command on a terminal: the table's rows fit; its sentences (the legend, the first
    non-finite line) wrap at words instead of running past the edge."""
    from support.dashboard import NUMERICS, copy_numerics_run
    from support.screens import amptui_on_terminal, screen_lines

    copy_numerics_run(runs_dir)
    code, drawn = amptui_on_terminal("numerics", NUMERICS, "--runs-dir", str(runs_dir), cols=80)
    lines = screen_lines(drawn)
    assert code == 0 and not [line for line in lines if len(line) > 80], lines
    assert any(line.startswith("blocks.3 ") and line.rstrip().endswith(" 40") for line in lines), lines
    assert any(line.startswith("inf fwd: samples whose output held inf/NaN") for line in lines), lines
