"""Per-layer range headroom, sampled on the device (`[numerics]`), for any nn.Module: amptui's
trainer, `amptui.Monitor` and hooked scripts attach the same `RangeSampler` through the Recorder.

Every `numerics.every` optimizer steps (and the step after a known backoff), forward hooks are
registered on the modules at the chosen depth for that one step: each writes the abs max of its
output into one device buffer and hangs a hook on the output's gradient, which writes the abs max
of the gradient flowing back through it (the order both fire in is kept on the host: no read).
Hooks on the parameters add their gradients' abs max and the count of values that are below the
dtype's smallest normal once unscaled (both read as backward computes them, before any optimizer
unscales or fuses them); the scaled maxima are divided by the step's scale. The hooks are removed: a step that is
not sampled runs no hook at all, and `every = 0` registers nothing.

The buffer rides along with the step record's one device-to-host copy (`StepMeter.flush`); the
Recorder turns it into `numerics` records and, for a step that overflowed, names the first
module in execution order whose forward output (or, failing that, whose gradient in backward)
held inf/NaN.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

import torch
from torch import nn

from amptui.core.config.precision import dtype_range
from amptui.core.numerics import describe_nonfinite, headroom_bits
from amptui.core.stream.records import Numerics
from amptui.telemetry import probes
from amptui.telemetry.fsdp_policy import local  # a sharded (FSDP2 DTensor) gradient's shard
from amptui.telemetry.modulehook import ModuleHook

FORWARD, BACKWARD, GRAD, UNDERFLOW = range(4)  # the buffer's columns, one row per module


def modules_at_depth(model: nn.Module, depth: int) -> list[tuple[str, nn.Module]]:
    """The modules `depth` levels below the model ("blocks.0" is at depth 2), in registration
    order, plus leaf modules above that depth (an embedding beside the blocks); the model itself
    when it has no children. DDP / DataParallel / compiled wrappers are looked through."""
    model = unwrap(model)
    found: list[tuple[str, nn.Module]] = []

    def walk(prefix: str, module: nn.Module, level: int) -> None:
        children = list(module.named_children())
        if level == depth or (not children and level > 0):
            found.append((prefix, module))
            return
        for name, child in children:
            walk(f"{prefix}.{name}" if prefix else name, child, level + 1)

    walk("", model, 0)
    return found or [("model", model)]


def unwrap(model: nn.Module) -> nn.Module:
    for attr in ("module", "_orig_mod"):  # DDP / DataParallel, torch.compile
        inner = getattr(model, attr, None)
        if isinstance(inner, nn.Module):
            return unwrap(inner)
    return model


def floating_tensors(value: Any) -> Iterator[torch.Tensor]:
    """The floating-point tensors in a module's output (a tensor, or tuples/lists/dicts of them)."""
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() and value.numel():
            yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from floating_tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from floating_tensors(item)


@dataclass
class Sample:
    """One sampled step, on its way to the host."""

    step: int
    buffer: torch.Tensor                    # (modules + probes' rows + 1, 4) float32 on the device
    scaled: bool                            # its backward ran on a GradScaler's scaled loss
    seen: list[int]                         # gradient values counted per row (for the underflow share)
    forward_order: list[int] = field(default_factory=list)   # rows, in the order their forward ran
    backward_order: list[int] = field(default_factory=list)  # rows, in the order their gradient arrived
    last_order: list[int] = field(default_factory=list)  # rows, in the order of their last forward call


