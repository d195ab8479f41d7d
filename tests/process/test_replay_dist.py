"""numerics.trace_nonfinite under torchrun (two gloo ranks on the CPU): a skipped step is replayed
on every rank with no hang -- under DDP outside its reducer, under FSDP as a collective -- training
goes on as if no replay had happened, and rank 0's scaler record names the first non-finite module,
also when only another rank's batch overflowed."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import pytest
from support.cli import amptui
from support.records import events

from amptui.core.run import runs

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

KNOWN = "blocks.3.mlp.proj"  # numerics-lab's last MLP output passes float16's 65,504 on every batch
# sampling off: only the replay can name the module; log.every=1: every skipped step is replayed
LAB = ["--set", "run.max_steps=2", "--set", "data.batch_size=4", "--set", "data.val_samples=0",
       "--set", "log.checkpoint_every=0", "--set", "log.every=1", "--set", "numerics.every=0"]
# gpt-text tiny, its loss scale started far too high: the first steps back off (calibration), then it trains
CALIBRATING = ["--set", "model.n_layer=2", "--set", "model.n_embd=32", "--set", "model.n_head=2",
               "--set", "model.block_size=32", "--set", "data.batch_size=8", "--set", "data.train_samples=256",
               "--set", "data.val_samples=0", "--set", "log.checkpoint_every=0", "--set", "log.every=1",
               "--set", "run.max_steps=10", "--set", "amp.dtype=float16", "--set", "amp.init_scale=524288",
               "--set", "numerics.trace_nonfinite=true"]


def two_ranks(mode: str) -> list[str]:
    return ["--set", f"dist.mode={mode}", "--set", "dist.nproc_per_node=2"]


def run_together(runs_dir, *commands: list[str]) -> list[tuple[list[dict], list[dict]]]:
    """The runs at once (each is mostly process start-up), each to its end within the timeout (a
    hang fails there); both ranks' records of each."""
    with ThreadPoolExecutor(len(commands)) as pool:
        procs = list(pool.map(lambda args: amptui(*args, timeout=150), commands))
    ended = []
    for proc, args in zip(procs, commands, strict=True):
        assert proc.returncode == 0, proc.stdout + proc.stderr
        (run_dir,) = [d for d in runs_dir.iterdir() if f"-{args[1]}-" in d.name]  # one run per preset
        assert runs.load_run(run_dir).status == "completed", (run_dir / "output.log").read_text()
        ended.append((events(run_dir), events(run_dir, "events.rank1.jsonl")))
    return ended


def backoffs(records: list[dict]) -> list[dict]:
    return [r for r in records if r["kind"] == "scaler" and r["event"] == "backoff"]


def steps(records: list[dict]) -> list[tuple]:
    return [(r["step"], r["skipped"], r["scale"]) for r in records if r["kind"] == "step"]


def assert_known_module_named(rank0: list[dict], rank1: list[dict]) -> None:
    """Both steps skipped on both ranks; each rank's replay named the known module with the value
    that crossed float16's range (measured again in float32)."""
    for records in (rank0, rank1):
        found = backoffs(records)
        assert [b["step"] for b in found] == [1, 2]
        for b in found:
            first = b["first_nonfinite"]
            assert first["module"] == KNOWN and first["where"] == "forward", first
            assert first["value"] > 65504 and first["text"].startswith(f"{KNOWN} (forward, float16 max exceeded: ")
    assert steps(rank0) == steps(rank1)


def test_ddp_replays_outside_the_reducer_and_rank_0_names_the_module(runs_dir):
    """Two micro-batches per step (the replay runs both, no all-reduce); step 2's DDP backward after
    step 1's replay all-reduces as usual."""
    (lab,) = run_together(runs_dir, ["run", "numerics-lab", *two_ranks("ddp"), *LAB, "--set", "amp.accumulate=2"])
    assert_known_module_named(*lab)


def test_fsdp_replays_collectively_and_leaves_training_as_it_was(runs_dir):
    """numerics-lab sharded: the known module named, with its value (its all-gathered float16
    weights copied to float32 for that). gpt-text sharded, calibrating its loss scale: every backoff
    replayed (all ranks together, gradients reduce-scattered and dropped), every one named on rank 0
    -- from another rank's replay when rank 0's own batch stayed finite -- and the steps after the
    last backoff train: a replay's gradients left in FSDP's buffers would overflow the next step."""
    lab, calibrating = run_together(runs_dir, ["run", "numerics-lab", *two_ranks("fsdp"), *LAB],
                                    ["run", "gpt-text", *two_ranks("fsdp"), *CALIBRATING])
    assert_known_module_named(*lab)

    rank0, rank1 = calibrating
    assert steps(rank0) == steps(rank1)
    found = backoffs(rank0)
    assert found and [b["step"] for b in found] == [b["step"] for b in backoffs(rank1)]
    for b in found:
        assert "first_nonfinite" in b, f"step {b['step']} backed off and no rank's replay found inf/NaN: {steps(rank0)}"
        first = b["first_nonfinite"]
        assert first["where"] in ("forward", "backward") and first["module"], first
        if "rank" in first:  # rank 0's batch stayed finite: the rank whose batch overflowed
            assert first["rank"] == 1 and first["text"].endswith(" on rank 1"), first
    after = [r for r in rank0 if r["kind"] == "step" and r["step"] > found[-1]["step"]]
    assert len(after) >= 2 and not any(r["skipped"] for r in after), steps(rank0)
    assert all(math.isfinite(r["loss"]) for r in after)
