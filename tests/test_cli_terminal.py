"""The command line as people use it: on a real terminal (a pseudo-terminal of a given size) the
progress line redraws in place and every line fits the width; `--script` failures are reported
as failures; help text documents every argument. Tests on a pseudo-terminal or running a script
start real processes (slow); help text and the progress line's layout are checked in this process."""

from __future__ import annotations

import json
import re

import pytest
from support.cli import amptui
from support.records import record
from support.terminal import amptui_on_pty
from test_ab_compare import canned_run

from amptui.core.stream.records import End, Start, Step

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def amptui_on_terminal(*args: str, cols: int = 80, rows: int = 24, timeout: float = 300) -> tuple[int, str]:
    """Run the real CLI with stdin/stdout/stderr on a pseudo-terminal `cols` wide; returns the exit
    code and everything it drew."""
    return amptui_on_pty(list(args), size=(cols, rows), timeout=timeout)


def screen_lines(drawn: str) -> list[str]:
    """What the terminal shows, line by line, as drawn: every redraw (\\r) and line is one entry."""
    return [s for s in re.split(r"[\r\n]+", ANSI.sub("", drawn)) if s.strip()]


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


def test_help_documents_every_argument(cli):
    for command in ("stop", "resume", "watch"):
        text = cli(command, "--help", check=True).stdout
        assert f"amptui {command}" in text and "RUN_ID" in text and "run_id" not in text
        assert re.search(r"RUN_ID\s+the run to", text), text
    ab = cli("ab", "--help", check=True).stdout
    for arg in ("PRESET", "--variants", "--set", "--format"):
        assert re.search(rf"^\s+{re.escape(arg)}\b.*\S\s\s+\S", ab, re.M), (arg, ab)
    compare = cli("compare", "--help", check=True).stdout
    assert "RUN_ID" in compare and "baseline" in compare
    doctor = cli("doctor", "--help", check=True).stdout
    assert "{table,json}" in doctor


@pytest.mark.parametrize("cols", [60, 80, 100, 160])
@pytest.mark.parametrize("label", ["", "[2/3] fp16+scaler "])
def test_the_progress_line_fits_any_width_with_every_figure(cols, label):
    """The live view fed a GPU-like stream (scale, skipped steps, CUDA memory, a 6-digit step
    count): whatever the width, one line per redraw, never wider than the terminal."""
    import io

    from rich.console import Console

    from amptui.cli.console import ProgressPrinter

    out = io.StringIO()
    printer = ProgressPrinter(label=label, console=Console(file=out, force_terminal=True, width=cols))
    printer.feed([record(Start(run_id="r", preset="alexnet-cifar10", config={}, precision="autocast float16 + GradScaler",
                               world_size=1, device={"type": "cuda", "name": "NVIDIA H100 80GB HBM3", "count": 1},
                               torch="2.x", host="h", pid=1, total_steps=200_000, epochs=20), t=0.0)])
    for step in range(10_000, 200_001, 10_000):
        printer.feed([record(Step(step=step, epoch=step // 10_000, loss=1 / step, lr=1e-4, scale=65536.0, skipped=0,
                                  skipped_total=3, samples_per_s=12345.6, step_time_ms=20.0, data_wait_ms=None,
                                  mem={"allocated": 3 * 2**30, "peak_allocated": 5 * 2**30}), t=float(step))])
        printer.redraw()
    printer.feed([record(End(status="completed", total_time_s=131.4, steps=200_000, final_loss=0.01, val_acc=0.6992,
                             peak_mem=5 * 2**30), t=300_000.0)])
    printer.finish(131.4)
    lines = screen_lines(out.getvalue())
    assert lines and not [line for line in lines if len(line) > cols], lines
    assert any("200000/200000" in line for line in lines)
    if cols >= 100:
        assert any("scale 2^16" in line for line in lines)
    assert any("steps in 2:11" in line for line in lines) and any("69.92%" in line for line in lines)
