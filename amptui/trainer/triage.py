"""Why a step went non-finite, found once per run after the fact and at no cost before: the step
record that first shows a non-finite loss (or a window whose every step the GradScaler skipped)
triggers it. The failing step's micro-batches are fetched again from the data (its order is fixed
by (seed, epoch)), then:

- `input`: the batch itself holds NaN/inf: which tensor, and the dataset items where known;
- `precision_overflow`: the step is finite in float32 and not in the run's reduced dtype: the first
  module whose forward output or gradient left the dtype's range (telemetry/nonfinite.py's tracer);
- `float32_too`: non-finite in float32 as well, with finite inputs (the parameters, the loss or the
  learning rate).

The replay uses the parameters as they are at the record (a skipped step leaves them untouched;
after an unskipped non-finite step they may already hold NaN, which `float32_too` says). One
process only: under torchrun the ranks' batches and collectives make a replay a collective
(numerics.trace_nonfinite does that); there the cause is not looked for.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.utils.data import DistributedSampler

from amptui.core.config.precision import dtype_range, wide_dtype
from amptui.telemetry.nonfinite import trace_first_nonfinite
from amptui.trainer.data import TrainData
from amptui.trainer.state import TrainingState

ADVICE = {
    "input": "the data holds the NaN/inf: look at the data loader at those items (amptui's precision is not the cause)",
    "float32_too": "it overflows in float32 too: lower the learning rate, clip the gradients (amp.clip_grad_norm), "
                   "or look at the loss for log(0) or a division by zero",
}


def _floating(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point()


def _bad_rows(t: torch.Tensor) -> list[int]:
    """Rows (samples) of a batch tensor holding NaN/inf."""
    flat = t.reshape(t.shape[0], -1) if t.dim() > 0 else t.reshape(1, 1)
    return torch.nonzero(~torch.isfinite(flat).all(dim=1)).flatten().tolist()


class Triage:
    def __init__(self, state: TrainingState, accumulate: int):
        self.state, self.accumulate = state, accumulate
        self.done = False

    def _micro_batches(self, step: int) -> tuple[list[tuple[Any, Any]], list[int] | None]:
        """The micro-batches of optimizer step `step` (1-based), on the device, and for a dataset
        the items each row came from (None for generated data)."""
        s = self.state
        epoch, index = divmod(step - 1, s.steps_per_epoch)
        first = index * self.accumulate
        data = s.train_data
        if isinstance(data, TrainData):  # read the items by index: the training loop's iterator stays untouched
            sampler, saved = data.sampler, data.sampler.epoch
            sampler.set_epoch(epoch)
            order = list(DistributedSampler.__iter__(sampler))  # the epoch's whole order (no mid-epoch start)
            sampler.set_epoch(saved)
            bs, batches, items = data.batch_size, [], []
            for micro in range(self.accumulate):
                picked = order[(first + micro) * bs:(first + micro + 1) * bs]
                x, y = data.loader.collate_fn([data.loader.dataset[i] for i in picked])
                batches.append((s.on_device(x.to(data.device)), y.to(data.device) if isinstance(y, torch.Tensor) else y))
                items += picked
            return batches, items
        it = data.batches(epoch, start=first)
        return [(s.on_device(x), y) for x, y in (next(it) for _ in range(self.accumulate))], None

    def _replay(self, batches, reduced: bool, scale: float) -> bool:
        """Forward and (scaled) backward of the micro-batches; True when loss and gradients are finite."""
        s = self.state
        finite = True
        for x, y in batches:
            if reduced:
                with s.autocast():
                    loss = s.criterion(s.model(x), y)
            else:
                with torch.autocast(x.device.type, enabled=False):
                    loss = s.criterion(s.model(x.float() if x.is_floating_point() else x), y)
            finite = finite and bool(torch.isfinite(loss.detach()).all())
            (loss.float() * scale / len(batches)).backward()
        grads = [p.grad for p in s.model.parameters() if p.grad is not None]
        finite = finite and all(bool(torch.isfinite(g).all()) for g in grads)
        for p in s.model.parameters():
            p.grad = None
        return finite

    def find(self, step: int) -> dict[str, Any] | None:
        """The cause of step `step`'s non-finite loss or gradients: {cause, step, advice, ...}; None when
        the replay cannot tell (the step was finite again)."""
        self.done = True
        s = self.state
        batches, items = self._micro_batches(step)
        for x, y in batches:
            for name, tensor in (("inputs", x), ("targets", y)):
                if _floating(tensor) and (rows := _bad_rows(tensor)):
                    where = [items[r] for r in rows] if items is not None else rows
                    said = "dataset items" if items is not None else "batch rows"
                    return {"cause": "input", "step": step, "tensor": name, "items" if items is not None else "rows": where,
                            "text": f"the batch of step {step} holds NaN/inf in its {name} ({said} "
                                    f"{', '.join(map(str, where[:8]))})", "advice": ADVICE["input"]}
        scale = float(s.scaler.get_scale()) if s.scaler.is_enabled() else 1.0
        rng = torch.get_rng_state()
        was_training = s.model.training
        s.model.train()
        try:
            if not self._replay(batches, reduced=False, scale=1.0):
                bad_params = any(not bool(torch.isfinite(p).all()) for p in s.model.parameters())
                return {"cause": "float32_too", "step": step, "params_nonfinite": bad_params,
                        "text": f"step {step} is not finite in float32 either" +
                                (" (the parameters already hold NaN/inf)" if bad_params else " with finite inputs"),
                        "advice": ADVICE["float32_too"]}
            torch.set_rng_state(rng)
            dtype = s.precision.reduced
            if dtype is None:
                return None

            def replay() -> None:
                for x, y in batches:
                    with s.autocast():
                        loss = s.criterion(s.model(x), y)
                    (loss.float() * scale / len(batches)).backward()

            first = trace_first_nonfinite(s.model, replay, dtype, s.device.type, scale)
        finally:
            torch.set_rng_state(rng)
            s.model.train(was_training)
        if first is None:
            return None
        info = dtype_range(dtype)
        module, where = first.get("module", "?"), first.get("where", "forward")
        value = first.get("value")
        said_value = f" ({value:.3g})" if isinstance(value, (int, float)) and math.isfinite(value) else ""
        seen = {k: first[k] for k in ("call", "calls", "parent", "after", "bad", "of", "weights_finite") if k in first}
        what = (f"module {first['text']}: {first['checked']}" if first.get("checked") else  # what the check saw
                f"module {module}'s {where} {'output' if where == 'forward' else 'gradient'} exceeds its range "
                f"(max {info.max_finite:.4g}){said_value}")
        return {"cause": "precision_overflow", "step": step, "module": module, "where": where, "dtype": info.name,
                "value": value, **seen,
                "text": f"step {step} is finite in float32; in {info.name} {what}",
                "advice": f"keep {module} out of {info.name}: [amp.layers] \"{module}\" = \"fp32\""
                          + (f", or use {wide_dtype()} (float32's range)" if info.needs_scaler else "")}
