"""The first non-finite module, found by re-running a step's batch with hooks on every module,
containers included (the trainer's triage and `numerics.trace_nonfinite`, a script's replay of its
last forward): used only after a step overflowed, so it may read values from the device freely.

Every module call is checked as it runs: its inputs when it starts, its output when it ends. Calls
end children before parents, so the first call whose output holds inf/NaN while its inputs were
finite is the innermost module where the overflow began; functional code inside a module (scores
multiplied in its forward) is pinned on that module, not on the next one, which only passed the
inf on. A module called more than once is named with its call (2 of 3) and the module it was
called in. That module is run once more on the same inputs in float32 (autocast off) to measure
the value that crossed the range (T5's 66,246 > 65,504). With a clean forward, gradient hooks on
every module's output and every parameter name the first one, in the order backward reaches them,
whose gradient held inf/NaN. Module buffers (BatchNorm's running statistics) are put back
afterwards and the replay's gradients dropped: the run goes on as if it had not happened.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import torch
from torch import nn
from torch.func import functional_call

from amptui.core.config.precision import dtype_range
from amptui.core.numerics import describe_nonfinite
from amptui.telemetry.fsdp_policy import is_sharded
from amptui.telemetry.numerics import floating_tensors, unwrap


def _finite(tensors: list[torch.Tensor]) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in tensors)


def _as_float32(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().float() if value.is_floating_point() else value
    if isinstance(value, (tuple, list)):
        items = [_as_float32(v) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)  # a namedtuple: by field
    if isinstance(value, dict):
        return {k: _as_float32(v) for k, v in value.items()}
    return value


class _Trace:
    def __init__(self, device_type: str):
        self.device_type = device_type
        self.forward: dict[str, Any] | None = None  # the first call with finite inputs and a non-finite output
        self.backward: tuple[str, float | None] | None = None
        self.busy = False  # while a module runs again in float32: its own hooks stay quiet
        self.handles: list[Any] = []  # hooks put on FSDP's all-gathered parameters during the replay
        self.stack: list[list[Any]] = []  # the calls under way: [module name, inputs finite, last child done]
        self.calls: dict[str, int] = {}  # module name -> calls started so far

    def forward_pre_hook(self, name: str):
        def hook(module: nn.Module, args: Any, kwargs: Any) -> None:
            if self.busy:
                return
            if not self.stack:  # a forward of the whole model begins: "call 2 of 3" counts within one forward,
                self.calls = {}  # not across the micro-batches a replay runs
            self.calls[name] = self.calls.get(name, 0) + 1
            self.stack.append([name, _finite(list(floating_tensors((args, kwargs)))), None])
        return hook

    def forward_hook(self, name: str):
        def hook(module: nn.Module, args: Any, kwargs: Any, output: Any) -> None:
            if self.busy:
                return
            _, inputs_finite, last_child = self.stack.pop() if self.stack else (name, False, None)
            if not self.stack and self.forward is not None and "calls" not in self.forward:
                self.forward["calls"] = self.calls.get(self.forward["module"], 1)  # in the forward that overflowed
            outputs = list(floating_tensors(output))
            finite = _finite(outputs)
            if self.stack and finite:
                self.stack[-1][2] = name  # the caller's last child with a finite output, so far
            for t in outputs:
                if t.requires_grad:
                    t.register_hook(self.gradient_hook(name))
            if self.forward is None and inputs_finite and not finite:
                bad = sum(int((~torch.isfinite(t.detach())).sum()) for t in outputs)
                self.forward = {"module": name, "call": self.calls.get(name, 1),
                                "parent": self.stack[-1][0] if self.stack else None,
                                "after": last_child,  # its own code overflowed after its last child's finite output
                                "bad": bad, "of": sum(t.numel() for t in outputs),
                                "weights_finite": _finite([p.detach() for p in module.parameters()
                                                           if p.is_floating_point() and not hasattr(p, "to_local")]),
                                "value": self._float32_max(module, args, kwargs)}
        return hook

    def gathered_params_hook(self, name: str, hooked: set[int]):
        """A module's parameters as its forward sees them (FSDP's all-gathered ones): hooked once."""
        def hook(module: nn.Module, args: Any) -> None:
            for p in module.parameters(recurse=False):
                if p.requires_grad and id(p) not in hooked and not hasattr(p, "to_local"):
                    hooked.add(id(p))
                    self.handles.append(p.register_hook(self.gradient_hook(name)))
        return hook

    def gradient_hook(self, name: str):
        def hook(grad: torch.Tensor) -> None:
            if self.backward is None and not bool(torch.isfinite(grad).all()):
                self.backward = (name, None)
        return hook

    def _float32_max(self, module: nn.Module, args: Any, kwargs: Any) -> float | None:
        """The module's output abs max, computed again in float32 on the same inputs (and with
        float32 copies of its parameters: under FSDP they are the all-gathered param_dtype ones).
        Not for a module FSDP manages itself or through a child: running it again would
        all-gather on this rank alone, and the others would wait for it for ever."""
        if any(is_sharded(m) for m in module.modules()):
            return None
        self.busy = True
        try:
            with torch.no_grad(), torch.autocast(self.device_type, enabled=False):
                params = {name: p.float() for name, p in module.named_parameters()}
                output = functional_call(module, params, _as_float32(args), _as_float32(kwargs))
                again = list(floating_tensors(output))
            return max(float(t.abs().amax()) for t in again) if again else None
        except Exception:  # a module that cannot run on its own again: the value stays unknown
            return None
        finally:
            self.busy = False


def trace_first_nonfinite(model: nn.Module, replay: Callable[[], None], dtype: str, device_type: str,
                          scale: float | None = None, forward_only: bool = False) -> dict | None:
    """Run `replay` (the step's forward and scaled backward on the saved batch and RNG state) with
    hooks on every module; the first_nonfinite dict, or None when the replay stayed finite.
    `forward_only`: the replay computes no gradients (a script's, under no_grad): the model's own
    gradients are left as they are."""
    model = unwrap(model)
    trace = _Trace(device_type)
    owner = {id(p): name for name, m in model.named_modules() for p in m.parameters(recurse=False)}
    handles = [m.register_forward_pre_hook(trace.forward_pre_hook(name or "model"), with_kwargs=True)
               for name, m in model.named_modules()]
    handles += [m.register_forward_hook(trace.forward_hook(name or "model"), with_kwargs=True)
                for name, m in model.named_modules()]
    handles += [p.register_hook(trace.gradient_hook(owner.get(id(p), name) or "model"))
                for name, p in model.named_parameters() if p.requires_grad and not hasattr(p, "to_local")]
    # FSDP: the sharded parameters (DTensors) get their .grad assigned, not accumulated by autograd;
    # autograd sees the all-gathered ones, in place on their modules once FSDP's pre-forward ran
    hooked = {id(p) for p in model.parameters()}
    handles += [m.register_forward_pre_hook(trace.gathered_params_hook(name or "model", hooked))
                for name, m in model.named_modules()
                if any(hasattr(p, "to_local") for p in m.parameters(recurse=False))]
    buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
    try:
        with contextlib.suppress(FloatingPointError):
            replay()
    finally:
        for handle in handles + trace.handles:
            handle.remove()
        with torch.no_grad():
            for name, b in model.named_buffers():
                if name in buffers:
                    b.copy_(buffers[name])
        for p in model.parameters() if not forward_only else ():
            p.grad = None
    info = dtype_range(dtype)
    if trace.forward is not None:
        seen = trace.forward
        name = seen.pop("module")
        seen.setdefault("calls", trace.calls.get(name, 1))  # the replay stopped inside that forward
        return describe_nonfinite(name, "forward", info.name, info.max_finite, seen.pop("value"), seen=seen)
    if trace.backward is not None:
        return describe_nonfinite(trace.backward[0], "backward", info.name, info.max_finite, None, scale)
    return None
