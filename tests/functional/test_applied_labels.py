"""Labels say who chose the precision (issue 41.6): a run whose AMP amptui applied to a script
(`run.apply_amp`, `amptui ab --script --variants`) is listed "bf16 applied" / "fp16+scaler applied",
never as if the script had chosen it. Run folders in the real format, read by the CLI in this process."""

from __future__ import annotations

import json

from support.records import record, write_records

from amptui.core.config import values as config
from amptui.core.config.precision import Precision
from amptui.core.config.scriptview import script_sections
from amptui.core.config.variants import VARIANTS
from amptui.core.stream.records import End, Start, Step


def write_script_run(root, run_id: str, applied: str, said: str | None = None, variant: str = "") -> None:
    """A finished 10-step run of t.py; `applied`: run.apply_amp ("" the script as written), `said`:
    the precision its config.toml says (None: none seen), `variant`: its `ab --script --variant` NAME."""
    run = root / run_id
    run.mkdir(parents=True)
    cfg = config.build_config({}, {"run.script": "t.py", "run.name": "t", "run.apply_amp": applied,
                                   "run.variant": variant, **(VARIANTS[said] if said else {})})
    (run / "config.toml").write_text(config.to_toml(script_sections(cfg, said is not None)))
    precision = Precision.from_variant(said).as_record() if said else None
    recs = [record(Start(run_id=run_id, preset="t", config={}, precision=precision, world_size=1,
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


def test_compare_names_ab_script_variant_runs_as_their_ab_did(cli, runs_dir):
    """`--variant NAME='ARGS'` names are saved in the run (config run.variant): a later `amptui compare`
    says them in the preset column, flags a reduced-precision name whose run was float32, and the
    names are no config difference between the runs."""
    write_script_run(runs_dir, "20261127-100000-t", "", "fp32", variant="fp32")
    write_script_run(runs_dir, "20261127-100001-t", "", "fp32", variant="bf16")  # its flag did nothing
    write_script_run(runs_dir, "20261127-100002-t", "", "bf16", variant="fast")  # a name of the user's own
    ids = ["20261127-100000-t", "20261127-100001-t", "20261127-100002-t"]
    out = cli("compare", *ids, "--format", "markdown", check=True).stdout
    rows = {line.split("|")[1].strip(): line for line in out.splitlines() if line.startswith("| 2026")}
    assert "| --variant fp32 |" in rows[ids[0]] and "ran as" not in rows[ids[0]], out
    assert "| --variant bf16: ran as fp32 |" in rows[ids[1]], out
    assert "| --variant fast |" in rows[ids[2]], out
    assert "warning: --variant bf16: ran as fp32 (the script's own flag did nothing here" in out
    assert "run.variant" not in out  # the variants' names are not a difference in what was trained
    said = {r["run_id"]: r["variant"] for r in json.loads(cli("compare", *ids, "--format", "json", check=True).stdout)}
    assert said == {ids[0]: "--variant fp32", ids[1]: "--variant bf16: ran as fp32", ids[2]: "--variant fast"}
    plain = cli("compare", ids[0], "--format", "markdown", check=True).stdout
    assert "--variant fp32" in plain  # one run alone, too
