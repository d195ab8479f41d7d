"""A newcomer's first hour on the command line (issue 36): `run --detach` answers as soon as the
run folder and its process exist (no torch imported first on a machine without a GPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support.cli import TINY_QUICKSTART
from support.waits import wait_until

from amptui.core.prepare import preflight


def _wait_ended(run_dir, deadline_s: float = 240) -> None:
    """The detached trainer is let finish (its two steps): no process left behind."""
    events = run_dir / "events.jsonl"
    wait_until(lambda: events.exists() and b'"kind":"end"' in events.read_bytes(), deadline_s,
               f"{run_dir.name}'s end record", step=0.5)


@pytest.mark.slow
@pytest.mark.skipif(any(os.path.exists(p) for p in preflight.GPU_DRIVER_PATHS), reason="a GPU driver: torch decides")
def test_run_detach_answers_without_importing_torch_on_a_machine_without_a_gpu(tmp_path):
    code = ("import atexit, runpy, sys; atexit.register(lambda: print('torch imported' if 'torch' in sys.modules "
            "else 'no torch', file=sys.stderr)); sys.argv = ['amptui'] + sys.argv[1:]; "
            "runpy.run_module('amptui', run_name='__main__', alter_sys=True)")
    proc = subprocess.run([sys.executable, "-c", code, "run", "quickstart", "--detach", "--runs-dir", str(tmp_path),
                           "--set", "run.max_steps=2", "--set", "amp.dtype=bfloat16", *TINY_QUICKSTART],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    started = json.loads(proc.stdout.strip().splitlines()[-1])
    run_dir = tmp_path / started["run_id"]
    assert run_dir.is_dir() and started["pid"] > 0
    assert "no torch" in proc.stderr, proc.stderr
    _wait_ended(run_dir)


@pytest.mark.slow
def test_ab_estimate_times_each_variant_says_a_range_and_starts_nothing(tmp_path):
    from support.cli import amptui

    root = tmp_path / "runs"
    proc = amptui("ab", "quickstart", "--estimate", "--format", "json", "--runs-dir", str(root),
                  "--set", "run.max_steps=6", *TINY_QUICKSTART)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["kind"] == "estimate" and 0 < found["low_s"] < found["high_s"]
    assert [v["steps"] for v in found["variants"]] == [6] * len(found["variants"]) and len(found["variants"]) >= 2
    assert "timed here" in found["words"] and found["shorter_steps"] >= 10
    assert not root.exists() or not any(p for p in root.iterdir() if p.name != ".ab")  # no run folder made


@pytest.mark.slow
def test_ab_prints_its_estimate_before_the_first_variant_starts(tmp_path):
    from support.cli import amptui

    proc = amptui("ab", "quickstart", "--runs-dir", str(tmp_path / "runs"), "--set", "run.max_steps=2",
                  "--variants", "fp32,bf16", *TINY_QUICKSTART)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "estimate: about" in out, out
    assert out.index("estimate: about") < out.index("[1/2]"), out
