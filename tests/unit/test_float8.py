"""amp.float8: torchao's float8 and MXFP8 training as one more precision mode. Which linears
convert (torchtitan's rules), the variants fp8 / fp8-rowwise / mxfp8, the one-line refusal without
torchao, the float8 numerics (SQNR, amax, scale, underflow) and the alarm that names a collapsing
layer; and, in real processes, each recipe training gpt-text with falling loss, and `amptui ab`."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from amptui.core import modes
from amptui.core.config import values as config
from amptui.core.config import variants as ab
from amptui.core.config.precision import Precision
from amptui.core.errors import ConfigError, UserError
from amptui.core.numerics import summarize
from amptui.telemetry.alarms import HeadroomAlarms
from amptui.telemetry.numerics import RangeSampler
from amptui.telemetry.probes.float8 import FLOAT8_MAX, add_blocks, block_spread, block_underflow, cast_masks
from amptui.trainer.gpt import GPT  # noqa: E402
from amptui.trainer.modes import float8  # noqa: E402 - after the skip: it converts with torchao

RECIPES = ("tensorwise", "rowwise", "mxfp8")


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
