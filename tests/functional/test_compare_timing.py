"""`compare` / `ab` speed-ups come from training-step time only (step records' step_time_ms), so a
long evaluation or checkpoint changes the total time but not the speed-up; runs that waited for
data are flagged input-bound. Event files are written in the real format, read by the CLI (in this process)."""

from __future__ import annotations

import json

import pytest
from support.records import record, write_records

from amptui.core.stream.records import End, Epoch, Start, Step


def write_run(root, run_id, *, step_ms, eval_s=0.0, wait_ms=0.0, device="cuda", steps=100, every=10):
    run = root / run_id
    run.mkdir(parents=True)
    (run / "config.toml").write_text('[run]\nname = "quickstart"\n')
    t = 1_000.0
    recs = [record(Start(run_id=run_id, preset="quickstart", config={}, precision=run_id.split("-")[-1],
                         world_size=1, device={"type": device, "name": "Test GPU", "count": 1}, torch="2.x",
                         host="test", pid=1, total_steps=steps, steps_per_epoch=steps // 2, epochs=2), t)]
    for step in range(every, steps + 1, every):
        t += every * step_ms / 1000
        recs.append(record(Step(step=step, epoch=1 + (step > steps // 2), loss=1.0, lr=None, scale=None, skipped=0,
                                skipped_total=0, samples_per_s=64 * 1000 / step_ms, step_time_ms=step_ms,
                                data_wait_ms=wait_ms, mem={"peak_allocated": 1e9}), t))
        if step == steps // 2:          # the evaluation and checkpoint between the two epochs
            t += eval_s
            recs.append(record(Epoch(epoch=1, train_loss=1.0, val_loss=1.0, val_acc=0.5,
                                     epoch_time_s=steps // 2 * step_ms / 1000, eval_time_s=eval_s,
                                     checkpoint_time_s=0.0), t))
    recs.append(record(End(status="completed", total_time_s=t - 1_000.0, steps=steps, final_loss=1.0), t))
    write_records(run / "events.jsonl", recs)


def test_speed_up_ignores_a_long_evaluation(cli, runs_dir):
    write_run(runs_dir, "20261123-100000-qs-fp32", step_ms=20.0)
    write_run(runs_dir, "20261123-100001-qs-fp16", step_ms=10.0, eval_s=300.0)   # twice as fast, slow eval
    proc = cli("compare", "20261123-100000-qs-fp32", "20261123-100001-qs-fp16", "--format", "json", check=True)
    base, amp = json.loads(proc.stdout)
    assert amp["total_time_s"] > 100 * base["total_time_s"] / 2     # the evaluation is in the total time
    assert amp["speedup"] == pytest.approx(2.0, rel=1e-6)           # and not in the speed-up
    assert base["data_wait"] == 0 and amp["input_bound"] is None


def test_an_input_bound_run_is_flagged_in_every_format(cli, runs_dir):
    write_run(runs_dir, "20261123-100000-qs-fp32", step_ms=20.0, wait_ms=2.0)
    write_run(runs_dir, "20261123-100001-qs-fp16", step_ms=19.0, wait_ms=12.0)
    ids = ["20261123-100000-qs-fp32", "20261123-100001-qs-fp16"]
    table = cli("compare", *ids, check=True).stdout
    assert "data wait" in table.splitlines()[0]
    assert "10%" in table and "63% (input-bound)" in table
    assert ("20261123-100001-qs-fp16 (fp16): input-bound: the GPU waited for data 63% of the time; its speed-up "
            "measures the input pipeline, not AMP") in table
    assert "20261123-100000-qs-fp32 (fp32): input-bound" not in table
    csv_text = cli("compare", *ids, "--format", "csv", check=True).stdout
    header, _, second = csv_text.splitlines()[:3]
    assert "data_wait" in header.split(",") and "0.63" in second
    assert "input-bound" in cli("compare", *ids, "--format", "markdown", check=True).stdout
