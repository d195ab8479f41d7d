"""When an unmodified script's training step ends, with one optimizer or several, and which
backward's loss is that step's (docs/your-own-code.md, "Steps, loss and epochs").

A training step ends when every optimizer in use has stepped since the last step ended (with an
enabled GradScaler, at the `scaler.update()` that follows). One optimizer: each of its steps, after
however many micro-batches (gradient accumulation). A GAN stepping D then G: one step per pair. A
WGAN whose critic steps n_critic times per generator step: one step per generator step.

An optimizer is in use from its creation (so the first step is right before the generator ever
stepped) until it is garbage-collected, a newer optimizer takes over any of its parameters (a loop
that makes a new optimizer each epoch), or RETIRE_AFTER optimizer steps (at least four times the
longest step so far) pass without it: an optimizer made and never stepped cannot stall the count.

The step's loss: what was backward'ed (or `scaler.scale()`d) before the last optimizer step that
had losses of its own, summed (the step applies the sum of their gradients). One optimizer: the
sum of the step's micro-batches (accumulation's loss / ACC each: the true mean loss). A GAN: the
generator's loss, not the critic's (two different quantities added would mean nothing). Losses
stay device tensors, summed on the device: nothing here reads one back.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch

RETIRE_AFTER = 256


def _param_ids(optimizer: Any) -> frozenset[int]:
    try:
        return frozenset(id(p) for group in optimizer.param_groups for p in group["params"])
    except (AttributeError, KeyError, TypeError):
        return frozenset()


class Losses:
    """A sum of scalar losses on the device and how many were added (micro-batches)."""

    def __init__(self) -> None:
        self.total: torch.Tensor | None = None
        self.count = 0

    def add(self, loss: torch.Tensor) -> None:
        loss = loss.detach()
        if loss.dtype != torch.float32:
            loss = loss.float()
        self.total = loss if self.total is None else self.total + loss
        self.count += 1


class _Held:
    """A strong reference that answers like a weak one."""

    def __init__(self, obj: Any):
        self.obj = obj

    def __call__(self) -> Any:
        return self.obj


class StepClock:
    def __init__(self, retire_after: int = RETIRE_AFTER):
        self.retire_after = retire_after
        self._in_use: dict[int, weakref.ref | _Held] = {}
        self._params: dict[int, frozenset[int]] = {}
        self._stepped: set[int] = set()
        self._events = 0          # optimizer steps since the last boundary
        self._longest = 0         # the most optimizer steps one training step took so far
        self.last: Any = None     # the optimizer that stepped last (its lr is the step's)
        self._stretch = Losses()  # losses since the last optimizer step
        self._fed = Losses()      # the losses of the last optimizer step that had some

    def made(self, optimizer: Any) -> None:
        """A new optimizer: in use from now on; it replaces any optimizer over the same parameters."""
        params = _param_ids(optimizer)
        for key in [k for k, ids in self._params.items() if ids & params]:
            self._drop(key)
        self._add(optimizer, params)

    def _add(self, optimizer: Any, params: frozenset[int] | None = None) -> None:
        key = id(optimizer)
        known = self._in_use.get(key)
        if known is not None and known() is optimizer:
            return
        try:
            self._in_use[key] = weakref.ref(optimizer)
        except TypeError:  # an optimizer-like object without weak references: never retired by death
            self._in_use[key] = _Held(optimizer)
        self._params[key] = params if params is not None else _param_ids(optimizer)

    def _drop(self, key: int) -> None:
        self._in_use.pop(key, None)
        self._params.pop(key, None)
        self._stepped.discard(key)

    @property
    def knows_optimizers(self) -> bool:
        """Has any optimizer been made (or stepped) since recording began?"""
        return bool(self._in_use) or self.last is not None

    @property
    def holds_losses(self) -> bool:
        """Losses wait here for their step: the device they live on is the window's."""
        return bool(self._stretch.count or self._fed.count)

    def add_loss(self, loss: torch.Tensor) -> None:
        self._stretch.add(loss)

    def stepped(self, optimizer: Any) -> None:
        """An optimizer stepped (a GradScaler's skipped step too: the step was the loop's)."""
        self._add(optimizer)
        self._stepped.add(id(optimizer))
        self._events += 1
        self.last = optimizer
        if self._stretch.count:
            self._fed, self._stretch = self._stretch, Losses()

    def complete(self) -> bool:
        """Has every optimizer in use stepped since the last boundary?"""
        if not self._stepped:
            return False
        waiting = [k for k in self._in_use if k not in self._stepped]
        if not waiting:
            return True
        gone = [k for k in waiting if self._in_use[k]() is None]
        if len(gone) < len(waiting) and self._events <= max(self.retire_after, 4 * self._longest):
            for key in gone:
                self._drop(key)
            return False
        for key in waiting:  # dead, or not stepped for too long: no longer in use
            self._drop(key)
        return True

    def boundary(self) -> Losses:
        """The step ended: its losses, and a fresh count."""
        self._longest = max(self._longest, self._events)
        self._stepped.clear()
        self._events = 0
        fed, self._fed = self._fed, Losses()
        return fed


class StepLr:
    """What the Recorder reads a step record's lr from (as it reads an optimizer's param_groups):
    the lr the last training step ran with, kept at that step. A record written later -- at the
    training loader's next pass or the script's end, after its per-epoch `scheduler.step()` --
    shows the lr its steps used, as the trainer's record written before its schedule steps does."""

    def __init__(self) -> None:
        self.param_groups: list[dict[str, Any]] = [{"lr": None}]

    def took(self, optimizer: Any) -> "StepLr":
        groups = getattr(optimizer, "param_groups", None)
        self.param_groups[0]["lr"] = groups[0].get("lr") if groups else None  # a reference: no device read
        return self
