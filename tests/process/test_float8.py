"""amp.float8: torchao's float8 and MXFP8 training as one more precision mode. Which linears
convert (torchtitan's rules), the variants fp8 / fp8-rowwise / mxfp8, the one-line refusal without
torchao, the float8 numerics (SQNR, amax, scale, underflow) and the alarm that names a collapsing
layer; and, in real processes, each recipe training gpt-text with falling loss, and `amptui ab`."""

from __future__ import annotations

import json

import pytest
import torch
from support.cli import amptui
from support.records import events, only_run

from amptui.core.comparison.lossgaps import noise_band
from amptui.core.series import Series
from amptui.trainer.modes import float8  # noqa: E402 - after the skip: it converts with torchao

RECIPES = ("tensorwise", "rowwise", "mxfp8")


# --- real runs -------------------------------------------------------------------------------------

TINY = ["--set", "model.n_layer=2", "--set", "model.block_size=32", "--set", "data.batch_size=8",
        "--set", "data.train_samples=480", "--set", "data.val_samples=16", "--set", "run.epochs=1",
        "--set", "run.max_steps=30", "--set", "log.every=5", "--set", "numerics.every=10",
        "--set", "log.checkpoint_every=0"]


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("recipe", RECIPES)
def test_gpt_text_trains_with_each_float8_recipe(recipe, runs_dir):
    proc = amptui("run", "gpt-text", "--set", f"amp.float8={recipe}", *TINY, timeout=840)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [run_dir] = runs_dir.iterdir()
    recs = events(run_dir)
    start = recs[0]
    assert start["precision"]["float8"]["converted"] == 7 and start["precision"]["float8"]["emulated"] is True
    notes = [r["message"] for r in recs if r["kind"] == "warning" and r.get("code") == "float8"]
    assert notes and notes[0].startswith(f"float8 {recipe}: 7 of 9 linears") and float8.EMULATED_NOTE in notes[0]
    losses = [r["loss"] for r in recs if r["kind"] == "step"]
    assert len(losses) == 6 and losses[-1] < losses[0] - 0.5, losses
    samples = [r for r in recs if r["kind"] == "numerics"]
    assert [s["step"] for s in samples] == [10, 20, 30]
    assert all(10 <= layer["sqnr_db"] <= 50 for s in samples for layer in s["float8"])
    table = amptui("numerics", run_dir.name, "--runs-dir", str(runs_dir), check=True).stdout
    assert f"float8 ({recipe}), latest sample:" in table and "blocks.1.mlp.fc" in table
    as_json = json.loads(amptui("numerics", run_dir.name, "--runs-dir", str(runs_dir), "--format", "json",
                                check=True).stdout)
    assert {x["name"] for x in as_json["float8"]} == set(start["precision"]["float8"]["layers"])


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_ab_bf16_against_fp8_rowwise_prints_the_table_with_the_emulation_note(runs_dir):
    """And every recipe's loss (tensorwise, rowwise, mxfp8) ends within the bf16 run's noise band."""
    proc = amptui("ab", "gpt-text", "--variants", "bf16,fp8-rowwise,fp8,mxfp8", *TINY, timeout=840)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = " ".join(proc.stdout.split())  # sentences wrap at the terminal's width
    assert "fp8-rowwise" in out and "bf16" in out
    assert "float8 rowwise: 7 of 9 linears; emulated (no float8 GEMM on this device): numerics are real, " \
           "speed is not" in out, proc.stdout
    # the same loss: float8's final loss within the bf16 run's noise band (core.comparison.lossgaps, as compare reads it)
    runs = sorted((d for d in runs_dir.iterdir() if d.is_dir() and not d.name.startswith(".")),
                  key=lambda d: events(d)[0]["t"])
    bf16, *float8s = ([r for r in events(d) if r["kind"] == "step"] for d in runs)
    baseline = Series()
    for r in bf16:
        baseline.add(r["step"], r["loss"])
    assert len(float8s) == 3 and all(steps[-1]["step"] == 30 for steps in [bf16, *float8s])
    assert all(abs(steps[-1]["loss"] - bf16[-1]["loss"]) <= noise_band(baseline) for steps in float8s), \
        (noise_band(baseline), [steps[-1]["loss"] for steps in [bf16, *float8s]])


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_gpt_text_sharded_on_two_ranks_trains_with_tensorwise_float8(runs_dir):
    """dist.mode=fsdp with amp.float8=tensorwise on gloo (emulated): both ranks train with falling
    loss, the weights all-gathered in float8, and the numerics name each float8 layer's SQNR."""
    proc = amptui("run", "gpt-text", "--set", "dist.mode=fsdp", "--set", "dist.nproc_per_node=2",
                  "--set", "amp.float8=tensorwise", "--set", "amp.dtype=bfloat16", "--set", "model.n_embd=64",
                  "--set", "model.n_head=2", *TINY, timeout=840)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dir = only_run(runs_dir)
    rank0, rank1 = events(run_dir), events(run_dir, "events.rank1.jsonl")
    precision = rank0[0]["precision"]
    assert precision["words"] == "FSDP bfloat16 params, float32 reduce + float8 tensorwise"
    assert precision["float8"]["converted"] == 7 and precision["float8"]["fsdp_float8_all_gather"] is True
    assert rank0[0]["sharded"]["params_bytes"] < 0.6 * rank0[0]["sharded"]["model_params_bytes"]
    losses = [r["loss"] for r in rank0 if r["kind"] == "step"]
    assert len(losses) == 6 and losses[-1] < losses[0] - 0.5, losses
    assert [r["step"] for r in rank1 if r["kind"] == "step"] == [r["step"] for r in rank0 if r["kind"] == "step"]
    samples = [r for r in rank0 if r["kind"] == "numerics"]
    assert [s["step"] for s in samples] == [10, 20, 30]
    assert all(10 <= layer["sqnr_db"] <= 50 and layer["weight"]["amax"] < 1 for s in samples for layer in s["float8"])


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_fsdp_with_tensorwise_float8_trains_on_cuda(runs_dir):
    """On CUDA (nccl, one rank per GPU): the float8 all-gather and the precomputed scales train; on
    compute capability 8.9+ the GEMMs are real float8 (n_embd 512: a few linears pass torchao's size
    thresholds), below it torchao emulates and says so."""
    ranks = min(2, torch.cuda.device_count())
    amptui("run", "gpt-text", "--set", "run.device=cuda", "--set", "dist.mode=fsdp", "--set", f"dist.nproc_per_node={ranks}",
           "--set", "amp.float8=tensorwise", "--set", "amp.dtype=bfloat16", "--set", "model.n_embd=512",
           "--set", "model.n_head=8", "--set", "run.max_steps=40", "--set", "log.every=5", "--set", "numerics.every=10",
           check=True, timeout=840)
    rank0 = events(only_run(runs_dir))
    converted = rank0[0]["precision"]["float8"]
    assert converted["converted"] >= 1 and converted["fsdp_float8_all_gather"] is True, converted
    assert converted["emulated"] == (torch.cuda.get_device_capability(0) < (8, 9))
    steps = [r for r in rank0 if r["kind"] == "step"]
    assert steps[-1]["loss"] < steps[0]["loss"] and rank0[-1]["status"] == "completed"
    assert all(10 <= layer["sqnr_db"] <= 50 for r in rank0 if r["kind"] == "numerics" for layer in r["float8"])
