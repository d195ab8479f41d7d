"""Where the seconds before a run's first step go (issue 11), and what the peak cache saves.

    python benchmarks/trainer_startup.py [--preset quickstart] [--device cpu|cuda] [--runs 2]

1. Phases, each timed in a fresh process in the order the trainer pays them: import torch,
   import the trainer (and torchvision for its models), CUDA initialisation, building the model,
   the first batch, the FLOP count (on the meta device, and for comparison the real way), the
   peak matmul measurement (what a run paid on every start before the cache) and reading it back
   from the cache.
2. End to end: `amptui run PRESET` from spawning the process to its `start` record and to its
   first step record, with an empty peak cache and with a filled one (median of --runs each).
Prints tables; exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

PHASES = r'''
import json, sys, time
t = time.perf_counter(); out = {}
def mark(name):
    global t
    now = time.perf_counter(); out[name] = now - t; t = now
import torch; mark("import torch")
from amptui.trainer import loop, models  # noqa: F401
import torchvision  # noqa: F401  (the CNN presets' models)
mark("import trainer + torchvision")
from amptui.core.config import presets
from amptui.core.config import values as c
cfg = presets.find_preset(sys.argv[1]).config({"run.device": sys.argv[2]})
cfg = cfg.with_overrides({"data.num_workers": c.resolve_num_workers(cfg)}, source="bench")
dev = torch.device(sys.argv[2])
if dev.type == "cuda":
    torch.cuda.init(); torch.empty(1, device=dev); torch.cuda.synchronize(); mark("CUDA init")
net = models.build_model(cfg.model).to(dev); mark("build model")
from amptui.trainer.data import build_train_val, choose_criterion
train, _ = build_train_val(cfg, 0, 1, dev); x, y = next(train.batches(0))
if dev.type == "cuda": torch.cuda.synchronize()
mark("first batch")
crit = choose_criterion(cfg, train)
from amptui.trainer import flops
flops._count_on_meta(net, crit, x, y); mark("FLOP count (meta)")
flops._count_for_real(net, crit, x, y, dev.type, torch.bfloat16, True)
if dev.type == "cuda": torch.cuda.synchronize()
mark("FLOP count (real step, before)")
from amptui.machine import peaks
peaks.measure_matmul_tflops(dev, "float32"); mark("peak measurement (every run, before)")
peaks._write_peak_cache({peaks.peak_cache_key(dev, "float32"): 1.0}); t = time.perf_counter()
peaks.forget_measured_peaks(); peaks.peak_tflops(dev, "float32"); mark("peak from the cache")
print(json.dumps(out))
'''


def phases(preset: str, device: str, env: dict) -> dict:
    proc = subprocess.run([sys.executable, "-c", PHASES, preset, device], capture_output=True, text=True,
                          env=env, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def first_step(preset: str, device: str, env: dict, tmp: Path) -> tuple[float, float]:
    runs = tmp / f"runs-{time.monotonic_ns()}"
    t0 = time.time()
    cmd = [sys.executable, "-m", "amptui", "run", preset, "--runs-dir", str(runs), "--set", f"run.device={device}",
           "--set", "run.max_steps=2", "--set", "log.every=1", "--set", "log.checkpoint_every=0",
           "--set", "log.eval_every=0"]
    subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    (run,) = [p for p in runs.iterdir() if p.is_dir()]
    recs = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    start = next(r["t"] for r in recs if r["kind"] == "start")
    step = next(r["t"] for r in recs if r["kind"] == "step")
    return start - t0, step - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", default="quickstart")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    from rich.console import Console
    from rich.table import Table

    console = Console()
    with tempfile.TemporaryDirectory(prefix="amptui-startup-") as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, XDG_CACHE_HOME=str(tmp / "cache"),
                   PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        table = Table(title=f"start-up phases: {args.preset} on {args.device} (fresh process)")
        table.add_column("phase")
        table.add_column("seconds", justify="right")
        for name, seconds in phases(args.preset, args.device, env).items():
            table.add_row(name, f"{seconds:.2f}")
        console.print(table)
        table = Table(title=f"amptui run {args.preset}: from spawn, median of {args.runs}")
        for col in ("peak cache", "to start record (s)", "to first step record (s)"):
            table.add_column(col, justify="right" if "(s)" in col else "left")
        for label, keep in (("empty", False), ("filled", True)):
            times = []
            for _ in range(args.runs):
                if not keep:
                    (tmp / "cache" / "amptui" / "peak_tflops.json").unlink(missing_ok=True)
                times.append(first_step(args.preset, args.device, env, tmp))
            table.add_row(label, f"{statistics.median(t[0] for t in times):.2f}",
                          f"{statistics.median(t[1] for t in times):.2f}")
        console.print(table)
        console.print(f"load average {os.getloadavg()[0]:.1f}, torch imported from {sys.executable}")


if __name__ == "__main__":
    main()
