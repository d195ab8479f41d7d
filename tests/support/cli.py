"""The real command line as a process, and what its output must look like."""

from __future__ import annotations

import json
import os
import subprocess
import sys

# quickstart's model and data shrunk to a few milliseconds a step, in any precision (a CPU that only
# emulates bfloat16 runs a full-size quickstart step 100x slower): for tests whose point is not the model
TINY_QUICKSTART = ["--set", "model.width=4", "--set", "data.img_size=8", "--set", "data.batch_size=8",
                   "--set", "data.train_samples=64", "--set", "data.val_samples=16"]


def amptui(*args: str, timeout: float = 240, check: bool = False, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the real CLI (`python -m amptui ...`) and capture its output."""
    proc = subprocess.run([sys.executable, "-m", "amptui", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})
    if check and proc.returncode != 0:
        raise AssertionError(f"amptui {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def one_clear_line(proc: subprocess.CompletedProcess, code: int = 2) -> str:
    """A refusal as users must see it: exit `code`, one `amptui: error:` line, no traceback."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("amptui: error: "), proc.stderr
    return lines[0]


def started(stdout: str) -> dict:
    """What `amptui ... --detach` started: its one JSON line on stdout (docs/commands.md)."""
    return json.loads(stdout)
