"""The GradScaler's story without a per-step host sync: skipped steps, backoff/growth events and
the parameters that overflowed.

- `scaler_events` turns the scale after each step of a window (read at the flush) into growth and
  backoff events: a scale that went down is exactly a skipped step.
- `SkipLedger` tells the loop which steps were skipped as soon as the flag has reached the host,
  without ever waiting for it: the flag is copied (non_blocking) into pinned host memory and a
  CUDA event marks its arrival; the event is only query()d. The flush settles the rest.
- `OverflowTracer` counts non-finite gradient values per parameter on the device. It is armed only
  in the run's first window and after a window that had a backoff, so a healthy run pays nothing;
  the trainer also counts a step whose skip flag is already on the host when it finishes (always
  on a CPU). The trade-off: on a GPU that runs ahead, the first backoff after a quiet stretch may
  be reported without parameter names (`overflow: []`); the following ones in its burst are named.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import torch


def scaler_events(step0: int, previous: float | None, scales: list[float],
                  overflow: dict[int, list[str]] | None = None) -> tuple[list[dict], float | None]:
    """Turn the scale after each step of a window into growth/backoff events.

    `step0` is the step number of the window's first step; a scale that went down is exactly a
    skipped step (GradScaler backs off if and only if it found inf/NaN). Backoffs carry the
    overflowing parameters' names from `overflow` (step -> names), when they were traced.
    """
    events: list[dict[str, Any]] = []
    for i, scale in enumerate(scales):
        if previous is not None and scale != previous:
            event: dict[str, Any] = {"step": step0 + i, "event": "backoff" if scale < previous else "growth",
                     "old_scale": previous, "new_scale": scale}
            if event["event"] == "backoff":
                event["overflow"] = (overflow or {}).get(step0 + i, [])
            events.append(event)
        previous = scale
    return events, previous


def rank_overflow(names: list[str], counts: list[float], limit: int = 8) -> list[str]:
    """Parameter names with non-finite gradient values, worst (most of them) first."""
    ranked = sorted(((c, n) for n, c in zip(names, counts, strict=False) if c), key=lambda t: -t[0])
    return [name.removeprefix("module.") for _, name in ranked[:limit]]


class OverflowTracer:
    """Per-parameter non-finite gradient counts, on the device, while armed (see the module doc)."""

    def __init__(self, model: torch.nn.Module | None):
        self.params = list(model.named_parameters()) if model is not None else []
        self.armed = bool(self.params)
        self.names: list[str] = []

    def count(self, force: bool = False) -> torch.Tensor | None:
        """This step's counts (device tensor, one per parameter with a gradient), or None when
        disarmed (and not forced) or the gradients are gone. Queues kernels only; reads nothing."""
        if not (self.armed or force) or not self.params:
            return None
        named = [(n, p.grad) for n, p in self.params if p.grad is not None]
        if not named:
            return None
        self.names = [n for n, _ in named]
        # a sharded (DTensor) gradient is counted in this rank's shard
        return torch.stack([(~torch.isfinite(_local(g))).sum() for _, g in named])

    def window_done(self, had_backoff: bool) -> None:
        self.armed = bool(self.params) and had_backoff

    def named(self, step0: int, counts: dict[int, list[float]]) -> dict[int, list[str]]:
        """step -> ranked names, from a flushed window's counts (window index -> per parameter)."""
        return {step0 + i: rank_overflow(self.names, c) for i, c in counts.items()}


class SkipLedger:
    """Which optimizer steps the GradScaler skipped, learned without a host sync (module doc)."""

    def __init__(self, device: torch.device, capacity: int):
        self.capacity = max(2, capacity)
        self.cuda = device.type == "cuda"
        self._host = torch.zeros(self.capacity, dtype=torch.float32, pin_memory=self.cuda)
        self._view = self._host.numpy()  # host memory, read as such: never a device read
        self._events = [torch.cuda.Event() for _ in range(self.capacity)] if self.cuda else None
        self._pending: deque[tuple[int, int]] = deque()  # (step, slot): flag on its way
        self._ready: list[tuple[int, bool]] = []  # arrived, not yet handed out
        self._next = 0

    def __len__(self) -> int:
        return len(self._pending) + len(self._ready)

    def record(self, step: int, flag: torch.Tensor) -> None:
        if len(self._pending) == self.capacity:  # the device is a whole ring behind: wait once
            self._wait_all()
            self._drain()
        slot, self._next = self._next, (self._next + 1) % self.capacity
        self._host[slot].copy_(flag, non_blocking=True)
        if self._events is not None:
            self._events[slot].record()
        self._pending.append((step, slot))

    def known(self) -> list[tuple[int, bool]]:
        """(step, skipped) for the steps whose flag has arrived, oldest first; stops at the first
        one still on its way (so a schedule fed from here advances in order)."""
        self._drain()
        out = list(self._ready)
        self._ready.clear()
        return out

    def settle(self) -> list[tuple[int, bool]]:
        """Every pending flag (waits for the device: only at a flush or before a checkpoint)."""
        self._wait_all()
        return self.known()

    def _drain(self) -> None:
        while self._pending:
            step, slot = self._pending[0]
            if self._events is not None and not self._events[slot].query():
                return
            self._pending.popleft()
            self._ready.append((step, bool(self._view[slot] > 0)))

    def _wait_all(self) -> None:
        if self._events is not None and self._pending:
            self._events[self._pending[-1][1]].synchronize()


def _local(tensor: torch.Tensor) -> torch.Tensor:
    to_local = getattr(tensor, "to_local", None)
    return to_local() if callable(to_local) else tensor
