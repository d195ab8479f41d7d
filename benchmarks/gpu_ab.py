"""Honest speed (issue 11): `amptui ab` against hand-written loops of the three tutorial models.

    python benchmarks/gpu_ab.py                    # CUDA when present, else CPU mode (--cpu)
    python benchmarks/gpu_ab.py --cpu --models mlp --steps 120

For each model (the recipe MLP, ResNet-18, AlexNet; sizes below) and each precision variant it
runs
- a hand-written loop in this process: the same model (amptui's builder), the optimizer the
  preset gets (amptui's `build_optimizer`, the same GradScaler settings), a few fixed batches made
  on the device up front, channels_last for the CNNs on CUDA as the trainer does; timed with
  perf_counter between two device syncs after `warmup` steps, nothing synchronised in between;
- `amptui ab PRESET --variants ...` with the same sizes and step count (a real CLI process per
  A/B, synthetic data for the CNNs, evaluation and checkpoints off so the benchmark stays short;
  they are outside the timing windows anyway), read back with amptui's own compare code
  (steady-state ms/step from the step records; the speed-up `ab` prints).

Prints per model a table: hand ms/step, amptui ms/step, their ratio, hand speed-up, ab speed-up
and their ratio, with PASS/MISS for the goals (ratio of ms/step <= 1.02; ab speed-up within 5%
of the hand loops'). Exits 0 whether or not a goal is met.

Sizes. CUDA: MLP 3 x Linear(4096) batch 512; ResNet-18 batch 256 at 256 px; AlexNet batch 64 at
227 px; variants fp32, fp16, fp16+scaler, bf16. CPU (--cpu, or no CUDA): MLP width 1024 batch
256; ResNet-18 batch 32 at 64 px; AlexNet batch 16 at 96 px; variants fp32, bf16; fewer steps.

float8 (`--models mlp-fp8`, CUDA only): torchao's float8 against bf16 where torchao says float8
wins, 6 x Linear(8192) at batch 8192 (the four inner linears convert), compiled (run.compile: both
loops), variants bf16, fp8, fp8-rowwise. The hand loop converts with amptui's own float8.convert (the
same linears), then compiles. Skipped, saying why, below compute capability 8.9 or without torchao.

    python benchmarks/gpu_ab.py --models mlp-fp8
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from amptui.core import figures  # noqa: E402
from amptui.core.comparison import compare, runsummary  # noqa: E402
from amptui.core.config import presets  # noqa: E402
from amptui.core.config.precision import Precision  # noqa: E402
from amptui.core.config.variants import VARIANTS  # noqa: E402
from amptui.trainer.models import CNNS, build_model, compile_if_asked  # noqa: E402
from amptui.trainer.optim import build_optimizer  # noqa: E402

STEP_GOAL, SPEEDUP_GOAL = 1.02, 0.05
FLOAT8_VARIANTS = ["bf16", "fp8", "fp8-rowwise"]


@dataclass
class Model:
    key: str
    preset: str
    sets: dict           # preset overrides that set the size (both loops use them)
    steps: int           # optimizer steps per run (the first 10% and the first record are warm-up)
    variants: list[str] | None = None  # its own variants (float8's); None: the run's
    batches: int = 0     # >0: this many fixed batches, reused over the epochs (big batches: GPU memory)


def models_for(device: str, steps: int | None) -> list[Model]:
    cuda = device == "cuda"
    synthetic = {"data.name": "synthetic", "data.val_samples": 0, "model.pretrained": False}
    if cuda:
        out = [Model("mlp", "mlp-recipe", {"model.width": 4096, "data.batch_size": 512}, 300),
               Model("resnet18", "resnet18-intel", {**synthetic, "data.img_size": 256, "data.batch_size": 256}, 150),
               Model("alexnet", "alexnet-cifar10", {**synthetic, "data.img_size": 227, "data.batch_size": 64}, 300),
               Model("mlp-fp8", "mlp-recipe", {"model.width": 8192, "model.depth": 6, "data.batch_size": 8192,
                                               "run.compile": True}, 100, variants=FLOAT8_VARIANTS, batches=4)]
    else:
        out = [Model("mlp", "mlp-recipe", {"model.width": 1024, "data.batch_size": 256}, 120),
               Model("resnet18", "resnet18-intel", {**synthetic, "data.img_size": 64, "data.batch_size": 32}, 30),
               Model("alexnet", "alexnet-cifar10", {**synthetic, "data.img_size": 96, "data.batch_size": 16}, 30)]
    if steps:
        for m in out:
            m.steps = steps
    return out


def run_sets(model: Model, device: str) -> dict:
    """Overrides for one run of `model` (both loops): sizes, device, one epoch of exactly `steps`."""
    batch = model.sets["data.batch_size"]
    batches = model.batches or model.steps
    return {**model.sets, "run.device": device, "run.epochs": -(-model.steps // batches), "run.max_steps": model.steps,
            "data.train_samples": batch * batches, "log.checkpoint_every": 0, "log.eval_every": 0,
            "log.tensorboard": False}


def warmup_steps(cfg, steps: int) -> int:
    """The steps compare leaves out: the first record and the first 10% (see WARMUP_FRACTION)."""
    every = cfg.log.every
    warm = max(1, int(figures.WARMUP_FRACTION * steps))
    first_counted = max(every, -(-warm // every) * every)  # windows ending before `warm` do not count
    return min(first_counted, steps - every)


# --- the hand-written loop --------------------------------------------------------------------------

def hand_loop_ms(model: Model, variant: str, device: str) -> float:
    preset = presets.find_preset(model.preset)
    cfg = preset.config({**run_sets(model, device), **VARIANTS[variant]})
    dev = torch.device(device)
    precision = Precision.from_config(cfg, dev.type)
    autocast, use_scaler = precision.autocast, precision.scaler
    dtype = getattr(torch, precision.dtype)
    torch.manual_seed(0)
    net = build_model(cfg.model).to(dev)
    cnn = cfg.model.name in CNNS
    if dev.type == "cuda" and cnn:
        net = net.to(memory_format=torch.channels_last)
    from amptui.core.modes.float8 import recipe_of

    if recipe_of(precision) != "off":  # the trainer's conversion: the same linears convert
        from amptui.trainer.modes import float8

        float8.convert(net, precision, cfg, dev)
    opt = build_optimizer(cfg, net.parameters())
    net = compile_if_asked(net, cfg.run)
    a = cfg.amp
    scaler = torch.amp.GradScaler(dev.type, init_scale=a.init_scale, growth_factor=a.growth_factor,
                                  backoff_factor=a.backoff_factor, growth_interval=a.growth_interval,
                                  enabled=use_scaler)
    b = cfg.data.batch_size
    g = torch.Generator(device=dev).manual_seed(0)
    batches = []
    for _ in range(4):  # a few fixed batches, already on the device
        if cnn:
            x = torch.randn(b, 3, cfg.data.img_size, cfg.data.img_size, generator=g, device=dev)
            if dev.type == "cuda":
                x = x.contiguous(memory_format=torch.channels_last)
            y = torch.randint(cfg.model.num_classes, (b,), generator=g, device=dev)
        else:
            x = torch.randn(b, cfg.model.width, generator=g, device=dev)
            y = torch.randn(b, cfg.model.width, generator=g, device=dev)
        batches.append((x, y))
    loss_fn = torch.nn.CrossEntropyLoss() if cnn else torch.nn.MSELoss()
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
    warm = warmup_steps(cfg, model.steps)
    net.train()
    t0 = None
    for step in range(model.steps):
        if step == warm:
            sync()
            t0 = time.perf_counter()
        x, y = batches[step % len(batches)]
        with torch.autocast(dev.type, dtype=dtype, enabled=autocast):
            loss = loss_fn(net(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
    sync()
    ms = 1000 * (time.perf_counter() - t0) / (model.steps - warm)
    del net, opt, batches
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return ms


# --- amptui ab ----------------------------------------------------------------------------------------

def amptui_ab(model: Model, variants: list[str], device: str, runs_dir: Path) -> dict[str, tuple[float, float]]:
    """{variant: (steady ms/step, speed-up as `ab` reports it)} from a real `amptui ab`."""
    cmd = [sys.executable, "-m", "amptui", "ab", model.preset, "--variants", ",".join(variants),
           "--runs-dir", str(runs_dir)]
    for key, value in run_sets(model, device).items():
        cmd += ["--set", f"{key}={json.dumps(value)}"]
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"amptui ab {model.preset} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    # the A/B's runs, in the order it ran them (run ids are time-ordered; dot-folders hold the A/B
    # group's own records); the rows `ab` printed
    runs = sorted(p for p in runs_dir.iterdir() if p.is_dir() and not p.name.startswith("."))
    summaries = [runsummary.summarize(d) for d in runs]
    rows = compare.compare_rows(summaries)
    return {v: (s.steady_step_ms, row.speedup) for v, s, row in zip(variants, summaries, rows)}


def float8_missing(device: str) -> str:
    """Why the float8 model cannot be measured here ("" when it can): real float8 GEMMs only."""
    import importlib.util

    if device != "cuda" or torch.cuda.get_device_capability() < (8, 9):
        return "float8 GEMMs need a CUDA GPU of compute capability 8.9+ (emulated float8 has no speed to measure)"
    if importlib.util.find_spec("torchao") is None:
        return "float8 needs torchao: pip install 'amptui[fp8]'"
    return ""


def verdict(ok: bool) -> str:
    return "[green]PASS[/]" if ok else "[red]MISS[/]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", action="store_true", help="CPU mode (the default without CUDA)")
    parser.add_argument("--models", default="mlp,resnet18,alexnet")
    parser.add_argument("--variants", help="default: fp32,fp16,fp16+scaler,bf16 on CUDA; fp32,bf16 on CPU")
    parser.add_argument("--steps", type=int, help="optimizer steps per run (default per model and device)")
    args = parser.parse_args()
    device = "cpu" if args.cpu or not torch.cuda.is_available() else "cuda"
    if device == "cpu":  # the trainer's host-allocator settings (run.reuse_host_memory), for the hand loop too
        from amptui.trainer.host_memory import keep_freed_memory

        keep_freed_memory()
    default = (args.variants.split(",") if args.variants else
               ["fp32", "fp16", "fp16+scaler", "bf16"] if device == "cuda" else ["fp32", "bf16"])
    wanted = args.models.split(",")
    console = Console(width=None if sys.stdout.isatty() else 150)  # logs get the whole table
    name = torch.cuda.get_device_name() if device == "cuda" else f"CPU ({os.cpu_count()} cores)"
    load = f", load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    console.print(f"gpu_ab on {name}, torch {torch.__version__}{load}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    misses = 0
    with tempfile.TemporaryDirectory(prefix="amptui-gpu-ab-") as tmp:
        for model in (m for m in models_for(device, args.steps) if m.key in wanted):
            if model.variants and (why := float8_missing(device)):
                console.print(f"[yellow]{model.key} skipped: {why}[/]")
                continue
            variants = model.variants or default
            t = time.perf_counter()
            hand = {v: hand_loop_ms(model, v, device) for v in variants}
            ab = amptui_ab(model, variants, device, Path(tmp) / model.key)
            sizes = ", ".join(f"{k.split('.')[-1]} {v}" for k, v in model.sets.items()
                              if k in ("model.width", "data.batch_size", "data.img_size"))
            table = Table(title=f"{model.key} ({model.preset}: {sizes}, {model.steps} steps)")
            for col in ("variant", "hand ms/step", "amptui ms/step", "amptui/hand", "goal <= 1.02",
                        "hand speed-up", "ab speed-up", "ab/hand", "goal within 5%"):
                table.add_column(col, justify="left" if col == "variant" else "right")
            for v in variants:
                ms, speedup = ab[v]
                hand_speedup = hand[variants[0]] / hand[v]
                ratio = ms / hand[v] if ms else float("nan")
                sp_ratio = speedup / hand_speedup if speedup else float("nan")
                ok_ms = ratio <= STEP_GOAL
                ok_sp = abs(sp_ratio - 1) <= SPEEDUP_GOAL
                misses += (not ok_ms) + (not ok_sp)
                table.add_row(v, f"{hand[v]:.2f}", f"{ms:.2f}", f"{ratio:.3f}", verdict(ok_ms),
                              f"{hand_speedup:.2f}x", f"{speedup:.2f}x", f"{sp_ratio:.3f}", verdict(ok_sp))
            console.print(table)
            console.print(f"[dim]{model.key}: {time.perf_counter() - t:.0f} s[/]")
    console.print(f"{'all goals met' if not misses else f'{misses} goal(s) missed'}")


if __name__ == "__main__":
    main()
