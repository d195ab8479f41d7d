"""A precision mode added as a module, and only that: `bf16-pure` (amptui/core/modes/pure.py and
amptui/trainer/modes/pure.py): parameters, gradients and optimizer state in bfloat16, no float32
master copy, with stochastic rounding of the optimizer's update as an option. It trains from a
preset, `ab` and `tune` offer it, the script hooks recognise a loop that cast its model to bfloat16,
and compare shows its precision and memory. Its name is written in no other module of amptui."""

from __future__ import annotations

import pytest
import torch

from amptui.core import modes
from amptui.core.config import values as config
from amptui.core.config import variants as ab
from amptui.core.config.precision import Precision
from amptui.core.errors import UserError
from amptui.core.prepare import preflight
from amptui.trainer.modes.pure import StochasticAdam


def test_its_variants_are_offered_and_read_back():
    assert {"bf16-pure", "bf16-pure+sr"} <= set(ab.known_variants()) and "bf16-pure" in ab.variants_help()
    assert "bf16-pure" in modes.tune_variants()  # tune tries it too
    for name in ("bf16-pure", "bf16-pure+sr"):
        p = Precision.from_variant(name)
        assert p.short == name and p.autocast_dtype == "bfloat16" and not p.scaler
        assert Precision.from_record(p.as_record()) == p and Precision.from_record(p.words) == p
        assert Precision.from_config(config.build_config({}, p.overrides()), "cuda") == p  # "auto" dtypes aside
    assert Precision.from_variant("bf16-pure") != Precision.from_variant("bf16")
    assert Precision.from_variant("bf16-pure").words == "bfloat16 parameters and optimizer state, no float32 master copy"
    with pytest.raises(ValueError):
        Precision.from_variant("fp16-pure")  # float16's range needs a float32 master: not offered


def test_a_preset_picks_it_by_name_and_auto_is_the_wide_dtype_on_any_device():
    cfg = config.build_config({"amp": {"mode": "pure"}})
    assert Precision.from_config(cfg, "cuda").short == "bf16-pure"  # not float16, CUDA's auto
    assert Precision.from_config(config.build_config({"amp": {"mode": "pure", "stochastic_round": True}}),
                                 "cpu").short == "bf16-pure+sr"


@pytest.mark.parametrize("keys, said", [
    ({"amp.dtype": "float16"}, 'amp.mode = "pure" with amp.dtype = "float16"'),
    ({"dist.mode": "fsdp"}, 'amp.mode = "pure" with dist.mode = "fsdp"'),
    ({"amp.layers": {"*": "fp32"}}, 'amp.mode = "pure" with [amp.layers]'),
])
def test_what_it_cannot_do_is_refused_before_a_run(keys, said):
    cfg = config.build_config({"amp": {"mode": "pure"}}, keys)
    with pytest.raises(UserError, match=said.replace("[", "\\[").replace("]", "\\]")):
        preflight.check_precision(cfg)


def test_the_script_hooks_read_a_model_cast_to_bfloat16():
    facts = modes.LoopFacts(param_dtype="bfloat16")
    assert modes.detect(facts) == {"amp.autocast": True, "amp.dtype": "bfloat16", "amp.mode": "pure"}
    assert modes.detect(modes.LoopFacts(param_dtype="float32")) == {"amp.autocast": False}


def test_stochastic_rounding_keeps_updates_that_round_to_nearest_loses():
    """1e-4 steps on weights of 1.0 are below bfloat16's last bit (2**-7): to nearest every one is
    lost, stochastically they add up to what float32 would have (within the noise of 10,000 values)."""
    def trained(optimizer_of):
        p = torch.nn.Parameter(torch.ones(10_000, dtype=torch.bfloat16))
        opt = optimizer_of([p])
        for _ in range(50):
            p.grad = torch.ones_like(p)
            opt.step()
        return p.float().mean().item()

    assert trained(lambda ps: torch.optim.AdamW(ps, lr=1e-4, weight_decay=0.0)) == 1.0
    assert trained(lambda ps: StochasticAdam(ps, lr=1e-4, weight_decay=0.0, decoupled=True, seed=0)) == \
        pytest.approx(1 - 50 * 1e-4, abs=2e-4)
