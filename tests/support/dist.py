"""Canned two-rank runs of the same gpt-text model, one DDP and one FSDP (bfloat16 policy), as the
trainer leaves them: config.toml, rank 0's events.jsonl and rank 1's events.rank1.jsonl, each rank
with its own start record (`replica` / `sharded`: what it keeps), step records and end.

DDP keeps the whole model on each rank: 4 MiB of parameters + 8 MiB of AdamW moments. FSDP keeps
half of each. The peaks (CPU RSS) are chosen so the highest rank is rank 1 in both runs.
"""

from __future__ import annotations

from pathlib import Path

from amptui.core.config import presets
from amptui.core.config.precision import Precision
from amptui.core.config.values import to_toml
from amptui.core.stream.records import End, Start, Step
from support.records import record, write_records

MIB = 2 ** 20
DDP_RUN = "20261124-100000-gpt-text-dd01"
FSDP_RUN = "20261124-100500-gpt-text-fs01"
T0 = 1795500000.0
PEAKS = {"ddp": (700 * MIB, 710 * MIB), "fsdp": (690 * MIB, 705 * MIB)}  # rank 0, rank 1
HELD = {"ddp": ("replica", 4 * MIB), "fsdp": ("sharded", 2 * MIB)}       # start field, params bytes per rank


def write_dist_run(root: Path, mode: str, run_id: str | None = None, precision_keys: dict | None = None) -> Path:
    """A completed 2-rank gpt-text run of dist.mode `mode` ("ddp" or "fsdp") under `root`
    (bfloat16 unless `precision_keys`, e.g. an A/B variant's, say otherwise)."""
    run_id = run_id or (DDP_RUN if mode == "ddp" else FSDP_RUN)
    cfg = presets.find_preset("gpt-text").config({"dist.mode": mode, "dist.nproc_per_node": 2, "amp.dtype": "bfloat16",
                                                  **(precision_keys or {})})
    run = Path(root) / run_id
    run.mkdir(parents=True)
    (run / "config.toml").write_text(to_toml(cfg.to_dict()))
    precision = Precision.from_config(cfg, "cpu").as_record()
    field, params = HELD[mode]
    held = {"params_bytes": params, "optimizer_bytes": 2 * params, "model_params_bytes": 4 * MIB}
    t0 = T0 + (0 if mode == "ddp" else 600)
    for rank, name in ((0, "events.jsonl"), (1, "events.rank1.jsonl")):
        start = Start(run_id=run_id, preset="gpt-text", config=cfg.to_dict(), precision=precision, world_size=2,
                      device={"type": "cpu", "name": "Test CPU", "count": 1, "index": None}, torch="2.14.1",
                      host="vm", pid=1, total_steps=8, steps_per_epoch=8, epochs=1, **{field: held})
        records = [record(start, t0, rank)]
        for step in (4, 8):
            peak = PEAKS[mode][rank] - (8 - step) * MIB  # rising to the rank's peak at step 8
            records.append(record(Step(step=step, epoch=1, loss=5.4 - step * 0.05, lr=0.001, scale=None, skipped=0,
                                       skipped_total=0, samples_per_s=500.0, step_time_ms=32.0, data_wait_ms=0.1,
                                       mem={"rss": peak, "peak_rss": peak}), t0 + step * 0.1, rank))
        records.append(record(End(status="completed", total_time_s=1.0, steps=8, final_loss=5.0,
                                  peak_mem=PEAKS[mode][rank]), t0 + 1.0, rank))
        write_records(run / name, records)
    return run
