"""Two variants of one A/B as run folders (`two_variants`: fp32 ran its 20 steps, bf16 was stopped at 10, where
its loss equals fp32's), written by `write_run`."""

from __future__ import annotations

from amptui.core.stream.records import End, Start, Step
from support.records import record, write_records

FP32, BF16 = "20261123-100000-qs-fp32", "20261123-100001-qs-bf16"


def write_run(root, run_id, *, losses, step_ms, total, status="completed", every=5, precision="fp32"):
    """A run's events: a step record every `every` steps with losses[i] and step_ms[i] (cycled)."""
    run = root / run_id
    run.mkdir(parents=True)
    (run / "config.toml").write_text('[run]\nname = "quickstart"\n')
    t = 1_000.0
    recs = [record(Start(run_id=run_id, preset="quickstart", config={}, precision=precision, world_size=1,
                         device={"type": "cpu", "name": "test", "count": 1}, torch="2.x", host="test", pid=1,
                         total_steps=total), t)]
    for i, loss in enumerate(losses):
        ms = step_ms[i % len(step_ms)]
        t += every * ms / 1000
        recs.append(record(Step(step=every * (i + 1), epoch=1, loss=loss, lr=None, scale=None, skipped=0,
                                skipped_total=0, samples_per_s=32 * 1000 / ms, step_time_ms=ms,
                                data_wait_ms=None, mem={}), t))
    steps = every * len(losses)
    recs.append(record(End(status=status, total_time_s=t - 1_000.0, steps=steps, final_loss=losses[-1]), t))
    write_records(run / "events.jsonl", recs)


def two_variants(runs_dir):
    """fp32 ran its 20 steps; bf16 was stopped at 10, where its loss equals fp32's."""
    write_run(runs_dir, FP32, losses=[2.5, 2.256, 2.1, 2.0594], step_ms=[20.0], total=20)
    write_run(runs_dir, BF16, losses=[2.5, 2.256], step_ms=[20.0], total=20, status="stopped",
              precision="autocast bfloat16")
