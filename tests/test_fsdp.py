"""FSDP2 (`dist.mode = "fsdp"`) through real torchrun processes on gloo (CPU): the gpt-text preset
sharded over two ranks trains, survives a SIGKILL through its checkpoint, skips the same float16
steps on both ranks, and holds less memory per rank than DDP; plus the refusals and the policy's
names, in process."""

from __future__ import annotations

import textwrap

import psutil
import pytest
from support.cli import amptui, one_clear_line, started
from support.records import events, events_so_far, only_run
from support.waits import wait_until

from amptui.core.comparison import compare, runsummary
from amptui.core.config.precision import Precision
from amptui.core.config.variants import expand
from amptui.core.modes.fsdp import Policy
from amptui.core.run import runs

FSDP2 = ["--set", "dist.mode=fsdp", "--set", "dist.nproc_per_node=2"]
TINY_GPT = ["--set", "model.n_layer=2", "--set", "model.n_embd=32", "--set", "model.n_head=2",
            "--set", "model.block_size=32", "--set", "data.batch_size=8", "--set", "data.train_samples=256",
            "--set", "data.val_samples=32", "--set", "run.epochs=1", "--set", "log.every=4"]


def steps_of(records: list[dict]) -> list[dict]:
    return [r for r in records if r["kind"] == "step"]


def kill_run(run_dir) -> None:
    """SIGKILL the run's torchrun supervisor and every rank under it, as a crash would."""
    supervisor = psutil.Process(runs.load_run(run_dir).pid)
    procs = [supervisor, *supervisor.children(recursive=True)]
    for proc in procs:
        proc.kill()
    psutil.wait_procs(procs, timeout=30)


@pytest.mark.slow
def test_gpt_text_sharded_on_two_ranks_trains_and_resumes_after_sigkill(runs_dir):
    """The bfloat16 policy: loss falls, the start record names the policy and each rank's shards;
    SIGKILLed after a checkpoint, `resume` continues from it and completes. bfloat16 is asked for
    (auto runs float32 on a CPU that only emulates it)."""
    proc = amptui("run", "gpt-text", *FSDP2, *TINY_GPT, "--set", "amp.dtype=bfloat16",
                  "--set", "log.checkpoint_every_steps=4",
                  "--set", "debug.slow_checkpoint_s=1", "--detach", check=True)
    run_dir = runs_dir / started(proc.stdout)["run_id"]
    wait_until(lambda: any(r["kind"] == "checkpoint" for r in events_so_far(run_dir)), 150,
               lambda: (run_dir / "output.log").read_text(), step=0.2)
    kill_run(run_dir)
    assert runs.load_run(run_dir).status == "killed"
    amptui("resume", run_dir.name, check=True, timeout=300)

    rank0, rank1 = events(run_dir), events(run_dir, "events.rank1.jsonl")
    starts = [r for r in rank0 if r["kind"] == "start"]
    assert [s.get("resumed_from") for s in starts][0] is None and starts[-1]["resumed_from"] >= 4
    policy = starts[0]["precision"]
    assert policy["fsdp"] == {"param_dtype": "bfloat16", "reduce_dtype": "float32", "sharded_dtype": "float32"}
    assert policy["words"] == "FSDP bfloat16 params, float32 reduce"
    held = starts[0]["sharded"]
    assert held["params_bytes"] < 0.6 * held["model_params_bytes"], "each rank keeps about half the parameters"
    assert held["optimizer_bytes"] == 2 * held["params_bytes"]  # AdamW's two float32 moments, of the shards
    steps = steps_of(rank0)
    numbers = [s["step"] for s in steps]
    # The resumed session starts after its checkpoint; steps the killed session had logged past that
    # checkpoint are taken again (the views draw a redone step once), so they may appear twice.
    last_start = max(k for k, r in enumerate(rank0) if r["kind"] == "start")
    resumed = [r["step"] for r in steps_of(rank0[last_start:])]
    assert resumed == sorted(set(resumed)) and resumed[0] > starts[-1]["resumed_from"], numbers
    assert resumed[-1] == starts[0]["total_steps"], numbers
    assert steps[-1]["loss"] < steps[0]["loss"] - 0.5
    assert [s["step"] for s in steps_of(rank1)] == numbers  # rank 1 took every step too
    assert runs.load_run(run_dir).status == "completed"
    log = (run_dir / "output.log").read_text()
    assert "[rank 1] FSDP: this rank holds" in log