class RangeSampler:
    """See the module doc. `dtype`: the dtype the forward computes in (headroom is to its range)."""

    def __init__(self, model: nn.Module, *, every: int, depth: int, dtype: str, device: torch.device,
                 layer_dtypes: Mapping[str, str] | None = None):
        self.every = int(every)
        self.dtype = dtype_range(dtype)
        self.device = torch.device(device)
        self.modules = modules_at_depth(model, depth)
        # [amp.layers]: a module computing in another dtype has its headroom measured to that one's range
        self.own_dtypes = {name: dtype_range(d) for name, _ in self.modules
                           if (d := (layer_dtypes or {}).get(name)) is not None and d != self.dtype.name}
        self.params = [[p for p in m.parameters() if p.requires_grad] for _, m in self.modules]
        self.probes = probes.attach(unwrap(model))  # the modes' own probes (telemetry/probes/): their own rows
        self.armed = False            # sample the next step too (after a known backoff)
        self.quiet = False            # a forward/backward that is not the step (a replay): hooks write nothing
        self.current: Sample | None = None
        self.pending: list[Sample] = []
        self._handles: list[Any] = []

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.modules]

    # --- the step: hooks in for a sampled step, out after it -------------------------------------

    def due(self, step: int) -> bool:
        return self.every > 0 and (step % self.every == 0 or self.armed)

    def prepare(self, step: int, scale: torch.Tensor | None) -> None:
        """Before optimizer step `step` (1-based) runs its forward: hook the modules if it is sampled.
        `scale`: the GradScaler's scale tensor now (what this step's backward is scaled by)."""
        if self.current is not None or not self.due(step):
            return
        self.armed = False
        # one row per module, the probes' rows, and a last row holding the loss scale this
        # step's backward ran at
        probe_rows = sum(p.rows for p in self.probes)
        buffer = torch.zeros(len(self.modules) + probe_rows + 1, 4, dtype=torch.float32, device=self.device)
        buffer[-1, 0] = scale.detach().reshape(()).float() if scale is not None else 1.0
        sample = self.current = Sample(step, buffer, scale is not None, [0] * len(self.modules))
        for row, (_, module) in enumerate(self.modules):
            self._handles.append(module.register_forward_hook(ModuleHook(self._forward_hook(row))))
            # gradients as backward computes them (scaled; before any optimizer unscales or fuses them)
            self._handles += [p.register_hook(self._param_hook(sample, row)) for p in self.params[row]]
        first_row = len(self.modules)
        for probe in self.probes:
            self._handles += probe.hook(buffer, first_row, lambda: self.quiet)
            first_row += probe.rows

    @contextlib.contextmanager
    def suspended(self):
        """A forward and backward that is not the sampled step (numerics.trace_nonfinite's replay of
        the step before, run while this step's hooks are already in): nothing of it reaches the
        sample, neither its values nor the order its modules ran in."""
        quiet, self.quiet = self.quiet, True
        try:
            yield
        finally:
            self.quiet = quiet

    def _forward_hook(self, row: int):
        def hook(_module: nn.Module, _inputs: Any, output: Any) -> None:
            sample = self.current
            # an evaluation between steps (no grad) or a replay is not the step
            if sample is None or self.quiet or not torch.is_grad_enabled():
                return
            tensors = list(floating_tensors(output))
            if not tensors:
                return
            if row not in sample.forward_order:
                sample.forward_order.append(row)
            if sample.last_order and sample.last_order[-1] != row:  # a reused module moves to its latest call
                with contextlib.suppress(ValueError):
                    sample.last_order.remove(row)
            if not sample.last_order or sample.last_order[-1] != row:
                sample.last_order.append(row)
            for t in tensors:
                value = t.detach().abs().amax().float()
                sample.buffer[row, FORWARD] = torch.maximum(sample.buffer[row, FORWARD], value)
                if t.requires_grad:
                    t.register_hook(self._gradient_hook(sample, row))
        return hook

    def _gradient_hook(self, sample: Sample, row: int):
        def hook(grad: torch.Tensor) -> None:
            if self.quiet:
                return
            if row not in sample.backward_order:
                sample.backward_order.append(row)
            value = local(grad.detach()).abs().amax().float()
            sample.buffer[row, BACKWARD] = torch.maximum(sample.buffer[row, BACKWARD], value)
        return hook

    def _param_hook(self, sample: Sample, row: int):
        tiny = self.own_dtypes.get(self.modules[row][0], self.dtype).smallest_normal

        def hook(grad: torch.Tensor) -> None:
            if self.quiet:
                return
            g = local(grad.detach())
            sample.buffer[row, GRAD] = torch.maximum(sample.buffer[row, GRAD], g.abs().amax().float())
            # below the smallest normal once unscaled (the last row holds the scale)
            small = ((g != 0) & (g.abs().float() < tiny * sample.buffer[-1, 0])).sum()
            sample.buffer[row, UNDERFLOW] += small.float()
            sample.seen[row] += g.numel()
        return hook

    def step_done(self) -> None:
        """After the optimizer step: the hooks come out; the scaled gradients' abs max are divided
        by the scale the backward ran at. Queues kernels only."""
        sample = self.current
        if sample is None:
            return
        self._remove_hooks()
        self.current = None
        sample.buffer[:len(self.modules), BACKWARD:GRAD + 1] /= sample.buffer[-1, 0]
        self.pending.append(sample)

    def cancel(self) -> None:
        """The step did not happen (an exception, a stop): no hooks stay behind."""
        self._remove_hooks()
        self.current = None

    def _remove_hooks(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    # --- at the step record: tensors out, records back ------------------------------------------

    def riders(self) -> list[torch.Tensor]:
        """The pending samples' buffers, for the step record's one copy."""
        return [s.buffer for s in self.pending]

    def records(self, host: list[list[float]]) -> list[Numerics]:
        """The pending samples as records, from their buffers read back (in `riders()` order)."""
        out = [self._record(sample, values) for sample, values in zip(self.pending, host, strict=False)]
        self.pending = []
        return out

    def _record(self, sample: Sample, values: list[float]) -> Numerics:
        rows = [values[i * 4:(i + 1) * 4] for i in range(len(self.modules))]
        scale = values[-4] if sample.scaled else None
        top = self.dtype.max_finite
        layers = []
        for (name, _), seen, row in zip(self.modules, sample.seen, rows, strict=False):
            forward, backward, grad, small = row
            own = self.own_dtypes.get(name)
            mine = own.max_finite if own is not None else top
            layer: dict[str, Any] = {"name": name, "forward": headroom_bits(forward, mine),
                                     "grad": headroom_bits(grad, mine) if seen else None,
                                     "underflow": round(small / seen, 6) if seen and math.isfinite(grad) else None}
            where = "forward" if not math.isfinite(forward) else (
                "backward" if not (math.isfinite(backward) and math.isfinite(grad)) else None)
            if where:
                layer["nonfinite"] = where
            if own is not None:
                layer["dtype"] = own.name
            layers.append(layer)
        first = self._first_nonfinite(sample, rows, scale)
        entries, start = {}, len(self.modules) * 4
        for probe in self.probes:
            entries[probe.key] = probe.records(values[start:start + probe.rows * 4])
            start += probe.rows * 4
        return Numerics(step=sample.step, dtype=self.dtype.name, max_finite=top, layers=layers,
                        first_nonfinite=first, probes=entries)

    def _first_nonfinite(self, sample: Sample, rows: list[list[float]], scale: float | None) -> dict | None:
        """The first module in execution order whose forward output held inf/NaN; else the first
        whose gradient did, in the order backward reached them. A module called more than once (a
        reused relu) holds the worst of its calls: it is placed at its last call, so a conv whose
        output overflowed between two of its calls is named, not the relu that passed the inf on."""
        for row in sample.last_order:
            if not math.isfinite(rows[row][FORWARD]):
                return describe_nonfinite(self.modules[row][0], "forward", self.dtype.name, self.dtype.max_finite,
                                          rows[row][FORWARD])
        backward = sample.backward_order + [r for r in reversed(sample.forward_order) if r not in sample.backward_order]
        backward += [r for r in range(len(rows)) if r not in backward]
        for row in backward:
            if not (math.isfinite(rows[row][BACKWARD]) and math.isfinite(rows[row][GRAD])):
                bad = rows[row][BACKWARD] if not math.isfinite(rows[row][BACKWARD]) else rows[row][GRAD]
                return describe_nonfinite(self.modules[row][0], "backward", self.dtype.name, self.dtype.max_finite,
                                          bad, scale)
        return None
