"""compare / A-B with a variant that failed before its first step (issue 41.5): the failed run is listed
`failed`, the runs that trained are compared at their common step (the loss column is not blanked,
"compares them at step None" is never said). Event files in the real format, read by the CLI here."""

from __future__ import annotations

import json

from support.records import record, write_records

from amptui.core.stream.records import End, Start, Step


def write_run(root, run_id, precision: str, losses: list[float], status: str = "completed", every: int = 10):
    """A run of `len(losses)` step records (every `every` steps); none when `losses` is empty."""
    run = root / run_id
    run.mkdir(parents=True)
    (run / "config.toml").write_text('[run]\nname = "quickstart"\n')
    steps, t = every * 3, 1_000.0
    recs = [record(Start(run_id=run_id, preset="quickstart", config={}, precision=precision, world_size=1,
                         device={"type": "cpu", "name": "Test CPU", "count": 1}, torch="2.x", host="test", pid=1,
                         total_steps=steps, steps_per_epoch=steps, epochs=1), t)]
    for i, loss in enumerate(losses):
        t += 0.1
        recs.append(record(Step(step=every * (i + 1), epoch=1, loss=loss, lr=None, scale=None, skipped=0,
                                skipped_total=0, samples_per_s=640.0, step_time_ms=10.0, data_wait_ms=0.0,
                                mem={"rss": 1e9}, load=1.0, others_cpu=None), t))
    done = every * len(losses)
    recs.append(record(End(status=status, total_time_s=t - 1_000.0, steps=done,
                           final_loss=losses[-1] if losses else None), t))
    write_records(run / "events.jsonl", recs)


IDS = ("20261127-100000-qs-fp32", "20261127-100001-qs-fp16", "20261127-100002-qs-bf16")


def test_a_variant_failed_at_step_0_leaves_the_others_compared_at_their_common_step(cli, runs_dir):
    write_run(runs_dir, IDS[0], "fp32", [2.0, 1.5, 1.25])
    write_run(runs_dir, IDS[1], "fp16+scaler", [], status="failed")
    write_run(runs_dir, IDS[2], "bf16", [2.0, 1.5])
    rows = json.loads(cli("compare", *IDS, "--format", "json", check=True).stdout)
    assert [r["status"] for r in rows] == ["completed", "failed", "completed"]
    assert [r["common_step"] for r in rows] == [20, 20, 20]
    assert [r["loss_at_common"] for r in rows] == [1.5, None, 1.5]
    table = cli("compare", *IDS, check=True).stdout
    assert "step None" not in table
    assert "loss @ step 20" in table
    assert f"{IDS[1]} failed before its first step" in table
