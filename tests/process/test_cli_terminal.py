"""The command line as people use it: on a real terminal (a pseudo-terminal of a given size) the
progress line redraws in place and every line fits the width; `--script` failures are reported
as failures; help text documents every argument. Tests on a pseudo-terminal or running a script
start real processes (slow); help text and the progress line's layout are checked in this process."""

from __future__ import annotations

import json
import re

import pytest
from support.canned import canned_run
from support.cli import amptui
from support.screens import ANSI, amptui_on_terminal, screen_lines


@pytest.mark.slow
@pytest.mark.parametrize("cols", [80])
def test_the_progress_line_redraws_in_place_within_the_width(cols, runs_dir):
    code, drawn = amptui_on_terminal("run", "quickstart", "--set", "run.max_steps=24", "--set", "log.every=1", "--set", "amp.grad_scaler=true", "--set", "run.device=cpu",
                                     cols=cols)
    lines = screen_lines(drawn)
    assert code == 0, "\n".join(lines[-20:])
    too_wide = [line for line in lines if len(line) > cols]
    assert not too_wide, too_wide
    progress = [line for line in lines if re.search(r"\b\d+/24\b", line) and "━" in line]
    assert progress, lines
    # 24 step records (log.every=1): a line each would print 24+ newlines; redrawn, a handful remain
    # (counted on the lines that hold the bar: notices this CPU adds, e.g. emulated bfloat16, are not progress)
    bar_lines = [line for line in drawn.split("\n") if re.search(r"\b\d+/24\b", ANSI.sub("", line)) and "━" in line]
    assert "\r" in drawn and len(bar_lines) < 12, "progress updates redraw one line"
    assert any("scale 2^" in line and "loss" in line for line in progress), "scale fits at 80 columns"
    assert any(re.match(r"completed: 24 steps in \d+:\d\d, final loss", line) for line in lines[-4:]), lines[-4:]
    assert lines[-1].startswith("run ") and lines[-1].endswith(": completed")
    # Accuracy reads the same in the trainer's log as on the command line.
    shown = re.search(r"val acc (\d+\.\d\d%)", " ".join(lines)).group(1)
    log = (runs_dir / lines[-1].split()[1].rstrip(":") / "output.log").read_text()
    assert f"val acc {shown}" in log, log


@pytest.mark.slow
@pytest.mark.parametrize("cols", [80, 100])
def test_compare_and_runs_tables_fit_the_terminal(cols, runs_dir):
    long_preset = '[run]\nname = "resnet18-intel"\n'
    canned_run(runs_dir, "20261122-165501-resnet18-intel-ab12", 20.0, 64, 2**30, 0.9, preset="resnet18-intel",
               precision="fp32", config=long_preset)
    canned_run(runs_dir, "20261122-165733-resnet18-intel-cd34", 8.0, 64, 2**29, 0.9, preset="resnet18-intel",
               precision="autocast float16 + GradScaler", config=long_preset + '[amp]\ndtype = "float16"\n')
    ids = sorted(p.name for p in runs_dir.iterdir())
    code, drawn = amptui_on_terminal("compare", *ids, cols=cols)
    lines = screen_lines(drawn)
    assert code == 0 and not [line for line in lines if len(line) > cols], lines
    assert f"1  {ids[0]}  (baseline)" in lines and f"2  {ids[1]}" in lines, "run ids in full, numbered"
    row = [line for line in lines if line.startswith("2 ")][-1]  # the table's row, after the id list
    assert "fp16+scaler" in row and "2.50x" in row and "90.00%" in row
    code, drawn = amptui_on_terminal("runs", cols=cols)
    lines = screen_lines(drawn)
    assert code == 0 and not [line for line in lines if len(line) > cols], lines
    assert any(line.startswith(ids[1]) and "completed" in line for line in lines), "one row per run, id whole"


@pytest.mark.slow
def test_a_script_that_fails_before_its_monitor_starts_is_failed_with_its_error(runs_dir, isolated):
    script = isolated / "train.py"
    script.write_text("import sys\nraise ValueError(f'no data at {sys.argv[1]}')\n")
    proc = amptui("run", "--script", str(script), "--", "/nowhere")
    assert proc.returncode == 1
    assert "ValueError: no data at /nowhere" in proc.stderr and "Traceback" not in proc.stderr
    assert "resume" not in proc.stdout + proc.stderr
    listed = json.loads(amptui("runs", "--format", "json", check=True).stdout)
    assert [(r["status"], r["error"]) for r in listed] == [("failed", "ValueError: no data at /nowhere")]
    run_dir = runs_dir / listed[0]["run_id"]
    assert "ValueError: no data at /nowhere" in (run_dir / "output.log").read_text(), "the traceback is kept"
    refused = amptui("resume", listed[0]["run_id"])
    assert refused.returncode == 2 and "your own script" in refused.stderr


@pytest.mark.slow
def test_a_script_that_exits_with_an_error_code_before_its_monitor_is_failed(runs_dir, isolated):
    script = isolated / "train.py"
    script.write_text("import sys\nprint('usage: train.py --lr LR', file=sys.stderr)\nsys.exit(2)\n")
    proc = amptui("run", "--script", str(script))
    assert proc.returncode == 2 and "SystemExit: exit code 2" in proc.stderr  # the script's exit code, passed on
    assert json.loads(amptui("runs", "--format", "json", check=True).stdout)[0]["status"] == "failed"
