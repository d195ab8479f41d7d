"""amp.float8: torchao's float8 and MXFP8 training as one more precision mode. Which linears
convert (torchtitan's rules), the variants fp8 / fp8-rowwise / mxfp8, the one-line refusal without
torchao, the float8 numerics (SQNR, amax, scale, underflow) and the alarm that names a collapsing
layer; and, in real processes, each recipe training gpt-text with falling loss, and `amptui ab`."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from support.cli import one_clear_line
from torch import nn

from amptui.core.config import values as config
from amptui.core.config import variants as ab
from amptui.core.config.precision import Precision
from amptui.core.errors import UserError
from amptui.core.modes.float8 import recipe_of
from amptui.telemetry.numerics import RangeSampler
from amptui.trainer.gpt import GPT
from amptui.trainer.modes import float8  # imports torchao when it converts, not here

# asked, not imported: importing torchao (and triton under it) costs each worker 2.5 s at collection
pytestmark = pytest.mark.skipif(importlib.util.find_spec("torchao") is None,
                                reason="amp.float8 needs torchao (pip install 'amptui[fp8]')")


@pytest.fixture
def no_torchao(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torchao" else real(name, *a))


def test_without_torchao_float8_is_refused_in_one_line_naming_the_extra(no_torchao, cli, runs_dir):
    with pytest.raises(UserError, match=r"--variants fp8-rowwise: float8 training needs torchao, which is not "
                                        r"installed: pip install 'amptui\[fp8\]'"):
        ab.expand("bf16,fp8-rowwise", "cpu")
    line = one_clear_line(cli("run", "gpt-text", "--set", "amp.float8=rowwise"))
    assert "amp.float8 = \"rowwise\"" in line and "pip install 'amptui[fp8]'" in line
    assert not runs_dir.exists() or not any(runs_dir.iterdir())  # nothing made
    line = one_clear_line(cli("ab", "gpt-text", "--variants", "bf16,mxfp8"))
    assert "mxfp8" in line and "amptui[fp8]" in line


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
