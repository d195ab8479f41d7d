"""Notes and advice as people read them: on a terminal wrapped at word boundaries within its width
from the first line on (one line each in a pipe); every figure in core.fmt's one form: FLOP rates
in one unit per sentence, the loss scale as a power of two, losses with four decimals."""

from __future__ import annotations

import re

import pytest
from support.machine import cpu_rates_here
from support.screens import screen_lines
from support.terminal import amptui_on_pty


@pytest.mark.slow  # a real trainer on a pseudo-terminal
def test_run_notes_wrap_at_word_boundaries_on_an_80_column_terminal(runs_dir, tmp_path, monkeypatch):
    cpu_rates_here(tmp_path, monkeypatch, bfloat16=0.001)
    code, drawn = amptui_on_pty(["run", "quickstart", "--set", "run.max_steps=4", "--set", "log.every=2",
                                 "--set", "log.tensorboard=false"], size=(80, 24))
    lines = screen_lines(drawn)
    assert code == 0, lines[-10:]
    assert not [line for line in lines if len(line) > 80], lines
    start = next(i for i, line in enumerate(lines) if line.startswith("note: amp.dtype auto"))
    note = " ".join(line.strip() for line in lines[start:start + 3])
    assert ("note: amp.dtype auto: float32 (autocast off), as bfloat16 is slow on this cpu (measured 1 GFLOP/s, "
            "float32 85); force AMP with --set amp.dtype=bfloat16") in note, lines[start:start + 3]
    assert lines[start + 1].startswith("      "), "a wrapped note goes on indented under its text"
    run_id = lines[-1].split()[1].rstrip(":")
    log = (runs_dir / run_id / "output.log").read_text()
    assert re.search(r"completed: 4 steps, final loss \d+\.\d{4}$", log, re.M), log[-400:]
