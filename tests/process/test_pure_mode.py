"""A precision mode added as a module, and only that: `bf16-pure` (amptui/core/modes/pure.py and
amptui/trainer/modes/pure.py): parameters, gradients and optimizer state in bfloat16, no float32
master copy, with stochastic rounding of the optimizer's update as an option. It trains from a
preset, `ab` and `tune` offer it, the script hooks recognise a loop that cast its model to bfloat16,
and compare shows its precision and memory. Its name is written in no other module of amptui."""

from __future__ import annotations

import json

import pytest
from support.cli import amptui
from support.paths import SCRIPTS
from support.records import events, only_run

SCRIPT = SCRIPTS / "cast_bf16.py"


@pytest.mark.slow  # three tiny trainer runs
def test_ab_runs_fp32_bf16_and_bf16_pure_and_compare_shows_each_precision_and_memory(runs_dir):
    proc = amptui("ab", "quickstart", "--variants", "fp32,bf16,bf16-pure", "--set", "run.device=cpu",
                  "--set", "run.max_steps=2", "--set", "model.width=8", "--set", "data.batch_size=8",
                  "--set", "data.train_samples=32", "--set", "data.val_samples=0", timeout=600, check=True)
    assert "[3/3] bf16-pure" in proc.stdout
    listed = json.loads(amptui("runs", "--format", "json", check=True).stdout)
    assert sorted(r["precision"] for r in listed) == ["bf16", "bf16-pure", "fp32"]
    ids = [r["run_id"] for r in sorted(listed, key=lambda r: r["started"])]
    table = json.loads(amptui("compare", *ids, "--format", "json", check=True).stdout)
    rows = table["runs"] if isinstance(table, dict) else table
    shown = {row["precision"]: row for row in rows}
    assert set(shown) == {"fp32", "autocast bfloat16",
                          "bfloat16 parameters and optimizer state, no float32 master copy"}, shown
    assert all(row["peak_mem"] for row in rows)  # each one's memory, the saving against fp32 beside it
    start = events(next(runs_dir / i for i in ids if "pure" in json.dumps(events(runs_dir / i)[0]["precision"])))[0]
    assert start["precision"]["mode"] == "pure"


@pytest.mark.slow  # one script run
def test_a_script_that_casts_its_model_to_bfloat16_records_bf16_pure(runs_dir):
    amptui("run", "--script", str(SCRIPT), "--", "--steps", "3", check=True)
    run = only_run(runs_dir)
    listed = json.loads(amptui("runs", "--format", "json", check=True).stdout)
    assert [r["precision"] for r in listed] == ["bf16-pure"]
    assert events(run)[0]["kind"] == "start"
