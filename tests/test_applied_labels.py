"""Labels say who chose the precision (issue 41.6): a run whose AMP amptui applied to a script
(`run.apply_amp`, `amptui ab --script --variants`) is listed "bf16 applied" / "fp16+scaler applied",
never as if the script had chosen it. Run folders in the real format, read by the CLI in this process."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import amptui
from support.records import record, write_records

from amptui.core.config import values as config
from amptui.core.config.scriptview import script_sections
from amptui.core.config.variants import VARIANTS
from amptui.core.records import End, Start, Step

SCRIPT = Path(__file__).parent / "scripts" / "plain_fp32.py"


def write_script_run(root, run_id: str, applied: str, said: str | None = None) -> None:
    """A finished 10-step run of t.py; `applied`: run.apply_amp ("" the script as written), `said`:
    the precision its config.toml says (None: none seen)."""
    run = root / run_id
    run.mkdir(parents=True)
    cfg = config.build_config({}, {"run.script": "t.py", "run.name": "t", "run.apply_amp": applied,
                                   **(VARIANTS[said] if said else {})})
    (run / "config.toml").write_text(config.to_toml(script_sections(cfg, said is not None)))
    recs = [record(Start(run_id=run_id, preset="t", config={}, precision=None, world_size=1,
                         device={"type": "cpu", "name": "Test CPU", "count": 1}, torch="2.x", host="test", pid=1,
                         total_steps=10, steps_per_epoch=10, epochs=1), 1000.0),
            record(Step(step=10, epoch=1, loss=1.0, lr=None, scale=None, skipped=0, skipped_total=0,
                        samples_per_s=640.0, step_time_ms=10.0, data_wait_ms=0.0, mem={"rss": 1e9}, load=1.0,
                        others_cpu=None), 1001.0),
            record(End(status="completed", total_time_s=1.0, steps=10, final_loss=1.0), 1001.0)]
    write_records(run / "events.jsonl", recs)


def test_runs_lists_amp_amptui_applied_as_applied(cli, runs_dir):
    write_script_run(runs_dir, "20261127-100000-t", "", "fp32")
    write_script_run(runs_dir, "20261127-100001-t", "bf16", "bf16")
    write_script_run(runs_dir, "20261127-100002-t", "fp16+scaler", "fp16+scaler")
    lines = {line.split()[0]: line for line in cli("runs", check=True).stdout.splitlines() if line.startswith("2026")}
    assert "bf16 applied" in lines["20261127-100001-t"]
    assert "fp16+scaler applied" in lines["20261127-100002-t"]
    assert "applied" not in lines["20261127-100000-t"] and " fp32 " in lines["20261127-100000-t"]


@pytest.mark.slow
def test_ab_variant_names_are_in_the_table_and_a_bf16_that_ran_in_float32_is_flagged(runs_dir):
    """`--variant NAME='ARGS'`: the A/B table names each run's variant; a variant named bf16 whose
    flag did nothing (the hooks saw no autocast) says it ran as fp32, in its row and under the table."""
    proc = amptui("ab", "--script", str(SCRIPT), "--variant", "fp32=--dtype float32", "--variant",
                  "bf16=--dtype float32", "--set", "log.every=2", "--", "--steps", "4", check=True)
    table = proc.stdout.split("\n\n")
    rows = [line for line in proc.stdout.splitlines() if line.startswith("2026") or line[:1].isdigit()]
    assert any("--variant fp32" in r and "ran as" not in r for r in rows), proc.stdout
    assert any("--variant bf16: ran as fp32" in r for r in rows), proc.stdout
    assert "warning: --variant bf16: ran as fp32" in proc.stdout, table
