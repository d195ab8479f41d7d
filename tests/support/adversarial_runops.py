"""What the adversarial tests of run operations share: a model factory that leaves a mark each time it is
imported (FACTORY), a folder's files with their sizes and times (`tree`), one session's records (`session`), a
command answered on a pseudo-terminal (`answer_on_terminal`)."""

from __future__ import annotations

from pathlib import Path

from support.terminal import amptui_on_pty

# A user's model factory that leaves a mark each time it is imported: the proof that code ran.
FACTORY = """import os
import torch.nn as nn
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "imports.log"), "a") as fh:
    fh.write(f"{os.getpid()}\\n")

def build(num_classes=10):
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, num_classes))
"""


def tree(path: Path) -> dict[str, tuple[int, int]]:
    """Every file under `path`: (size, mtime_ns), to show that nothing changed."""
    return {str(p.relative_to(path)): (p.lstat().st_size, p.lstat().st_mtime_ns)
            for p in sorted(path.rglob("*")) if not p.is_dir()}


def answer_on_terminal(args: list[str], answer: str, timeout: float = 120) -> tuple[int, str]:
    """Run `amptui ARGS` on a pseudo-terminal; when it asks ([y/N]), type `answer`. (exit code, output)"""
    return amptui_on_pty(args, answer=answer, timeout=timeout)


def session(t0: float, t1: float, status: str, steps: int, resumed_from: int = 0) -> list[dict]:
    return [{"kind": "start", "t": t0, "run_id": "r", "preset": "quickstart", "precision": "fp32",
             "total_steps": 100, "resumed_from": resumed_from},
            {"kind": "step", "t": (t0 + t1) / 2, "step": steps, "epoch": 1, "loss": 1.0},
            {"kind": "end", "t": t1, "status": status, "steps": steps}]
