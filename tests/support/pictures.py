"""Canned runs for the picture tests: written by code, so each shape a plot must survive is plain to see.

`write_resumed_run` writes a scaler-lab run that stopped at step 120 and was resumed from its step-80
checkpoint (the steps rewind), with a flat learning rate, a flat RSS, one throughput outlier
(step 60) and backoffs whose overflow lists hold long layer names.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

from support.dashboard import FIXTURES, SCALER

RESUMED = "20261122-100000-scaler-lab-res1"
TWIN = "20261122-100500-scaler-lab-twin"  # the same records under another id: two identical curves
T0 = 1795400000.0
MIB = 1024 ** 2
LAYERS = ["features.0.weight", "features.4.weight", "classifier.attention.out_proj.weight", "head.bias",
          "features.8.bias"]


def _start(run_id: str, config: dict, t: float, resumed_from: int | None) -> dict:
    return {"v": 1, "kind": "start", "t": t, "rank": 0, "run_id": run_id, "preset": "scaler-lab", "config": config,
            "world_size": 1, "device": {"type": "cpu", "name": "Test CPU", "count": 1, "index": None},
            "torch": "2.14.1", "host": "vm", "pid": 1, "total_steps": 160, "steps_per_epoch": 40, "epochs": 4,
            "precision": "autocast float16 + GradScaler", "resumed_from": resumed_from}


def _steps(first: int, last: int, t: float, scale_exp: int) -> list[dict]:
    out = []
    for step in range(first, last + 1):
        t += 0.05
        if step % 25 == 0:  # a backoff with the parameters that overflowed
            old = 2.0 ** scale_exp
            scale_exp -= 1
            out.append({"v": 1, "kind": "scaler", "t": t, "rank": 0, "step": step, "event": "backoff",
                        "old_scale": old, "new_scale": old / 2, "overflow": LAYERS})
        elif step % 25 == 12:
            old = 2.0 ** scale_exp
            scale_exp += 1
            out.append({"v": 1, "kind": "scaler", "t": t, "rank": 0, "step": step, "event": "growth",
                        "old_scale": old, "new_scale": old * 2})
        loss = 2.3 * math.exp(-step / 90) + 0.05 * math.sin(step * 1.7)
        speed = 5200.0 if step == 60 else 1000.0 + 40 * math.sin(step * 0.9)  # one outlier
        out.append({"v": 1, "kind": "step", "t": t, "rank": 0, "step": step, "epoch": (step - 1) // 40 + 1,
                    "loss": loss, "lr": 0.001, "scale": 2.0 ** scale_exp, "skipped": int(step % 25 == 0),
                    "skipped_total": step // 25, "samples_per_s": speed, "step_time_ms": 32000 / speed,
                    "data_wait_ms": 0.1, "mem": {"rss": 700 * MIB + (step % 3) * 4096, "peak_rss": 700 * MIB + 8192}})
        if step % 40 == 0:
            out.append({"v": 1, "kind": "epoch", "t": t, "rank": 0, "epoch": step // 40, "train_loss": loss,
                        "val_loss": loss + 0.1, "val_acc": 0.2 + step / 400, "epoch_time_s": 2.0,
                        "eval_time_s": 0.1, "checkpoint_time_s": 0.01})
    return out


def write_resumed_run(root: Path, run_id: str = RESUMED) -> Path:
    run = Path(root) / run_id
    run.mkdir(parents=True)
    shutil.copy(FIXTURES / "runs" / SCALER / "config.toml", run / "config.toml")
    first = json.loads((FIXTURES / "runs" / SCALER / "events.jsonl").read_text().splitlines()[0])
    config = first["config"]
    records = [_start(run_id, config, T0, None), *_steps(1, 120, T0, 20)]
    records.append({"v": 1, "kind": "end", "t": T0 + 7, "rank": 0, "status": "stopped", "total_time_s": 7.0,
                    "steps": 120, "final_loss": 0.6, "val_acc": 0.5, "peak_mem": 700 * MIB + 8192})
    records += [_start(run_id, config, T0 + 60, 80), *_steps(81, 160, T0 + 60, 18)]
    records.append({"v": 1, "kind": "end", "t": T0 + 66, "rank": 0, "status": "completed", "total_time_s": 6.0,
                    "steps": 160, "final_loss": 0.4, "val_acc": 0.6, "peak_mem": 700 * MIB + 8192})
    (run / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (run / "output.log").write_text("stopped at step 120\nresumed from step 80\ncompleted: 160 steps\n")
    return run


def write_twin_runs(root: Path) -> tuple[Path, Path]:
    return write_resumed_run(root, RESUMED), write_resumed_run(root, TWIN)


# --- an fp32 baseline beside a float16 run with range samples (compare's TF32 note and headroom) ---
FP32_BASELINE = "20261124-080000-scaler-lab-fp32"  # fp32 on an A100: TF32 state recorded, numerics off
FP16_SAMPLED = "20261124-080100-scaler-lab-fp16"   # float16 + GradScaler, range samples every 32 steps
ON_A100 = {"matmul": False, "cudnn": True, "api": "fp32_precision", "supported": True}
A100 = {"type": "cuda", "name": "NVIDIA A100-SXM4-40GB", "count": 1, "index": 0}


def _scaler_lab_copy(root: Path, run_id: str, amp_config: str, numerics_config: str) -> tuple[Path, list[dict]]:
    run = Path(root) / run_id
    run.mkdir(parents=True)
    config = (FIXTURES / "runs" / SCALER / "config.toml").read_text().replace('device = "cpu"', 'device = "cuda"')
    config = config.replace("autocast = true\ndtype = \"float16\"\ngrad_scaler = true", amp_config)
    (run / "config.toml").write_text(config + numerics_config)
    records = [json.loads(line) for line in (FIXTURES / "runs" / SCALER / "events.jsonl").read_text().splitlines()]
    records[0] = {**records[0], "run_id": run_id, "device": A100, "tf32": ON_A100}
    (run / "output.log").write_text("completed: 256 steps\n")
    return run, records


def write_headroom_pair(root: Path) -> tuple[Path, Path]:
    """Run 1 the fp32 baseline (no scaler, half the speed, numerics off), run 2 the same scaler-lab
    in float16 whose classifier came within 2.3 bits of float16's largest value."""
    baseline, records = _scaler_lab_copy(root, FP32_BASELINE, "autocast = false\ndtype = \"float16\"\n"
                                         "grad_scaler = false", "\n[numerics]\nevery = 0\n")
    records[0]["precision"] = "fp32"
    kept = []
    for r in records:
        if r["kind"] == "scaler":
            continue
        if r["kind"] == "step":
            r = {**r, "skipped": 0, "skipped_total": 0, "samples_per_s": r["samples_per_s"] / 2,
                 "step_time_ms": r["step_time_ms"] * 2}
        kept.append(r)
    (baseline / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    sampled, records = _scaler_lab_copy(root, FP16_SAMPLED, "autocast = true\ndtype = \"float16\"\n"
                                        "grad_scaler = true", "\n[numerics]\nevery = 32\n")
    out = []
    for r in records:
        out.append(r)
        if r["kind"] == "step" and r["step"] % 32 == 0:
            narrow = 2.26 + (256 - r["step"]) / 64  # the classifier's output grows as it learns
            layers = [{"name": "features.0", "forward": 9.5, "grad": 7.1, "underflow": 0.01},
                      {"name": "features.3", "forward": 6.8, "grad": 5.2, "underflow": 0.02},
                      {"name": "classifier.1", "forward": round(narrow, 2), "grad": 4.4, "underflow": 0.0}]
            out.append({"v": 1, "kind": "numerics", "t": r["t"], "rank": 0, "step": r["step"], "dtype": "float16",
                        "max_finite": 65504.0, "layers": layers})
    (sampled / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in out))
    return baseline, sampled


