"""amp.float8: torchao's float8 and MXFP8 training as one more precision mode. Which linears
convert (torchtitan's rules), the variants fp8 / fp8-rowwise / mxfp8, the one-line refusal without
torchao, the float8 numerics (SQNR, amax, scale, underflow) and the alarm that names a collapsing
layer; and, in real processes, each recipe training gpt-text with falling loss, and `amptui ab`."""

from __future__ import annotations

import dataclasses
import importlib.util
import json

import pytest
import torch
from support.cli import amptui, one_clear_line
from support.records import events, only_run
from torch import nn

from amptui.core import modes
from amptui.core.comparison.lossgaps import noise_band
from amptui.core.config import values as config
from amptui.core.config import variants as ab
from amptui.core.config.precision import Precision
from amptui.core.errors import ConfigError, UserError
from amptui.core.modes.float8 import recipe_of
from amptui.core.numerics import summarize
from amptui.core.series import Series
from amptui.telemetry.alarms import HeadroomAlarms
from amptui.telemetry.numerics import RangeSampler
from amptui.telemetry.probes.float8 import FLOAT8_MAX, add_blocks, block_spread, block_underflow, cast_masks

torchao = pytest.importorskip("torchao", reason="amp.float8 needs torchao (pip install 'amptui[fp8]')")

from amptui.trainer.gpt import GPT  # noqa: E402
from amptui.trainer.modes import float8  # noqa: E402 - after the skip: it converts with torchao

RECIPES = ("tensorwise", "rowwise", "mxfp8")


