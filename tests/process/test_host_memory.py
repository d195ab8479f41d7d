"""CPU runs keep freed memory for reuse instead of faulting in fresh pages every step.

Counted in page faults (the kernel's per-process minor-fault counter), not seconds: the count is
repeatable where timings on a shared machine are not. Each fresh 64 MiB block costs ~16,000
faults; a block the heap kept costs none (once the heap has grown to fit the loop).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest
from support.cli import amptui, started
from support.records import events_so_far
from support.waits import wait_until

ALLOCATE_AND_FREE = textwrap.dedent("""
    import resource, sys, torch
    from amptui.trainer import host_memory
    if sys.argv[1] == "reuse":
        print(host_memory.keep_freed_memory())
    # 64 MiB: above every mmap threshold glibc picks by itself. The heap takes a few rounds to
    # grow to fit the pattern (a freed block is a few bytes short for an aligned request until
    # two of them merge), as a training loop's first steps do.
    for _ in range(10):
        t = torch.ones(16 * 2**20); del t
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(10):
        t = torch.ones(16 * 2**20); del t
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
""")


def huge_pages_always() -> bool:
    """With transparent huge pages on for every mapping, a fresh 64 MiB block is ~32 faults, not
    ~16,000: the glibc-defaults side has nothing to show there."""
    try:
        return "[always]" in open("/sys/kernel/mm/transparent_hugepage/enabled").read()
    except OSError:
        return False


def allocator_defaults_env() -> dict[str, str]:
    """This environment without allocator settings of the developer's own."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith("MALLOC_") and k not in ("GLIBC_TUNABLES", "LD_PRELOAD")}


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="the settings are glibc's")
@pytest.mark.parametrize("mode", ["reuse", "defaults"])
def test_freed_tensors_are_reused_instead_of_faulted_in_again(mode):
    if mode == "defaults" and huge_pages_always():
        pytest.skip("transparent huge pages are always on here")
    out = subprocess.run([sys.executable, "-c", ALLOCATE_AND_FREE, mode], capture_output=True, text=True,
                         check=True, env=allocator_defaults_env()).stdout.split("\n")
    faults = int(out[-2])
    if mode == "reuse":
        assert out[0] == "host memory: freed blocks kept for reuse (glibc mallopt: no mmap, no trim)"
        assert faults < 2_000, faults
    else:
        assert faults > 10 * 14_000, faults  # what it saves: every block faulted in afresh


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="the settings are glibc's")
def test_tunables_for_other_things_do_not_turn_reuse_off():
    env = {**allocator_defaults_env(), "GLIBC_TUNABLES": "glibc.pthread.rseq=0"}
    out = subprocess.run([sys.executable, "-c", "from amptui.trainer import host_memory as h; "
                          "print(h.keep_freed_memory())"], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == "host memory: freed blocks kept for reuse (glibc mallopt: no mmap, no trim)"


def minor_faults(pid: int) -> int:
    return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[7])  # field 10, minflt


def last_step(run_dir) -> int:
    steps = [r["step"] for r in events_so_far(run_dir) if r["kind"] == "step"]
    return steps[-1] if steps else 0


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
@pytest.mark.parametrize("reuse", [True, False])
def test_a_cpu_run_does_not_fault_in_its_gradients_every_step(runs_dir, monkeypatch, reuse):
    # Linear(4096) weights and gradients are 64 MiB each: with the system allocator's defaults
    # each step's three fresh gradients are ~49,000 page faults.
    if not reuse and huge_pages_always():
        pytest.skip("transparent huge pages are always on here")
    for name in set(os.environ) - set(allocator_defaults_env()):
        monkeypatch.delenv(name)
    proc = amptui("run", "mlp-recipe", "--detach", "--set", "amp.autocast=false", "--set", "data.batch_size=8",
                  "--set", "data.train_samples=80", "--set", "run.max_steps=60", "--set", "log.every=1",
                  "--set", "log.checkpoint_every=0", "--set", "run.epochs=100",
                  "--set", f"run.reuse_host_memory={str(reuse).lower()}", check=True)
    run_dir = runs_dir / started(proc.stdout)["run_id"]
    pid = json.loads((run_dir / "run.json").read_text())["pid"]
    deadline = time.monotonic() + 120

    def at_step(n: int) -> tuple[int, int]:
        step = wait_until(lambda: (s := last_step(run_dir)) >= n and s, deadline - time.monotonic(),
                          lambda: (run_dir / "output.log").read_text(), step=0.01)
        return step, minor_faults(pid)

    try:
        step0, faults0 = at_step(10)
        step1, faults1 = at_step(30)
        per_step = (faults1 - faults0) / (step1 - step0)
        log = (run_dir / "output.log").read_text()
        if reuse:
            assert "host memory: freed blocks kept for reuse" in log
            assert per_step < 2_000, per_step
        else:
            assert "host memory" not in log
            assert per_step > 30_000, per_step
    finally:
        amptui("stop", run_dir.name)
