"""Verdicts a busy machine cannot bend (issue 51): with two CPU hogs running beside them, compare, ab and
tune may say "too noisy to tell" (a right answer under load) but never a verdict their own band or
control contradicts: no "same speed" with a band wider than SAME_SPEED_BAND, no figure inside its noise,
no faster-than-fp32 beyond what an fp32 control measured against fp32, no tune winner its control
matches. The assertions hold whatever the load does to the timings; tiny models, few steps."""

from __future__ import annotations

import contextlib
import json
import math
import subprocess
import sys
from collections.abc import Iterator

import pytest
from support.cli import amptui

from amptui.core import figures

TINY = """\
[run]
description = "tiny CNN under load"
device = "cpu"
[model]
name = "smallcnn"
width = 4
[data]
name = "synthetic"
img_size = 8
batch_size = 8
train_samples = 256
val_samples = 0
[amp]
autocast = false
"""


@contextlib.contextmanager
def cpu_hogs(count: int = 2) -> Iterator[None]:
    """`count` processes spinning on a core each for as long as the block runs (ended by their own pids)."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait(timeout=30)


def gap(ratio: float | None) -> float:
    return figures.control_gap(ratio)


def assert_row_stands(row: dict, control: float | None) -> None:
    """One compare row's verdict is neither contradicted by its band nor by the table's control."""
    if row["speed_unresolved"] or row["speedup"] is None or row["speedup_noise"] is None:
        return  # "too noisy / too short to tell", "ran under different load": no claim to contradict
    noise = row["speedup_noise"] / row["speedup"]
    if row["same_speed"]:
        assert noise <= figures.SAME_SPEED_BAND + 1e-9, row
        assert gap(control) <= figures.SAME_SPEED_BAND + 1e-9, (row, control)
    else:  # a figure: outside its own noise and beyond how far the control landed
        assert abs(math.log(row["speedup"])) > math.log1p(noise), row
        assert abs(math.log(row["speedup"])) > math.log1p(gap(control)), (row, control)


@pytest.mark.slow
@pytest.mark.timeout(900)  # five trainer processes beside two hogs on a shared box
def test_ab_and_compare_under_two_cpu_hogs_say_nothing_their_band_or_control_contradicts(tmp_path, runs_dir):
    preset = tmp_path / "tiny.toml"
    preset.write_text(TINY)
    steps = ["--set", "run.max_steps=16", "--set", "log.every=2"]
    with cpu_hogs():
        ab = amptui("ab", str(preset), "--variants", "fp32,bf16", *steps, "--format", "json", timeout=600)
        assert ab.returncode == 0, ab.stderr
        rows = json.loads(ab.stdout[ab.stdout.index("[\n"):])
        for row in rows[1:]:
            assert_row_stands(row, None)
        again = amptui("run", str(preset), *steps, "--set", "run.seed=7", timeout=600)  # the control: fp32 again
        assert again.returncode == 0, again.stderr
    ids = [r["run_id"] for r in rows]
    control_id = next(p.name for p in runs_dir.iterdir() if p.is_dir() and not p.name.startswith(".") and p.name not in ids)
    table = json.loads(amptui("compare", *ids, control_id, "--format", "json", check=True).stdout)
    control = table[2]["speedup"]
    assert table[2]["precision"] == table[0]["precision"]
    assert_row_stands(table[1], control)
    assert_row_stands(table[2], None)


@pytest.mark.slow
@pytest.mark.timeout(900)  # a four-minute budget, beside two hogs on a shared box
def test_tune_under_two_cpu_hogs_names_no_winner_its_control_contradicts(tmp_path, runs_dir):
    preset = tmp_path / "tiny.toml"
    preset.write_text(TINY)
    with cpu_hogs():
        proc = amptui("tune", str(preset), "--keys", "amp.dtype", "--budget", "4", "--format", "json", timeout=600)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    trials = {t["candidate"]: t for t in result["trials"]}
    control = next((t["speedup"] for t in result["trials"] if t["role"] == "band" and t["speedup"]), None)
    winner = result["winner"]
    if winner is not None and trials[winner]["role"] == "candidate":  # a precision crowned: beyond noise and control
        speedup = trials[winner]["speedup"]
        assert speedup > 1 + result["needed_gain"] and math.log(speedup) > math.log1p(gap(control)), result
    for t in result["trials"]:
        if t["verdict"] == "accurate, within timing noise":  # "same speed": only inside a narrow band
            assert gap(control) <= figures.SAME_SPEED_BAND + 1e-9 and abs(math.log(t["speedup"])) <= math.log1p(
                figures.SAME_SPEED_BAND) + 1e-9, t
        if t["verdict"] == "accurate, faster":
            assert math.log(t["speedup"]) > math.log1p(gap(control)), t
    if winner is None:  # said as such (too noisy; or the budget too short under this load): never silent
        assert result["explanation"][0].startswith(("No winner: the timings were too noisy", "No fp32",
                                                    "Not enough trials to recommend")), result
