"""Metrics that cost nothing per step: accumulated on the device, read once every `log.every` steps.

The hot loop only adds tensors (`loss_sum += loss`) and keeps a reference to the GradScaler's
scale after each update; `flush()` reads everything with a single device-to-host copy. Memory
numbers come from the allocator's host-side counters (CUDA) or the process table (CPU).
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass, field

import torch


@dataclass
class Window:
    """What one step record reports, read back from the device."""

    steps: int
    loss: float | None
    scales: list[float]
    grad_norm: float | None
    seconds: float


class StepMeter:
    def __init__(self, device: torch.device):
        self.device = device
        self._reset()

    def _reset(self) -> None:
        self.loss_sum = torch.zeros((), device=self.device, dtype=torch.float32)
        self.micro_batches = 0
        self.steps = 0
        self.scales: list[torch.Tensor] = []
        self.grad_norm: torch.Tensor | None = None
        self.started = time.perf_counter()

    def restart_clock(self) -> None:
        self.started = time.perf_counter()

    def add_loss(self, loss: torch.Tensor) -> None:
        self.loss_sum += loss.detach().float()
        self.micro_batches += 1

    def optimizer_step(self, scale: torch.Tensor | None, grad_norm: torch.Tensor | None) -> None:
        """Called after scaler.update(): keep the new scale (a device tensor; no sync)."""
        self.steps += 1
        if scale is not None:
            self.scales.append(scale.detach().reshape(()).clone())
        if grad_norm is not None:
            self.grad_norm = grad_norm.detach()

    def flush(self, reduce=None) -> Window:
        """One host sync for the whole window. `reduce` averages the loss sum over ranks (DDP)."""
        parts = [self.loss_sum, torch.tensor(float(self.micro_batches), device=self.device)]
        totals = torch.stack(parts)
        if reduce is not None:
            totals = reduce(totals)
        extra = list(self.scales) + ([self.grad_norm.float().reshape(())] if self.grad_norm is not None else [])
        values = torch.cat([totals, torch.stack(extra).float()]) if extra else totals
        host = values.tolist()  # the sync
        loss_sum, count = host[0], host[1]
        scales = host[2:2 + len(self.scales)]
        grad_norm = host[2 + len(self.scales)] if self.grad_norm is not None else None
        window = Window(self.steps, loss_sum / count if count else None, scales, grad_norm,
                        time.perf_counter() - self.started)
        self._reset()
        return window


def scaler_events(step0: int, previous: float | None, scales: list[float],
                  overflow: dict[int, list[str]] | None = None) -> tuple[list[dict], float | None]:
    """Turn the scale after each step of a window into growth/backoff events.

    `step0` is the step number of the window's first step; a scale that went down is exactly a
    skipped step (GradScaler backs off if and only if it found inf/NaN). Backoffs carry the
    overflowing parameters' names from `overflow` (step -> names), when they were looked up.
    """
    events = []
    for i, scale in enumerate(scales):
        if previous is not None and scale != previous:
            event = {"step": step0 + i, "event": "backoff" if scale < previous else "growth",
                     "old_scale": previous, "new_scale": scale}
            if event["event"] == "backoff":
                event["overflow"] = (overflow or {}).get(step0 + i, [])
            events.append(event)
        previous = scale
    return events, previous


def overflowing_parameters(model: torch.nn.Module, limit: int = 8) -> list[str]:
    """Names of the parameters whose gradients hold inf/NaN, worst (most non-finite values) first.

    Called only on a skipped step, so its host sync is paid only when something went wrong.
    """
    named = [(n, p.grad) for n, p in model.named_parameters() if p.grad is not None]
    if not named:
        return []
    counts = torch.stack([(~torch.isfinite(g)).sum() for _, g in named]).tolist()
    ranked = sorted(((c, n) for (n, _), c in zip(named, counts) if c), key=lambda t: -t[0])
    return [name.removeprefix("module.") for _, name in ranked[:limit]]


def _visible_gpus(nv) -> list[tuple[int, object]]:
    """(torch index, NVML handle) of the GPUs this process can use. NVML counts every GPU in PCI
    order and ignores CUDA_VISIBLE_DEVICES; torch's device UUIDs tie the two together."""
    try:
        pairs = []
        for index in range(torch.cuda.device_count()):
            uuid = str(torch.cuda.get_device_properties(index).uuid)
            pairs.append((index, nv.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")))
        if pairs:
            return pairs
    except Exception:  # an older driver or torch without UUIDs: every GPU, by NVML's own order
        pass
    return [(index, nv.nvmlDeviceGetHandleByIndex(index)) for index in range(nv.nvmlDeviceGetCount())]


# --- memory ----------------------------------------------------------------------------------------

def _rss() -> tuple[int, int]:
    import psutil

    rss = psutil.Process(os.getpid()).memory_info().rss
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    return rss, max(rss, peak)


def step_memory(device: torch.device) -> dict[str, int]:
    """The `mem` field of a step record: the allocator's counters (no sync) or the process RSS."""
    if device.type == "cuda":
        return {"allocated": torch.cuda.memory_allocated(device), "reserved": torch.cuda.memory_reserved(device),
                "peak_allocated": torch.cuda.max_memory_allocated(device)}
    rss, peak = _rss()
    return {"rss": rss, "peak_rss": peak}


def peak_memory(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device)
    return _rss()[1]


@dataclass
class DeviceSampler:
    """Periodic `mem` records: NVML per GPU when available (used, total, util), and process RSS."""

    every_s: float = 2.0
    last: float = field(default=0.0)
    _nvml: object = None
    _nvml_failed: bool = False

    def due(self) -> bool:
        return time.monotonic() - self.last >= self.every_s

    def sample(self, with_gpus: bool) -> dict:
        self.last = time.monotonic()
        rss, peak = _rss()
        payload: dict = {"rss": rss, "peak_rss": peak, "devices": []}
        if with_gpus:
            payload["devices"] = self._gpus()
        return payload

    def _gpus(self) -> list[dict]:
        if self._nvml_failed:
            return []
        try:
            if self._nvml is None:
                import pynvml

                pynvml.nvmlInit()
                self._nvml = pynvml
            nv = self._nvml
            devices = []
            for index, handle in _visible_gpus(nv):
                info = nv.nvmlDeviceGetMemoryInfo(handle)
                util = nv.nvmlDeviceGetUtilizationRates(handle)
                devices.append({"index": index, "name": nv.nvmlDeviceGetName(handle), "used": int(info.used),
                                "total": int(info.total), "util": int(util.gpu)})
            return devices
        except Exception:  # no driver / no NVML library: telemetry is optional
            self._nvml_failed = True
            return []
