"""Narrow terminals: `amptui runs` and `amptui compare` leave out whole columns, least wanted first,
and never cut a run id, a count or a status. Real CLI on a pseudo-terminal (slow)."""

from __future__ import annotations

import pytest
from support.canned import canned_run
from support.screens import screen_lines
from support.terminal import amptui_on_pty
from support.variants import BF16, FP32, two_variants

TUNE = "20261125-101530-scaler-lab-tune-8a42-2-9c1"
AB = "20261125-101612-quickstart-ab12"


@pytest.mark.slow
@pytest.mark.parametrize("cols", [70, 80])
def test_runs_drops_whole_columns_and_never_cuts_ids_counts_or_statuses(cols, runs_dir):
    canned_run(runs_dir, TUNE, 20.0, 64, 2**30, 0.9, steps=320, preset="scaler-lab-tune-8a42",
               precision="autocast float16 + GradScaler")
    canned_run(runs_dir, AB, 20.0, 64, 2**30, 0.9, steps=320, preset="quickstart", precision="autocast bfloat16")
    code, drawn = amptui_on_pty(["runs"], size=(cols, 24))
    lines = screen_lines(drawn)
    assert code == 0 and not [line for line in lines if len(line) > cols], lines
    header = lines[0].split()
    assert header[0] == "RUN" and "STATUS" in header and "PROGRESS" in header
    for run_id in (TUNE, AB):
        (row,) = [line for line in lines if line.startswith(run_id)]
        assert row.split()[0] == run_id, row
        assert " completed " in row + " " and row.rstrip().endswith("320/320"), row
    # the columns left out are left out whole: no header or cell is cut short
    assert all(h in ("RUN", "ID", "PRESET", "PRECISION", "STATUS", "PROGRESS", "STARTED", "DURATION") for h in header)


@pytest.mark.slow
def test_compare_at_80_columns_keeps_steps_status_and_both_losses(runs_dir):
    two_variants(runs_dir)
    code, drawn = amptui_on_pty(["compare", FP32, BF16], size=(80, 24))
    lines = screen_lines(drawn)
    assert code == 0 and not [line for line in lines if len(line) > 80], lines
    row = [line for line in lines if line.startswith("2 ")][-1]
    assert "10/20" in row and "stopped early" in row and row.count("2.2560") == 2, row
    assert any("step 10" in line for line in lines[:6]), lines[:6]
