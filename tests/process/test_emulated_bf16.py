"""On a CPU without bfloat16 instructions (no AVX512-BF16, no AMX) torch emulates bfloat16 autocast,
several times slower than float32: the toggles summary, `amptui run`'s start line and the A/B
table say so. This machine may well have the instructions, so a mock stands in for the CPU's
/proc/cpuinfo flags (and only for them); the runs are real."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support.cli import TINY_QUICKSTART

from amptui.machine import hardware

WITHOUT_BF16 = {"fpu", "sse2", "avx2", "avx512f", "f16c"}   # a common cloud Intel CPU

# The real CLI in a process of its own, with only the CPU flags it reads replaced.
FAKE_CPU_CLI = (
    "import sys, amptui.machine.cpu as h\n"
    "flags = set(sys.argv[1].split(','))\n"
    "h.read_cpuinfo = lambda path='/proc/cpuinfo': ('Fake CPU', flags)\n"
    "from amptui.cli.main import main\n"
    "sys.exit(main(sys.argv[2:]))\n"
)
QUICK = ["--set", "run.max_steps=4", "--set", "log.every=2", "--set", "log.tensorboard=false"]


def fake_cpu_amptui(flags: set[str], *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-c", FAKE_CPU_CLI, ",".join(sorted(flags)), *args],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.mark.slow  # a real trainer
def test_run_of_auto_precision_falls_back_to_float32_and_says_why(runs_dir, tmp_path, monkeypatch):
    # what the launcher would measure on such a CPU, stood in (the flags alone would say the same)
    cache = tmp_path / "cache" / "amptui" / "peak_tflops.json"
    cache.parent.mkdir(parents=True)
    cache.write_text(json.dumps({"format": 1, "peak_tflops": {
        "Fake CPU (2 threads)|bfloat16|torch 9": 0.001, "Fake CPU (2 threads)|float32|torch 9": 0.085}}))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    out = fake_cpu_amptui(WITHOUT_BF16, "run", "quickstart", *QUICK).stdout
    note, start = out.splitlines()[:2]
    assert note == ("note: amp.dtype auto: float32 (autocast off), as bfloat16 is slow on this cpu (measured "
                    "1 GFLOP/s, float32 85); force AMP with --set amp.dtype=bfloat16")
    assert ": quickstart, fp32 on " in start


@pytest.mark.slow  # real trainers
def test_ab_says_it_before_running_and_under_the_table(runs_dir):
    out = fake_cpu_amptui(WITHOUT_BF16, "ab", "quickstart", "--variants", "fp32,bf16", *QUICK, *TINY_QUICKSTART).stdout
    lines = out.splitlines()
    assert lines[0] == f"note: variant bf16: {hardware.EMULATED_BF16_NOTICE}"
    # the fp32 variant keeps amp.dtype = "bfloat16" with autocast off: find the bf16 run by its table row
    bf16_run = next(line.split()[0] for line in lines if "autocast bfloat16" in line)
    assert lines[-2] == f"note: {bf16_run}: {hardware.EMULATED_BF16_NOTICE}", out  # the fp32 run is not named
    # `amptui compare` of the same runs says it too
    compared = fake_cpu_amptui(WITHOUT_BF16, "compare", *sorted(p.name for p in runs_dir.iterdir() if not p.name.startswith("."))).stdout
    assert compared.splitlines()[-1] == f"note: {bf16_run}: {hardware.EMULATED_BF16_NOTICE}"
