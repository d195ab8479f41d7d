"""`FlushCheck`: does a float16 loop without a GradScaler lose gradients that float32 keeps?

Counting small or zero gradients says nothing by itself: a zero-initialised layer gives exact zeros
in float32 too, and in a float16 backward the gradients that did underflow are already exact zeros.
So a few sampled steps get a reference: before the loop's own backward() of such a step, the same
graph is differentiated twice (`flushed_counts`), as the loop would (the gradients it gets) and with
the loss scaled by 2**REFERENCE_BITS, as a GradScaler would (only zero or not is compared). Scaling moves
float16's range down by that factor, so a value that is zero in the loop's backward and non-zero in
the scaled one is one float16 flushed that float32 keeps (down to about 2**-40). The share of the
reference's non-zero values that the loop's backward zeroed is what the warning says.

A script's step is the script's own code, which amptui cannot run again; the graph its loss already
holds is differentiated instead (torch.autograd.grad with retain_graph: no .grad is touched, the
loop's backward then runs as always). Steps that are not sampled cost one integer comparison.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Sequence

import torch

from amptui.core.config.precision import narrow
from amptui.telemetry.scripthooks import mistakes
from amptui.telemetry.scripthooks.models import optimizer_params

if TYPE_CHECKING:
    from amptui.telemetry.scripthooks.host import Session

REFERENCE_BITS = 16          # the reference's loss scale, 2**16: a GradScaler's initial scale
CHECKS = 3                    # sampled steps per run: the 2nd, then each log.every-th
FLUSHED_SHARE = 0.05          # warn above this share of float32's non-zero gradient values


def reference_bits(loss: torch.Tensor) -> int:
    """The reference's scale, 2**bits: REFERENCE_BITS, less where the loss's own dtype cannot hold it
    (a float16 loss: 2**15; its gradient seed is in that dtype)."""
    return min(REFERENCE_BITS, int(math.log2(torch.finfo(loss.dtype).max)))


def flushed_counts(loss: torch.Tensor, params: Sequence[torch.Tensor]) -> torch.Tensor | None:
    """[values zero in the loop's backward but non-zero in the scaled reference, the reference's
    finite non-zero values] over `params`' gradients of `loss` (a device tensor, not read); None when
    the graph cannot be differentiated again (a reentrant checkpoint, a compiled backward that frees
    its buffers) or the check's one byte per value would crowd the device's free memory.

    Each gradient is counted by a hook as backward computes it and handed on as a stride-0 zero, so
    no second set of gradients is ever held: only the loop's zeros, one bool per value, between the
    two passes."""
    wanted = [p for p in params if p.requires_grad]
    if not wanted or not _fits(loss.device, sum(p.numel() for p in wanted)):
        return None
    counts = torch.zeros(2, dtype=torch.int64, device=loss.device)
    zeros: dict[int, torch.Tensor] = {}

    def loop_zeros(i: int):
        def hook(grad: torch.Tensor) -> torch.Tensor:
            zeros[i] = grad == 0
            return grad.new_zeros(()).expand_as(grad)
        return hook

    def reference(i: int):
        def hook(grad: torch.Tensor) -> torch.Tensor:
            kept = (grad != 0) & grad.isfinite()  # an overflow in the reference judges nothing
            zero = zeros.pop(i, None)
            if zero is not None:  # (the first pass reached it too)
                counts[0] += (kept & zero).sum()
                counts[1] += kept.sum()
            return grad.new_zeros(()).expand_as(grad)
        return hook

    seed = torch.full_like(loss, 2.0 ** reference_bits(loss))
    try:
        for make, grad_outputs in ((loop_zeros, None), (reference, seed)):
            handles = [p.register_hook(make(i)) for i, p in enumerate(wanted)]  # after the script's own: run last
            try:
                torch.autograd.grad(loss, wanted, grad_outputs=grad_outputs, retain_graph=True, allow_unused=True)
            finally:
                for handle in handles:
                    handle.remove()
    except Exception:  # noqa: BLE001 -- the check must never break the script: no check
        return None
    return counts


def _fits(device: torch.device, values: int) -> bool:
    """The zeros mask (a byte per value) within a quarter of the GPU's free memory; a CPU is not asked."""
    if device.type != "cuda":
        return True
    free, _ = torch.cuda.mem_get_info(device)
    return values * 4 <= free


class FlushCheck:
    """The session's sampled float16 underflow check (the module doc): `backward(loss)` before the
    loop's backward() of a sampled step, `say()` at the step record that follows."""

    def __init__(self, session: Session):
        self.session = session
        self.checks = 0
        self.checked_step = 0
        self.pending: tuple[int, int, torch.Tensor] | None = None  # the sampled step, its scale's bits, its counts

    def due(self, step: int) -> bool:
        s = self.session
        if self.checks >= CHECKS or step == self.checked_step or not (step == 2 or step % s.log_every == 0):
            return False
        # an autocast to a dtype that needs loss scaling (float16) without an enabled GradScaler, in one
        # process (an extra backward in DDP would start its gradient all-reduce)
        return s.world_size == 1 and not s.scaling.on and any(narrow(d) for _, d in s.seen.entered)

    def backward(self, loss) -> None:
        step = self.session.recorder.counters.step + 1
        if not (isinstance(loss, torch.Tensor) and loss.requires_grad and loss.numel() == 1 and self.due(step)):
            return
        self.checked_step = step  # the step's first backward only (gradient accumulation runs more)
        params = optimizer_params(self.session.steps.optimizers)
        if not params:  # no optimizer stepped yet: nothing to count
            return
        self.checks += 1
        with self.session.recorder.paused("underflow check"):  # out of the step's time and range sample
            counts = flushed_counts(loss, params)
        self.pending = (step, reference_bits(loss), counts) if counts is not None else None

    def say(self) -> None:
        """At a step record: the sampled step's counts, read (one small copy), warned above FLUSHED_SHARE."""
        if self.pending is None:
            return
        (step, bits, counts), self.pending = self.pending, None
        flushed, kept = (int(v) for v in counts.tolist())
        if kept and flushed / kept > FLUSHED_SHARE:
            self.session.warn("fp16_underflow", mistakes.FP16_UNDERFLOW.format(
                share=flushed / kept, flushed=flushed, kept=kept, step=step, bits=bits))
