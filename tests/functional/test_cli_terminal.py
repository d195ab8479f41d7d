"""The command line as people use it: on a real terminal (a pseudo-terminal of a given size) the
progress line redraws in place and every line fits the width; `--script` failures are reported
as failures; help text documents every argument. Tests on a pseudo-terminal or running a script
start real processes (slow); help text and the progress line's layout are checked in this process."""

from __future__ import annotations

import re

import pytest
from support.records import record
from support.screens import screen_lines

from amptui.core.stream.records import End, Start, Step


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