@pytest.fixture
def no_torchao(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torchao" else real(name, *a))


# --- the mode: variants, names, records ---------------------------------------------------------

def test_float8_variants_run_on_top_of_bf16_autocast():
    got = dict(ab.expand("bf16,fp8,fp8-rowwise,mxfp8", "cpu"))
    assert got["fp8-rowwise"] == {"amp.autocast": True, "amp.dtype": "bfloat16", "amp.grad_scaler": False,
                                  "amp.float8": "rowwise"}
    assert [got[v]["amp.float8"] for v in ("fp8", "mxfp8")] == ["tensorwise", "mxfp8"]
    for variant, recipe in zip(("fp8", "fp8-rowwise", "mxfp8"), RECIPES, strict=True):
        p = Precision.from_variant(variant)
        assert (p.short, p.words, p.mode.name) == (variant, f"autocast bfloat16 + float8 {recipe}", "float8")
        assert Precision.from_record(p.as_record()) == p and Precision.from_record(p.words) == p
        assert p.as_record()["float8"] == {"recipe": recipe}
        resolved = Precision.from_config(config.build_config({}, p.overrides()), "cpu")
        assert resolved == p
    with pytest.raises(UserError, match="choose them with --variants"):
        ab.check_overrides({"amp.float8": "rowwise"})


def test_the_preset_keys_take_a_recipe_and_a_list_of_names():
    cfg = config.build_config({"amp": {"float8": "mxfp8", "float8_skip": ["attn.proj", "head"]}})
    assert (cfg.amp.float8, cfg.amp.float8_skip) == ("mxfp8", ["attn.proj", "head"])
    assert config.build_config().amp.float8_skip == []
    with pytest.raises(ConfigError, match="amp.float8 must be one of off, tensorwise, rowwise, mxfp8"):
        config.build_config({}, config.parse_set(["amp.float8=fp4"]))
    with pytest.raises(ConfigError, match="amp.float8_skip must be a list of strings"):
        config.build_config({}, config.parse_set(["amp.float8_skip=head"]))


def test_without_torchao_float8_is_refused_in_one_line_naming_the_extra(no_torchao, cli, runs_dir):
    with pytest.raises(UserError, match=r"--variants fp8-rowwise: float8 training needs torchao, which is not "
                                        r"installed: pip install 'amptui\[fp8\]'"):
        ab.expand("bf16,fp8-rowwise", "cpu")
    line = one_clear_line(cli("run", "gpt-text", "--set", "amp.float8=rowwise"))
    assert "amp.float8 = \"rowwise\"" in line and "pip install 'amptui[fp8]'" in line
    assert not runs_dir.exists() or not any(runs_dir.iterdir())  # nothing made
    line = one_clear_line(cli("ab", "gpt-text", "--variants", "bf16,mxfp8"))
    assert "mxfp8" in line and "amptui[fp8]" in line


# --- which linears convert --------------------------------------------------------------------

class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(64, 64)
        self.a = nn.Linear(64, 64)
        self.odd = nn.Linear(64, 40)      # 40 is not a multiple of 16
        self.b = nn.Linear(40, 48)        # 48: a multiple of 16, not of 32 (MXFP8's blocks)
        self.attn_proj = nn.Linear(48, 64)
        self.out = nn.Linear(64, 64)


def test_which_linears_convert_follows_torchtitans_rules():
    chosen, kept = float8.choose(Stack(), "rowwise", ["attn_proj"], hardware=False)
    assert list(chosen) == ["a"]
    assert kept == {"inp": "first linear", "odd": "features not divisible by 16", "b": "features not divisible by 16",
                    "attn_proj": "amp.float8_skip", "out": "last linear"}
    chosen, kept = float8.choose(Stack(), "mxfp8", [], hardware=False)
    assert list(chosen) == ["a"] and kept["attn_proj"] == "features not divisible by 32"
    assert float8.choose(Stack(), "tensorwise", [], hardware=False)[0] == {"a": "tensorwise", "attn_proj": "tensorwise"}
    # on float8 hardware, GEMMs too small to gain stay in high precision (torchao's thresholds)
    assert float8.choose(Stack(), "tensorwise", [], hardware=True) == (
        {}, {"inp": "first linear", "a": "GEMM too small to gain", "odd": "features not divisible by 16",
             "b": "features not divisible by 16", "attn_proj": "GEMM too small to gain", "out": "last linear"})


class Biased(nn.Module):
    """Three linears with a bias of +3: the middle one converts (the first and last stay)."""

    def __init__(self):
        super().__init__()
        self.inp, self.mid, self.out = nn.Linear(64, 64), nn.Linear(64, 64), nn.Linear(64, 64)
        with torch.no_grad():
            self.mid.bias.fill_(3.0)

    def forward(self, x):
        return self.out(self.mid(self.inp(x)))


@pytest.mark.parametrize("recipe", RECIPES)
def test_a_float8_converted_biased_linear_keeps_its_bias(recipe):
    """torchao 0.18's MXFP8 training linear drops the bias (x @ W.T only): amptui adds it after the
    GEMM, says so in the start record, and every recipe's output and bias gradient match the
    bfloat16 linear's within float8's error (emulated on this CPU)."""
    torch.manual_seed(0)
    model, x = Biased(), torch.randn(32, 64)
    reference = nn.Linear(64, 64).to(torch.bfloat16)
    reference.load_state_dict(model.mid.state_dict())
    cfg = config.build_config({}, {"amp.float8": recipe})
    done = float8.convert(model, Precision.from_config(cfg, "cpu"), cfg, torch.device("cpu"))
    assert list(done.layers) == ["mid"]
    assert list(model.state_dict()) == ["inp.weight", "inp.bias", "mid.weight", "mid.bias", "out.weight", "out.bias"]
    want = reference(x.to(torch.bfloat16)).float()
    got = model.mid(x).float()
    diff = (got - want).detach()
    assert got.mean().item() == pytest.approx(want.mean().item(), abs=0.05)  # +3: the bias is there, once
    assert float(10 * torch.log10(want.pow(2).sum() / diff.pow(2).sum())) > 20  # float8's error, no more
    got.sum().backward()
    assert torch.allclose(model.mid.bias.grad, torch.full((64,), 32.0))  # the bias still trains
    if recipe == "mxfp8":
        assert float8.mx_drops_bias()  # torchao alone: the reason for the hook (fails when torchao fixes it)
        assert done.record()["bias_added_after_gemm"]["layers"] == ["mid"]
    else:
        assert "bias_added_after_gemm" not in done.record()


def test_mxfp8_bias_is_added_in_the_outputs_dtype_under_autocast():
    torch.manual_seed(0)
    model = Biased()
    cfg = config.build_config({}, {"amp.float8": "mxfp8"})
    float8.convert(model, Precision.from_config(cfg, "cpu"), cfg, torch.device("cpu"))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(torch.randn(32, 64))
    assert out.dtype == torch.bfloat16


# --- float8 numerics, in process ------------------------------------------------------------------

def _trained_sample(recipe: str, poison: str | None = None):
    """A tiny GPT converted to `recipe`, one sampled step under bf16 autocast; its numerics record."""
    torch.manual_seed(0)
    model = GPT(n_layer=2, n_head=2, n_embd=64, block_size=32)
    cfg = config.build_config({}, {"amp.float8": recipe})
    summary = float8.convert(model, Precision.from_config(cfg, "cpu"), cfg, torch.device("cpu"))
    if poison:
        with torch.no_grad():
            model.get_submodule(poison).weight.data[0, 0] = float("inf")
    sampler = RangeSampler(model, every=1, depth=2, dtype="bfloat16", device=torch.device("cpu"))
    sampler.prepare(1, None)
    x = torch.randint(0, 256, (4, 32))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = nn.functional.cross_entropy(model(x).float().reshape(-1, 256), x.roll(-1, 1).reshape(-1))
    loss.backward()
    sampler.step_done()
    [record] = sampler.records([b.flatten().tolist() for b in sampler.riders()])
    return summary, record


@pytest.mark.parametrize("recipe", RECIPES)
def test_each_converted_linear_gets_its_sqnr_amax_scale_and_underflow(recipe):
    summary, record = _trained_sample(recipe)
    assert summary.recipe == recipe and summary.emulated is True
    assert (summary.converted, summary.linears) == (7, 9)  # the first linear and the tied head stay
    assert float8.summary_words(summary).startswith(f"float8 {recipe}: 7 of 9 linears (kept in high precision: "
                                                    "blocks.0.attn.qkv (first linear), head (last linear))")
    layers = {layer["name"]: layer for layer in record.get("float8")}
    assert list(layers) == list(summary.layers)
    for layer in layers.values():
        assert layer["recipe"] == recipe
        assert 15 <= layer["sqnr_db"] <= 45, layer  # torchao's own tests: float8 GEMMs at roughly 15-35 dB
        for tensor in ("input", "weight", "grad_output"):
            t = layer[tensor]
            assert t["amax"] > 0 and t["scale"] == pytest.approx(FLOAT8_MAX[t["format"]] / t["amax"])
            assert 0 <= t["underflow"] < 0.5
        assert layer["grad_output"]["format"] == ("e5m2" if recipe == "tensorwise" else "e4m3")
        for tensor in ("input", "weight", "grad_output"):  # MXFP8's blocks: the worst one and the spread
            t = layer[tensor]
            if recipe != "mxfp8":
                assert "underflow_worst_block" not in t and "underflow_block_spread" not in t
            else:
                assert t["underflow"] <= t["underflow_worst_block"] <= 1 and 0 <= t["underflow_block_spread"] <= 1
    assert HeadroomAlarms("bfloat16").observe([record]) == []  # healthy layers: no alarm
    folded = summarize([{"kind": "numerics", **record.fields()}])
    assert set(folded.probes["float8"].latest) == set(layers)


def test_mxfp8_block_underflow_names_the_worst_block_the_overall_share_hides():
    """One block of 32 with an outlier: its scale zeroes its 31 small values, the other blocks keep
    theirs. Overall 31 of 128 values (24%); that block 31 of 32, the others none."""
    x = torch.ones(2, 64)
    x[0, :32] = 1e-6
    x[0, 0] = 1000.0
    amax, zeroed, nonzero = cast_masks(x, "mxfp8", "e4m3")
    assert (amax.item(), zeroed.sum().item(), nonzero.sum().item()) == (1000.0, 31, 128)
    stats = block_underflow(zeroed, nonzero)
    assert stats.device == x.device  # stays on the device: read back with the sample's one copy
    said = block_spread(stats.tolist())
    shares = torch.tensor([31 / 32, 0.0, 0.0, 0.0])
    assert said["underflow_worst_block"] == pytest.approx(31 / 32)
    assert said["underflow_block_spread"] == pytest.approx(shares.std(unbiased=False).item(), abs=1e-6)
    # a step's calls add up (gradient accumulation): the worst of the worst, the spread over all blocks
    both = torch.zeros(1, 4)
    add_blocks(both, 0, stats)
    add_blocks(both, 0, block_underflow(*cast_masks(torch.ones(2, 64), "mxfp8", "e4m3")[1:]))
    assert block_spread(both[0].tolist()) == {"underflow_worst_block": pytest.approx(31 / 32),
                                              "underflow_block_spread": pytest.approx(
                                                  torch.tensor([31 / 32] + [0.0] * 7).std(unbiased=False).item(),
                                                  abs=1e-6)}
    nothing = block_underflow(*cast_masks(torch.zeros(2, 64), "mxfp8", "e4m3")[1:])
    assert block_spread(nothing.tolist()) == {"underflow_worst_block": None, "underflow_block_spread": None}


def test_a_layer_whose_float8_values_break_is_named_by_the_alarm_with_advice():
    _, record = _trained_sample("tensorwise", poison="blocks.1.mlp.fc")
    broken = next(layer for layer in record.get("float8") if layer["name"] == "blocks.1.mlp.fc")
    assert broken["sqnr_db"] is None and broken["weight"]["amax"] is None
    alarms = HeadroomAlarms("bfloat16").observe([record])
    said = [a.message for a in alarms if a.code == "float8_sqnr"]
    assert said and said[0].startswith("blocks.1.mlp.fc's float8 tensorwise weight")
    assert 'amp.float8_skip = ["blocks.1.mlp.fc"]' in said[0] and "rowwise" in said[0]
    # a collapsed SQNR (a finite but tiny margin over the rounding error) says so too
    low = {**record.get("float8")[0], "sqnr_db": 4.2}
    alarm = HeadroomAlarms("bfloat16").observe([dataclasses.replace(record, probes={"float8": [low]},
                                                                    first_nonfinite=None)])
    assert [a.code for a in alarm] == ["float8_sqnr"] and "4.2 dB" in alarm[0].message


def test_script_hooks_label_a_loop_whose_model_torchao_converted():
    from amptui.telemetry.scripthooks.precision import AutocastSeen, loop_overrides

    model = GPT(n_layer=2, n_head=2, n_embd=64, block_size=32)
    cfg = config.build_config({}, {"amp.float8": "rowwise"})
    float8.convert(model, Precision.from_config(cfg, "cpu"), cfg, torch.device("cpu"))
    seen = AutocastSeen()
    seen.autocast_entered("cpu", torch.bfloat16)
    told = loop_overrides(seen, None, [model])
    assert told["amp.float8"] == "rowwise" and told["amp.dtype"] == "bfloat16"
    assert Precision.from_config(config.build_config({}, {k: v for k, v in told.items() if k.startswith("amp.")}),
                                 "cpu").short == "fp8-rowwise"
    assert modes.detect(modes.LoopFacts()) == {"amp.autocast": False}  # nothing converted: no float8 key


# --- FSDP2: tensorwise with torchtitan's float8 all-gather and precomputed scales --------------------

def test_fsdp_takes_tensorwise_float8_and_names_both_and_refuses_the_other_recipes(cli, runs_dir):
    cfg = config.build_config({"model": {"name": "gpt"}, "data": {"name": "text"}, "dist": {"mode": "fsdp"},
                               "amp": {"dtype": "bfloat16", "float8": "tensorwise"}})
    p = Precision.from_config(cfg, "cpu")
    assert p.words == "FSDP bfloat16 params, float32 reduce + float8 tensorwise" and p.short == "fp8"
    assert p.fsdp_policy == {"param_dtype": "bfloat16", "reduce_dtype": "float32", "sharded_dtype": "float32"}
    assert p.autocast_dtype is None  # the policy computes in bfloat16, as without float8
    assert p.as_record()["float8"] == {"recipe": "tensorwise"} and Precision.from_record(p.as_record()) == p
    assert p.fsdp_policy is not None and recipe_of(p) == "tensorwise"  # the all-gather in float8: convert says so
    for recipe in ("rowwise", "mxfp8"):
        line = one_clear_line(cli("run", "gpt-text", "--set", "dist.mode=fsdp", "--set", f"amp.float8={recipe}"))
        assert f'amp.float8 = "{recipe}" with dist.mode = "fsdp"' in line and "amp.float8=tensorwise" in line
    line = one_clear_line(cli("run", "gpt-text", "--set", "dist.mode=dp", "--set", "amp.float8=tensorwise"))
    assert 'dist.mode = "dp"' in line
    assert not runs_dir.exists() or not any(runs_dir.iterdir())  # nothing made


def test_under_fsdp_float8_all_gather_sqnr_is_measured_against_the_high_precision_weight(tmp_path):
    """One gloo rank in this process. With the float8 all-gather the forward's weight is float8
    already; the probe all-gathers the float32 shards again for its reference GEMM (read as the
    float8 weight, the SQNR came out 0 dB and the weight's amax 448, float8's largest value)."""
    from amptui.trainer import fsdp

    store = torch.distributed.FileStore(str(tmp_path / "store"), 1)
    torch.distributed.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        torch.manual_seed(0)
        model = GPT(n_layer=2, n_head=2, n_embd=64, block_size=32)
        cfg = config.build_config({}, {"amp.float8": "tensorwise", "amp.dtype": "bfloat16", "dist.mode": "fsdp"})
        precision = Precision.from_config(cfg, "cpu")
        summary = float8.convert(model, precision, cfg, torch.device("cpu"))
        assert summary.all_gather is True and summary.record()["fsdp_float8_all_gather"] is True
        fsdp.shard(model, torch.device("cpu"), 1, precision)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        sampler = RangeSampler(model, every=1, depth=2, dtype="bfloat16", device=torch.device("cpu"))
        x = torch.randint(0, 256, (4, 32))
        records = []
        for step in (1, 2):
            sampler.prepare(step, None)
            nn.functional.cross_entropy(model(x).reshape(-1, 256), x.roll(-1, 1).reshape(-1)).backward()
            sampler.step_done()
            optimizer.step()
            optimizer.zero_grad()
            float8.precompute_scales(model)  # torchtitan's second flag: the next all-gather's scales
            records += sampler.records([b.flatten().tolist() for b in sampler.riders()])
        for record in records:
            assert {layer["name"] for layer in record.get("float8")} == set(summary.layers)
            for layer in record.get("float8"):
                assert 15 <= layer["sqnr_db"] <= 45, layer
                assert 0 < layer["weight"]["amax"] < 1, layer  # the float32 weight's, not float8's 448
    finally:
        torch.distributed.destroy_process_group()


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
