"""FSDP2 (`dist.mode = "fsdp"`) through real torchrun processes on gloo (CPU): the gpt-text preset
sharded over two ranks trains, survives a SIGKILL through its checkpoint, skips the same float16
steps on both ranks, and holds less memory per rank than DDP; plus the refusals and the policy's
names, in process."""

from __future__ import annotations

import textwrap

import psutil
import pytest
from support.cli import amptui, started
from support.records import events, events_so_far, only_run
from support.waits import wait_until

from amptui.core.comparison import compare, runsummary
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
