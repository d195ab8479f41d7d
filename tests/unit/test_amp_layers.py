"""[amp.layers]: per-module precision. The table checked with one clear line naming the key; the
rules matched first-wins on `named_modules()` names, inherited by children; the trainer's autocast
per module (an fp32 layer computes in float32 inside a bf16 run), float8 per layer with its own
recipe, the numerics measured to each layer's own dtype; and, in a real process, a preset that
trains two layers in float8 rowwise and the rest in bf16, its start record and `compare` saying so."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from amptui.core.config import layers
from amptui.core.config import values as config
from amptui.core.config.precision import Precision
from amptui.core.errors import ConfigError, UserError
from amptui.telemetry.numerics import RangeSampler
from amptui.trainer import state as trainer_state
from amptui.trainer.gpt import GPT
from amptui.trainer.layers import LayerScope, apply_autocast
from amptui.trainer.modes import runtimes_for

CPU = torch.device("cpu")
RULES = {"blocks.*.mlp.fc": "fp8-rowwise", "head": "fp32", "blocks.*": "bf16"}


def _cfg(rules=RULES, **amp):
    return config.build_config({"amp": {"dtype": "bfloat16", **amp, "layers": rules}})


# --- the table ----------------------------------------------------------------------------------

def test_the_table_keeps_its_order_and_saves_back_as_written():
    cfg = _cfg()
    assert list(cfg.amp.layers.items()) == list(RULES.items())
    p = Precision.from_config(cfg, "cpu")
    assert p.layers == tuple(RULES.items()) and p.short == "bf16 + amp.layers"  # before a model is built
    assert Precision.from_record(p.as_record()) == p
    text = config.to_toml(config.minimal(cfg.to_dict()))
    assert '[amp.layers]\n"blocks.*.mlp.fc" = "fp8-rowwise"\nhead = "fp32"\n"blocks.*" = "bf16"' in text
    assert config.build_config(config.parse_toml(text, "saved")).amp.layers == cfg.amp.layers
    assert layers.layer_variants() == ["fp32", "fp16", "bf16", "fp8", "fp8-rowwise", "mxfp8"]


@pytest.mark.parametrize("table, said", [
    ({"blocks.*": "fp9"}, 'preset: amp.layers."blocks.*" = \'fp9\': a layer\'s precision is one of fp32, fp16, bf16, '
                          'fp8, fp8-rowwise, mxfp8'),
    ({"head": "bf16+scaler"}, "preset: amp.layers.head = 'bf16+scaler': a layer's precision is one of"),
    ({"": "fp32"}, 'preset: amp.layers."": an empty pattern matches no module'),
    ({"blocks.0 .fc": "fp32"}, 'preset: amp.layers."blocks.0 .fc": a module name has no spaces'),
    ({"blocks.[01.fc": "fp32"}, 'preset: amp.layers."blocks.[01.fc": an unclosed [ ]'),
])
def test_a_bad_pattern_or_variant_is_one_error_naming_the_key(table, said):
    with pytest.raises(ConfigError) as caught:
        config.build_config({"amp": {"layers": table}})
    assert str(caught.value).startswith(said)


def test_a_float8_rule_under_fsdp_takes_tensorwise_only():
    from amptui.core.prepare.preflight import check_precision

    cfg = config.build_config({"model": {"name": "gpt"}, "data": {"name": "text"}, "dist": {"mode": "fsdp"},
                               "amp": {"layers": {"blocks.*.mlp.fc": "fp8-rowwise"}}})
    with pytest.raises(UserError, match=r'amp.layers."blocks.\*.mlp.fc" = "fp8-rowwise" with dist.mode = "fsdp"'):
        check_precision(cfg)
    check_precision(cfg.with_overrides({"amp.layers": {"blocks.*.mlp.fc": "fp8"}}))


# --- on a model ------------------------------------------------------------------------------------

def _gpt():
    torch.manual_seed(0)
    return GPT(n_layer=2, n_head=2, n_embd=64, block_size=32)


def test_first_match_wins_and_children_run_as_their_parent():
    scope = LayerScope.of(_gpt(), Precision.from_config(_cfg(), "cpu"))
    assert scope.variant_of("blocks.0.mlp.fc") == "fp8-rowwise"  # before "blocks.*", which also matches it
    assert scope.variant_of("blocks.1.attn.qkv") == "bf16"        # inherited from blocks.1
    assert scope.variant_of("head") == "fp32" and scope.variant_of("tok_emb") is None
    assert scope.compute_dtype("head") == "float32" and scope.compute_dtype("blocks.0.mlp.fc") == "bfloat16"


def test_a_pattern_that_matches_no_module_is_refused_naming_it():
    with pytest.raises(UserError, match=r"amp.layers: 'blocks.\*.mlpx' matches no module of this model \(GPT: "):
        LayerScope.of(_gpt(), Precision.from_config(_cfg({"blocks.*.mlpx": "fp32"}), "cpu"))


def _built(rules, **amp):
    """A tiny GPT as build_state makes it: rules matched, float8 converted, autocast per module."""
    cfg = _cfg(rules, **amp)
    precision = Precision.from_config(cfg, "cpu")
    model = _gpt()
    scope = LayerScope.of(model, precision)
    runtimes = runtimes_for(precision, scope)
    unruled = trainer_state.unruled_layers(model, precision, cfg, CPU, scope, runtimes)
    [done] = [r.convert(model, precision, cfg, CPU, scope) for r in runtimes] or [None]
    mix = scope.mix(model, unruled, done.variants() if done is not None else {})
    apply_autocast(model, scope, CPU)
    return model, scope, done, mix


def test_two_float8_rowwise_layers_and_the_rest_in_bf16():
    model, scope, done, mix = _built({"blocks.*.mlp.fc": "fp8-rowwise"})
    assert done.layers == {"blocks.0.mlp.fc": "rowwise", "blocks.1.mlp.fc": "rowwise"} and done.recipe == "off"
    assert type(model.get_submodule("blocks.0.mlp.fc")).__name__ == "Float8Linear"
    assert type(model.get_submodule("blocks.0.mlp.proj")) is nn.Linear
    labels = scope.labels(model, done.variants())  # the conversion says which layers it converted
    assert {n for n, v in labels.items() if v == "fp8-rowwise"} == {"blocks.0.mlp.fc", "blocks.1.mlp.fc"}
    assert set(labels.values()) == {"bf16", "fp8-rowwise"}
    assert mix == (("fp8-rowwise", 2),)
    p = Precision(True, "bfloat16", False, layers=(("blocks.*.mlp.fc", "fp8-rowwise"),), mix=mix)
    assert p.short == "bf16 + 2 float8 rowwise layers" and p.words == "autocast bfloat16 + 2 float8 rowwise layers"
    assert Precision.from_record(p.as_record()) == p
    assert Precision.from_record(p.words).short == p.short  # compare reads the words of older records


def test_an_fp32_layer_computes_in_float32_inside_a_bf16_run():
    model, _, done, mix = _built({"head": "fp32", "blocks.1.mlp": "fp16"})
    assert done is None and dict(mix) == {"fp32": 1, "fp16": 2}
    seen = {}
    for name in ("head", "blocks.0.mlp.fc", "blocks.1.mlp.fc"):
        model.get_submodule(name).register_forward_hook(lambda m, i, o, name=name: seen.__setitem__(name, o.dtype))
    x = torch.randint(0, 256, (2, 32))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        model(x).float().sum().backward()
    assert seen == {"head": torch.float32, "blocks.0.mlp.fc": torch.bfloat16, "blocks.1.mlp.fc": torch.float16}


def test_the_rules_are_applied_in_one_place_that_autocast_and_fsdp_both_take():
    """`LayerScope.decisions`: the modules that compute in a dtype of their own, each with it; the
    per-module autocast wraps exactly those, FSDP shards exactly those that hold parameters (deepest
    first, for fully_shard's bottom-up order) with that dtype as their policy's."""
    from amptui.trainer.fsdp import _ruled_modules

    model = _gpt()
    scope = LayerScope.of(model, Precision.from_config(_cfg({"head": "fp32", "blocks.1.mlp": "fp16",
                                                              "blocks.1.mlp.fc": "fp16", "blocks.0": "bf16"}), "cpu"))
    said = [(d.name, d.dtype) for d in scope.decisions(model)]
    assert said == [("blocks.1.mlp", "float16"), ("head", "float32")]  # blocks.0 and blocks.1.mlp.fc: as their parent
    assert apply_autocast(model, scope, CPU) == [name for name, _ in said]
    assert [(m, d) for m, d in _ruled_modules(model, scope)] == \
        [(model.get_submodule(name), dtype) for name, dtype in said]


def test_a_float8_run_keeps_the_linears_a_rule_takes_out_and_mixes_recipes():
    model, _, done, mix = _built({"blocks.0.mlp.fc": "bf16", "blocks.1.mlp.fc": "mxfp8"}, float8="rowwise")
    assert done.kept["blocks.0.mlp.fc"] == "amp.layers: bf16"
    assert done.layers["blocks.1.mlp.fc"] == "mxfp8" and done.layers["blocks.0.attn.proj"] == "rowwise"
    assert done.record()["recipes"]["blocks.1.mlp.fc"] == "mxfp8"
    assert dict(mix) == {"bf16": 1, "mxfp8": 1}


def test_numerics_measure_each_layer_to_its_own_dtypes_range():
    model, scope, _, _ = _built({"head": "fp32"})
    sampler = RangeSampler(model, every=1, depth=1, dtype="bfloat16", device=CPU, layer_dtypes=scope.dtypes(model))
    sampler.prepare(1, None)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        model(torch.randint(0, 256, (2, 32))).float().sum().backward()
    sampler.step_done()
    [record] = sampler.records([b.flatten().tolist() for b in sampler.riders()])
    by_name = {layer["name"]: layer for layer in record.layers}
    assert by_name["head"]["dtype"] == "float32" and "dtype" not in by_name["ln_f"]
    assert by_name["head"]["forward"] > 100  # float32's range: ~128 bits of headroom, not bfloat16's
    assert record.dtype == "bfloat16"
