"""Whether an fp32 baseline used TF32, in words, from its `start` record's `tf32` (machine/tf32.py
writes it). Said only where it matters: on a GPU with TF32 tensor cores. No torch here."""

from __future__ import annotations

from typing import Any


def baseline_line(run: str, tf32: Any) -> str | None:
    """"fp32 baseline RUN: TF32 matmuls off, TF32 cuDNN convolutions on (...)", or None where the
    record does not say (older runs) or the device has no TF32 (a CPU, a GPU before Ampere)."""
    if not isinstance(tf32, dict) or tf32.get("supported") is not True:
        return None
    matmul, conv = bool(tf32.get("matmul")), bool(tf32.get("cudnn"))
    state = f"TF32 matmuls {'on' if matmul else 'off'}, TF32 cuDNN convolutions {'on' if conv else 'off'}"
    used = "its float32 ran partly on TF32 tensor cores" if matmul or conv else "IEEE float32 throughout"
    return (f"fp32 baseline {run}: {state} ({used}); the other runs are measured against that "
            "(amp.tf32, or the ab variant tf32, chooses)")