@pytest.mark.slow
def test_float16_policy_skips_the_same_steps_on_both_ranks(runs_dir):
    """inf goes into rank 0's shard only; the GradScaler's found_inf is reduced over the mesh, so rank
    1 skips the same steps and its scale backs off in step, clipping after unscale_ included."""
    amptui("run", "gpt-text", *FSDP2, *TINY_GPT, "--set", "amp.dtype=float16", "--set", "debug.inject_inf_every=3",
           "--set", "amp.clip_grad_norm=1.0", "--set", "run.max_steps=12", check=True, timeout=300)
    run_dir = only_run(runs_dir)
    rank0, rank1 = events(run_dir), events(run_dir, "events.rank1.jsonl")
    assert rank0[0]["precision"]["words"] == "FSDP float16 params, float32 reduce + GradScaler"
    s0, s1 = steps_of(rank0), steps_of(rank1)
    assert [(s["step"], s["skipped"], s["scale"]) for s in s0] == [(s["step"], s["skipped"], s["scale"]) for s in s1]
    assert s0[-1]["skipped_total"] == 4 and s0[-1]["scale"] == 65536.0 / 2 ** 4
    backoffs0 = [r for r in rank0 if r["kind"] == "scaler" and r["event"] == "backoff"]
    backoffs1 = [r for r in rank1 if r["kind"] == "scaler" and r["event"] == "backoff"]
    assert [b["step"] for b in backoffs0] == [b["step"] for b in backoffs1] == [3, 6, 9, 12]
    assert backoffs0[0]["overflow"] and not backoffs1[0]["overflow"], "only rank 0's shard held the inf"
    assert rank0[-1]["status"] == "completed"


BLOCK_MLP = '''
from torch import nn


class BlockMLP(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(depth))
        self.head = nn.Linear(width, width)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def build(width, depth):
    return BlockMLP(width, depth)
'''


@pytest.mark.slow
def test_fsdp_holds_less_memory_per_rank_than_ddp_for_the_same_model(isolated, runs_dir):
    """8.4M parameters (34 MB) with AdamW: DDP keeps parameters, gradients, both moments and its
    buckets whole on every rank; FSDP keeps half of each. Both runs use the same allocator setting
    (glibc returns freed blocks), so each rank's peak RSS follows what it holds."""
    (isolated / "block_mlp.py").write_text(textwrap.dedent(BLOCK_MLP))
    common = ["mlp-recipe", "--set", "model.factory=block_mlp:build", "--set", "model.width=1024",
              "--set", "model.args={width=1024, depth=8}", "--set", "dist.nproc_per_node=2",
              "--set", "data.batch_size=8", "--set", "data.train_samples=16", "--set", "data.val_samples=0",
              "--set", "log.every=1", "--set", "optim.name=adamw", "--set", "amp.autocast=false",
              "--set", "run.reuse_host_memory=false", "--set", "log.checkpoint_every=0"]
    env = {"MALLOC_MMAP_THRESHOLD_": "131072"}
    peaks, run_dirs = {}, {}
    for mode in ("ddp", "fsdp"):
        proc = amptui("run", *common, "--set", f"dist.mode={mode}", check=True, env=env, timeout=300)
        run_id = next(line.split()[1].rstrip(":") for line in proc.stdout.splitlines() if line.startswith("run "))
        run_dirs[mode] = runs_dir / run_id
        peaks[mode] = max(max(s["mem"]["peak_rss"] for s in steps_of(events(runs_dir / run_id, name)))
                          for name in ("events.jsonl", "events.rank1.jsonl"))
    saved = peaks["ddp"] - peaks["fsdp"]
    assert saved > 40 * 2**20, f"FSDP saved only {saved / 2**20:.0f} MiB per rank ({peaks})"
    # compare says it per rank: FSDP's shards against DDP's whole replica (parameters + both moments,
    # from each rank's start record), and each run's highest rank's peak (from both ranks' files)
    ddp, fsdp = compare.compare_rows([runsummary.summarize(run_dirs[m]) for m in ("ddp", "fsdp")])
    assert (ddp.dist, fsdp.dist) == ("DDP x2", "FSDP x2")
    assert ddp.state_mem is not None and ddp.state_mem > 3 * 8_000_000 * 4  # 8.4M float32 parameters, 3 copies
    assert fsdp.state_saving == pytest.approx(0.5, abs=0.01)
    assert len(fsdp.rank_peaks or []) == 2 and fsdp.peak_mem is not None and fsdp.peak_mem >= peaks["fsdp"]
    assert fsdp.memory_saving is not None and fsdp.memory_saving > 0
    assert [r.precision_label for r in (runs.load_run(run_dirs["ddp"]), runs.load_run(run_dirs["fsdp"]))] == \
        ["fp32 DDP x2", "fp32 FSDP x2"]


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


@pytest.mark.gpu
@pytest.mark.slow
def test_bfloat16_policy_on_cuda_trains_with_allocator_memory_per_rank(runs_dir):
    """On CUDA (nccl, one rank per GPU): the bfloat16 policy trains, and each rank's step records
    carry the caching allocator's numbers (the per-rank memory FSDP is for)."""
    import torch

    ranks = min(2, torch.cuda.device_count())
    amptui("run", "gpt-text", "--set", "run.device=cuda", "--set", "dist.mode=fsdp",
           "--set", f"dist.nproc_per_node={ranks}", "--set", "amp.dtype=bfloat16", "--set", "run.max_steps=40",
           "--set", "log.every=5", check=True, timeout=600)
    run_dir = only_run(runs_dir)
    rank0 = events(run_dir)
    assert rank0[0]["device"]["type"] == "cuda" and rank0[0]["world_size"] == ranks
    assert rank0[0]["precision"]["fsdp"]["param_dtype"] == "bfloat16"
    steps = steps_of(rank0)
    assert steps[-1]["loss"] < steps[0]["loss"] and rank0[-1]["status"] == "completed"
    assert all(0 < s["mem"]["allocated"] <= s["mem"]["peak_allocated"] for s in steps)


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
