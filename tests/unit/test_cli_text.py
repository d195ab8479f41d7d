"""The command line's sentences on a terminal: wrapped at word boundaries to its width (doctor,
notes, errors, `--help`), exactly as written in a pipe; doctor's rates in a unit that reads, and
its speed ratio with an unmistakable direction."""

from __future__ import annotations

import io
import re

import pytest

from amptui.cli import prose
from amptui.core.fmt import flops_unit, fmt_flops, fmt_times_as_fast
from amptui.machine import hardware

pytestmark = pytest.mark.timeout(120)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_sentences_wrap_at_words_with_their_indent_on_a_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    text = ("Recommendation: float32\n  float32 (autocast off): this CPU has no bfloat16 instructions, "
            "so autocast would save memory but cost time.")
    out = Terminal()
    prose.say(text, out)
    lines = out.getvalue().splitlines()
    assert len(lines) > 3 and all(len(line) <= 40 for line in lines), lines
    assert all(line.startswith("  ") for line in lines[1:]), "a wrapped line keeps its indent"
    assert " ".join(out.getvalue().split()) == " ".join(text.split()), "no word cut in two"
    assert not [line for line in lines if line != line.rstrip()], "no trailing padding"

    piped = io.StringIO()
    prose.say(text, piped)
    assert piped.getvalue() == text + "\n"


def test_a_speed_ratio_says_which_is_faster():
    assert fmt_times_as_fast("bfloat16", 0.001, "float32", 0.085) == "float32 is 85 times as fast as bfloat16"
    assert fmt_times_as_fast("bfloat16", 0.119, "float32", 0.085) == "bfloat16 is 1.4 times as fast as float32"
    assert fmt_times_as_fast("bfloat16", 0.086, "float32", 0.085) == "bfloat16 and float32 are about as fast"


def test_rates_read_in_the_unit_of_their_range():
    assert flops_unit(0.00144, 0.000786) == ("GFLOP/s", 1e3)
    assert fmt_flops(0.00144) == "1.44 GFLOP/s" and fmt_flops(250.0) == "250 TFLOP/s"
    assert fmt_flops(7.54e-6) == "7.54 MFLOP/s" and fmt_flops(None) == "n/a"
    unit = flops_unit(0.085, 0.001)
    assert fmt_flops(0.001, unit, with_unit=False) == "1" and fmt_flops(0.085, unit) == "85 GFLOP/s"


def test_doctor_on_an_emulating_cpu_says_float32_is_faster_in_words():
    info = {"cpu": {"flags": {"avx2": True}}, "gpus": []}
    dtype, _, reason = hardware.recommend(info, {"cpu": {"float32": 0.085, "bfloat16": 0.001, "float16": 0.002}})
    assert dtype == "float32"
    assert "bfloat16 matmuls run at 1 GFLOP/s against 2 for float16 and 85 for float32" in reason
    assert "(float32 is 85 times as fast as bfloat16)" in reason
    assert not re.search(r"\d(\.\d+)?x ", reason), "no bare ratio whose direction the reader must guess"


def test_a_step_line_without_epochs_names_none():
    """A script loop that iterates no DataLoader has no epochs: its progress line says nothing of
    them (not "ep -"); a trainer's says "ep 2/3"."""
    from amptui.cli.console import step_fields

    assert not any(f.startswith("ep ") for f in step_fields({"step": 5, "loss": 1.0, "lr": 0.1}, None))
    assert step_fields({"step": 5, "epoch": 2, "loss": 1.0, "lr": 0.1}, 3)[0] == "ep 2/3"
