"""A script's first non-finite step named from range samples (Recorder.triage_by_sampling: the fallback
when its forward cannot be replayed, scripthooks/replaycause.py): which window went wrong, and the
first sampled module whose forward output passed the dtype's range with its own weights finite."""

from __future__ import annotations

import math
from typing import Any

import torch

from amptui.core.config.precision import narrow, wide_dtype
from amptui.core.stream.records import Numerics
from amptui.telemetry.tally import first_bad_step

TRIAGE_SAMPLES, TRIAGE_DEPTH = 4, 3  # a script's triage: range samples taken, module depth hooked


def trouble_step(window, first: int, skipped: int, scale: float | None) -> int | None:
    """The step a window first went wrong at: its first non-finite loss, or the last step of a window the
    GradScaler skipped whole with its scale already down to 1 or less (gradients that overflow at a higher
    scale are the scaler's to calibrate); None for a healthy window."""
    if window.loss is not None and not math.isfinite(window.loss):
        return first_bad_step(window, first) or first + window.steps - 1
    if window.steps and skipped >= window.steps and scale is not None and scale <= 1:
        return first + window.steps - 1
    return None


def finite_params(model: torch.nn.Module | None, name: str) -> bool:
    """Whether module `name` of `model` holds only finite parameters (read once, after an overflow)."""
    module = dict(model.named_modules()).get(name) if model is not None else None
    return module is not None and all(bool(torch.isfinite(p).all()) for p in module.parameters())


def say_cause(recorder: Any, samples: list[Numerics]) -> None:
    """The first sample that names a module whose float32 value passed the dtype's range: a precision
    overflow (a NaN/inf that float32 holds too is not said to be one). Ends triage sampling."""
    if recorder.triage_left is not None:
        recorder.triage_left -= len(samples)
    for sample in samples:
        first = sample.first_nonfinite or {}
        value, module, where = first.get("value"), first.get("module", "?"), first.get("where")
        # the first module whose forward output left the range, its inputs (the modules before it) finite:
        # unless its own weights hold inf/NaN, the dtype's range is what it exceeded
        past = value is None or (isinstance(value, (int, float)) and abs(value) > sample.max_finite)
        if recorder.cause_said or where != "forward" or not past or not finite_params(recorder.triage_model, module):
            continue
        said = f" ({value:.3g} in float32)" if isinstance(value, (int, float)) else ""
        wider = f", or use {wide_dtype()}" if narrow(sample.dtype) else ""  # bfloat16 has float32's range
        # what sampling saw: the first sampled module (in forward order) past the range, its own weights finite
        recorder.warn(f"step {sample.step}: module {module}'s forward output{said} exceeds {sample.dtype}'s range "
                      f"(max {sample.max_finite:.4g}), the first sampled module to, its weights finite: keep {module} "
                      f"out of {sample.dtype} (run it in float32{wider})", code="nonfinite_cause",
                      cause={"cause": "precision_overflow", "step": sample.step, "module": module, "where": where,
                             "dtype": sample.dtype, "value": value, "sampled": True})
    if recorder.triage_left is not None and (recorder.cause_said or recorder.triage_left <= 0):
        recorder.numerics, recorder.triage_left = None, 0  # unhooked: sampling was for the triage only
