"""`numerics.trace_nonfinite`: a step the GradScaler skipped is run once more, on the same
micro-batches from the same RNG state, with hooks on every module, to name the first module whose
forward output or gradient held inf/NaN (telemetry/nonfinite.py).

A skipped step leaves the parameters and the optimizer untouched, so the replay sees what the step
saw; its scale is the one the step ran at (the scale after the backoff / backoff_factor). What it
costs (docs/numerics.md): references to the step's micro-batches and a copy of the RNG state per
step, the skip flag waited for at each step (a host sync on a GPU; nothing extra on a CPU), and one
forward and backward per replayed step, at most one per step record.

Under torchrun every rank replays the same step: a skip is the same on every rank (DDP's gradients
are all-reduced before the GradScaler looks at them; under FSDP its found_inf is reduced over the
mesh), and each rank replays its own micro-batches. DDP: the replay calls the inner module, which
DDP's reducer does not watch (its hooks wait for a DDP forward), so nothing is all-reduced. FSDP:
the replay is a collective, as a step is (forward all-gathers, backward reduce-scatters), with
gradient sync left on, so the replay's gradients land in the sharded .grad the tracer clears (with
sync off FSDP would keep them in its unsharded accumulators and add them to the next step's). Then
one all_gather of the findings: a rank whose own batch stayed finite reports the lowest rank's
("... on rank 1"), so rank 0's record names the module whichever rank's batch overflowed.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from amptui.core.config.precision import dtype_range
from amptui.core.stream.records import Numerics
from amptui.telemetry import Recorder, ddp
from amptui.telemetry.nonfinite import trace_first_nonfinite
from amptui.trainer.dist import Dist, no_sync
from amptui.trainer.state import TrainingState


class StepReplay:
    def __init__(self, state: TrainingState, dist: Dist, recorder: Recorder):
        self.state, self.dist, self.recorder = state, dist, recorder
        self.batches: list[tuple[Any, Any]] = []
        self.rng: tuple[torch.Tensor, torch.Tensor | None] | None = None
        self.replayed_in_window = False

    def begin(self) -> None:
        """Before the step's first micro-batch: the RNG state it starts from."""
        cuda = self.state.device.type == "cuda"
        self.rng = (torch.get_rng_state(), torch.cuda.get_rng_state(self.state.device) if cuda else None)
        self.batches = []

    def keep(self, x: Any, y: Any) -> None:
        self.batches.append((x, y))

    def window_done(self) -> None:
        self.replayed_in_window = False

    def trace(self, step: int) -> None:
        """The step was skipped: replay it once (at most one replay per step record) and hand
        what it found to the Recorder, for the step's numerics and scaler records."""
        if self.replayed_in_window or self.rng is None or not self.batches:
            return
        self.replayed_in_window = True
        s = self.state
        scale = float(s.scaler.get_scale()) / float(s.scaler.get_backoff_factor())
        dtype = s.precision.reduced
        saved = (torch.get_rng_state(), torch.cuda.get_rng_state(s.device) if s.device.type == "cuda" else None)
        rng = self.rng

        def replay() -> None:
            torch.set_rng_state(rng[0])
            if rng[1] is not None:
                torch.cuda.set_rng_state(rng[1], s.device)
            sharded = s.sharded  # FSDP: a collective replay, gradients reduce-scattered (see above)
            sync = no_sync(s.forward) if self.dist.enabled and not sharded else contextlib.nullcontext()
            with sync:
                for x, y in self.batches:
                    with s.autocast():
                        loss = s.criterion(s.model(x), y)
                    (loss.float() * scale / len(self.batches)).backward()

        with self.recorder.paused("replay"):
            try:
                first = trace_first_nonfinite(s.model, replay, dtype, s.device.type, scale)
            finally:
                torch.set_rng_state(saved[0])
                if saved[1] is not None:
                    torch.cuda.set_rng_state(saved[1], s.device)
            if self.dist.enabled:
                first = from_any_rank(first, self.dist.world_size)
        if first is not None:
            info = dtype_range(dtype)
            self.recorder.traced[step] = Numerics(step=step, dtype=info.name, max_finite=info.max_finite, layers=[],
                                                  first_nonfinite=first, traced=True)


def from_any_rank(first: dict | None, world_size: int) -> dict | None:
    """Every rank's finding (a collective: every rank replays the same step): this rank's own, or
    else the lowest rank's, its text saying which rank's batch it was."""
    if not ddp.initialized(world_size):
        return first
    found: list[dict | None] = [None] * world_size
    torch.distributed.all_gather_object(found, first)
    if first is not None:
        return first
    other = next(((r, f) for r, f in enumerate(found) if f is not None), None)
    if other is None:
        return None
    r, f = other
    return {**f, "rank": r, "text": f"{f.get('text', f.get('module'))} on rank {r}"}