# --- a float8 run (amp.float8 = "rowwise", emulated on a CPU) with float8 numerics every 4 steps ---
FLOAT8_RUN = "20261126-090000-gpt-text-fp8r"
FLOAT8_LAYERS = ["blocks.0.attn.proj", "blocks.0.mlp.fc", "blocks.0.mlp.proj", "blocks.1.attn.qkv",
                 "blocks.1.attn.proj", "blocks.1.mlp.fc", "blocks.1.mlp.proj"]
FLOAT8_KEPT = {"blocks.0.attn.qkv": "first linear", "head": "last linear"}


def float8_sqnr(name: str, step: int) -> float:
    """The canned SQNR: blocks.1.mlp.proj sinks from 21 dB to under the alarm's 10 as its inputs
    grow outliers, blocks.0.mlp.fc sits at 17, the others at 24-30 (torchao's usual range)."""
    if name == "blocks.1.mlp.proj":
        return round(21.0 - 13.0 * step / 120, 2)
    if name == "blocks.0.mlp.fc":
        return round(17.0 + 0.5 * math.sin(step), 2)
    return round(24.0 + FLOAT8_LAYERS.index(name) + math.sin(step / 7), 2)


def write_float8_run(root: Path) -> Path:
    """A completed 120-step gpt-text run, float8 rowwise on 7 of its 9 linears (emulated), written
    with the record classes as the trainer writes them."""
    from amptui.core.config import presets
    from amptui.core.config.precision import Precision
    from amptui.core.config.values import to_toml
    from amptui.core.stream.records import End, Numerics, Start, Step, WarningRecord
    from amptui.telemetry.alarms import HeadroomAlarms
    from support.records import record, write_records

    alarms = HeadroomAlarms("bfloat16")
    cfg = presets.find_preset("gpt-text").config({"model.n_layer": 2, "amp.float8": "rowwise", "numerics.every": 4,
                                                  "run.max_steps": 120})
    run = Path(root) / FLOAT8_RUN
    run.mkdir(parents=True)
    (run / "config.toml").write_text(to_toml(cfg.to_dict()))
    precision = Precision.from_config(cfg, "cpu").as_record()
    converted = {"recipe": "rowwise", "converted": 7, "linears": 9, "layers": FLOAT8_LAYERS, "kept": FLOAT8_KEPT,
                 "emulated": True}
    precision["float8"] = converted
    start = Start(run_id=FLOAT8_RUN, preset="gpt-text", config=cfg.to_dict(), precision=precision, world_size=1,
                  device={"type": "cpu", "name": "Test CPU", "count": 1, "index": None}, torch="2.14.1", host="vm",
                  pid=1, total_steps=120, steps_per_epoch=120, epochs=1)
    records = [record(start, T0),
               record(WarningRecord(message="float8 rowwise: 7 of 9 linears (kept in high precision: blocks.0.attn.qkv "
                                            "(first linear), head (last linear)); emulated: numerics are real, speed "
                                            "is not (this CPU has no float8 GEMM, so torchao emulates it)",
                                    code="float8"), T0 + 0.5)]
    t = T0 + 1.0
    for step in range(1, 121):
        t += 0.2
        loss = 5.5 * math.exp(-step / 80) + 0.05 * math.sin(step * 1.3)
        records.append(record(Step(step=step, epoch=1, loss=loss, lr=0.001, scale=None, skipped=0, skipped_total=0,
                                   samples_per_s=40.0, step_time_ms=200.0, data_wait_ms=0.1,
                                   mem={"rss": 900 * MIB, "peak_rss": 900 * MIB}), t))
        if step % 4 == 0:
            layers = [{"name": f"blocks.{i}", "forward": 120.0 - i, "grad": 110.0, "underflow": 0.0} for i in (0, 1)]
            float8 = [{"name": name, "recipe": "rowwise", "sqnr_db": float8_sqnr(name, step),
                       "input": {"format": "e4m3", "amax": 6.0, "scale": 448.0 / 6.0, "underflow": 0.001},
                       "weight": {"format": "e4m3", "amax": 0.2, "scale": 448.0 / 0.2, "underflow": 0.0},
                       "grad_output": {"format": "e4m3", "amax": 1e-3, "scale": 448.0 / 1e-3, "underflow": 0.004}}
                      for name in FLOAT8_LAYERS]
            sample = Numerics(step=step, dtype="bfloat16", max_finite=3.3895e38, layers=layers, probes={"float8": float8})
            records.append(record(sample, t))
            records += [record(WarningRecord(message=a.message, code=a.code), t) for a in alarms.observe([sample])]
    records.append(record(End(status="completed", total_time_s=24.0, steps=120, final_loss=1.2,
                              peak_mem=900 * MIB), t + 0.1))
    write_records(run / "events.jsonl", records)
    (run / "output.log").write_text("float8 rowwise: 7 of 9 linears\ncompleted: 120 steps\n")
    return run
