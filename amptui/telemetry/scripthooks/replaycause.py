"""A script's first non-finite step, pinned on its module without any setting: the model's last
training forward is run again, on the same inputs, with the tracer's hooks on every module
(telemetry/nonfinite.py), at the step record that first shows the trouble.

What it keeps costs nothing: weak references to the inputs of the model's last training forward,
taken by the per-model hook that is there anyway. At the record the loop still holds that batch (the
record is written from inside its optimizer step or scaler.update), so the references resolve; a
loop that let its batch go, or whose forward cannot run again under no_grad, gets the sampling
fallback (Recorder.triage_by_sampling). Once per run; a first record at step 1 (log.every = 1) waits for
the next, since step 1's forward ran before the model was known. A GradScaler skipped the step, so the
weights are the step's own (without one the optimizer already applied the step: weights gone inf/NaN
are said as such and named no cause); one process only (under torchrun a forward can
be a collective); the replay is forward only, under no_grad, in
the dtype the loop's autocast computed in, with the RNG and the module buffers put back: the script
goes on as if it had not happened.
"""

from __future__ import annotations

import contextlib
import math
import weakref
from typing import Any

import torch

from amptui.core.config.precision import dtype_range, wide_dtype
from amptui.core.stream.records import Numerics
from amptui.telemetry.nonfinite import trace_first_nonfinite
from amptui.telemetry.numerics import unwrap

_GONE = object()


def _weak(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return weakref.ref(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_weak(v) for v in value)
    if isinstance(value, dict):
        return {k: _weak(v) for k, v in value.items()}
    return value


def _strong(value: Any) -> Any:
    if isinstance(value, weakref.ref):
        tensor = value()
        return _GONE if tensor is None else tensor
    if isinstance(value, (tuple, list)):
        items = [_strong(v) for v in value]
        return _GONE if any(v is _GONE for v in items) else type(value)(items)
    if isinstance(value, dict):
        found = {k: _strong(v) for k, v in value.items()}
        return _GONE if any(v is _GONE for v in found.values()) else found
    return value


class LastForward:
    """The inputs of the model's last training forward, held weakly (see the module doc)."""

    def __init__(self) -> None:
        self.inputs: tuple[Any, Any] | None = None
        self.tried = False  # replayed once: a later record's replay would cost a forward and find no more
        self.waited = False

    def wait(self) -> bool:
        """Nothing kept yet: the first step's forward ran before its model was known (log.every = 1).
        True once: the next record's forward will have been kept (a model never called stops waiting)."""
        if self.inputs is not None or self.waited:
            return False
        self.waited = True
        return True

    def keep(self, args: Any, kwargs: Any) -> None:
        self.inputs = (_weak(args), _weak(kwargs))

    def get(self) -> tuple[Any, Any] | None:
        if self.inputs is None:
            return None
        found = _strong(self.inputs)
        return None if found is _GONE else found


def replay_cause(session: Any, step: int) -> bool:
    """Replay the last forward of the session's first model, once per run; say its first non-finite
    module as a `nonfinite_cause` warning when its float32 value passed the dtype's range. True when a
    cause was said or the replay waits for the next record (then no sampling is needed yet)."""
    recorder, model, kept = session.recorder, unwrap(session.models[0]), session.last_forward  # unwrap: DDP's
    # reducer and buffer broadcast stay out. One process only: under torchrun a forward may be a collective
    # (FSDP's all-gather) that one rank would run alone; there the sampling fallback names the module
    if kept.tried or recorder.cause_said or session.reduced is None or session.world_size > 1:
        return False
    if kept.wait():
        return True
    inputs = kept.get()
    if inputs is None:
        return False
    kept.tried = True
    args, kwargs = inputs
    device = recorder.device or torch.device("cpu")
    info = dtype_range(session.reduced)
    # applied AMP autocasts in the model's own hooks; a script's autocast is entered here as its loop did
    cast = contextlib.nullcontext() if session.applied is not None else \
        torch.autocast(device.type, dtype=getattr(torch, info.name))

    def replay() -> None:
        with torch.no_grad(), cast:
            model(*args, **kwargs)

    cpu_rng = torch.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
    session.replaying = True
    try:
        with recorder.paused("replay"):
            first = trace_first_nonfinite(model, replay, info.name, device.type, forward_only=True)
    except Exception:  # noqa: BLE001 -- a forward that cannot run again under no_grad (one taking gradients
        return False   # itself): sampling names the module; recording stays on (the guard would turn it off)
    finally:
        session.replaying = False
        torch.set_rng_state(cpu_rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state(cuda_rng, device)
    if first is None or first.get("where") != "forward":
        return False
    if recorder.numerics is None:  # with sampling on, the step's own sample went out with the record already
        recorder.traced[step] = Numerics(step=step, dtype=info.name, max_finite=info.max_finite, layers=[],
                                         first_nonfinite=first, traced=True)
    value, module = first.get("value"), first["module"]
    past = value is not None and math.isfinite(value) and abs(value) > info.max_finite
    if not past or not first.get("weights_finite"):
        return False  # not the dtype's range: inf/NaN that float32 holds too, or weights already broken
    wider = f", or use {wide_dtype()} (float32's range)" if info.needs_scaler else ""
    recorder.warn(f"step {step}, its batch replayed: module {first['text']}: {first.get('checked', '')}; float32 "
                  f"holds it: keep {module} out of {info.name} (run it in float32{wider})",
                  code="nonfinite_cause",
                  cause={"cause": "precision_overflow", "step": step, "module": module, "where": "forward",
                         "dtype": info.name, "value": value, "traced": True,
                         **{k: first[k] for k in ("call", "calls", "parent", "after", "bad", "of") if k in first}})
    return True
