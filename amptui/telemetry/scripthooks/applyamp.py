"""AMP applied by amptui to an unmodified float32 script (`run.apply_amp`, which `amptui ab
--script --variants` sets), as Lightning's and accelerate's precision plugins apply it to their
own loops, with no change to the script file:

- autocast around the forward of each of the script's models, its outputs cast back to float32
  where they leave it (a loss built outside the model runs as in the fp32 loop): before its first
  step, around every outermost module call that has parameters (the models are not known yet; a
  loss module has none); from then on around the models the hooks found (models.py), by per-model hooks, so their
  submodules keep torch's fast path;
- with a GradScaler ("+scaler"): the loss `backward()` runs on scaled (scaler.scale), each
  optimizer's gradients unscaled before any `clip_grad_norm_` over its parameters (unscale_), and
  `optimizer.step()` made `scaler.step(optimizer)` followed by `scaler.update()`.

The script's own autocast or GradScaler is refused (REFUSAL): two precisions on one loop would
measure neither. What autocast cannot reach stays as the script wrote it: custom autograd
functions, manual `.half()` casts, ops the script runs outside its models' forward and dtypes it
picks per op (docs/your-own-code.md).
"""

from __future__ import annotations

import copy
import sys
import types
import weakref
from typing import Any

import torch
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

from amptui.core.config.precision import Precision
from amptui.core.config.scriptsets import APPLY_REFUSAL
from amptui.telemetry.scripthooks.patches import ModuleHook

REFUSAL = APPLY_REFUSAL  # "{script}: this script sets its own precision ({what}), ... --variant NAME='ARGS' ..."


def refuse(what: str) -> None:
    """End the script at once with the one line (SystemExit: no hook's guard swallows it)."""
    raise SystemExit(REFUSAL.format(script=sys.argv[0] if sys.argv and sys.argv[0] else "FILE", what=what))


class AppliedAmp:
    def __init__(self, variant: str):
        precision = Precision.from_variant(variant)
        self.variant = variant
        self.dtype: torch.dtype = getattr(torch, precision.dtype)
        self.scaling = precision.scaler
        self.scaler: Any = None           # made at the first loss scaled, on the loss's device
        self.own = False                  # True while amptui enters its own autocast
        self.in_step = False              # inside scaler.step(): the optimizer's own step runs
        self.unscaled: set[int] = set()   # optimizers unscaled since the last update()
        self._optimizers: list[weakref.ref] = []  # weak: an optimizer the loop drops can die (stepclock.py)
        self._stack: list[Any] = []       # per module call: the autocast amptui entered for it, or None
        self._handles: list[Any] = []

    # --- autocast around the models' forward ---------------------------------------------------

    def install(self) -> "AppliedAmp":
        self._handles = [register_module_forward_pre_hook(self._pre),
                         register_module_forward_hook(self._post, always_call=True)]
        return self

    def watch_models(self, models: list[torch.nn.Module]) -> None:
        """The script's models are known (its first step): hooks on them only from now on."""
        if not models:
            return
        self.remove()
        for model in models:
            self._handles += [model.register_forward_pre_hook(ModuleHook(self._pre)),
                              model.register_forward_hook(ModuleHook(self._post), always_call=True)]

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _pre(self, module, args) -> None:
        context = None
        if not any(c is not None for c in self._stack):  # the outermost call under amptui's autocast
            param = next(module.parameters(), None)
            if param is not None:
                context = torch.autocast(param.device.type, dtype=self.dtype)
                self.own = True
                try:
                    context.__enter__()
                finally:
                    self.own = False
        self._stack.append(context)

    def _post(self, module, args, output) -> Any:
        context = self._stack.pop() if self._stack else None
        if context is not None:
            context.__exit__(None, None, None)
            return self._as_float32(output)  # the autocast ends here: so does its dtype
        return None

    def _as_float32(self, output: Any) -> Any:
        """The model's outputs in float32 where they leave its forward (accelerate's
        convert_outputs_to_fp32 does the same): a loss the script builds outside the model (sigmoid
        + binary cross-entropy, as VAEs do) then runs as in its fp32 loop. Tensors, tuples, lists
        and dicts of them; anything else as it is (None: the output unchanged)."""
        if isinstance(output, torch.Tensor):
            return output.float() if output.dtype == self.dtype else None
        if isinstance(output, (tuple, list, dict)):
            items = output.items() if isinstance(output, dict) else enumerate(output)
            cast = {k: self._as_float32(v) for k, v in items}
            if all(v is None for v in cast.values()):
                return None
            values = {k: (output[k] if v is None else v) for k, v in cast.items()}
            if isinstance(output, dict):  # a copy of the same class (a ModelOutput stays one)
                out = copy.copy(output)
                for key, value in values.items():
                    out[key] = value
                return out
            seq = [values[i] for i in range(len(output))]
            return type(output)(*seq) if hasattr(output, "_fields") else type(output)(seq)
        return None

    # --- the GradScaler around backward, clip and step -----------------------------------------

    def scale_loss(self, tensors: Any, args: tuple, kwargs: dict) -> Any:
        """What `torch.autograd.backward` gets: a scalar loss scaled, anything else as given."""
        given = args[0] if args else kwargs.get("grad_tensors")
        if not self.scaling or given is not None or not isinstance(tensors, torch.Tensor) \
                or tensors.numel() != 1 or not tensors.requires_grad:
            return tensors
        if self.scaler is None:
            self.scaler = torch.amp.GradScaler(tensors.device.type)
        return self.scaler.scale(tensors)

    def take_step(self, optimizer: torch.optim.Optimizer) -> None:
        """A new optimizer: its `step()` becomes the scaler's step and update (a bound method, so an
        LR scheduler can wrap it as it wraps the optimizer's own)."""
        if not self.scaling:
            return
        own_step, applied = optimizer.step, self

        def step(opt, *args, **kwargs):
            if applied.in_step or applied.scaler is None:  # inside scaler.step, or no loss scaled yet
                return own_step(*args, **kwargs)
            applied.in_step = True
            try:
                out = applied.scaler.step(opt, *args, **kwargs)
            finally:
                applied.in_step = False
            applied.scaler.update()
            applied.unscaled.clear()
            return out
        optimizer.step = types.MethodType(step, optimizer)  # type: ignore[method-assign]
        self._optimizers = [r for r in self._optimizers if r() is not None] + [weakref.ref(optimizer)]

    def unscale_for(self, parameters: Any) -> None:
        """Before `clip_grad_norm_(parameters)`: each optimizer over them unscaled (once per step)."""
        if self.scaler is None:
            return
        clipped = {id(p) for p in ([parameters] if isinstance(parameters, torch.Tensor) else parameters)}
        for ref in self._optimizers:
            opt = ref()
            if opt is None or id(opt) in self.unscaled:
                continue
            if any(id(p) in clipped for group in opt.param_groups for p in group["params"]):
                self.unscaled.add(id(opt))
                self.scaler.unscale_(opt)
