"""`HygieneSampler`: silent precision mistakes, named live (core/hygiene.py says what the numbers mean).

On by default, sampled like the range headroom (numerics.py): every `numerics.hygiene_every`
optimizer steps, hooks go in before the step's forward and come out after its optimizer step, so a
step that is not sampled runs no hook (one integer comparison). What a sampled step measures, all
on the device, read back with the step record's one copy:

1. updates lost to rounding: for each 16-bit parameter, up to PROBE values (fixed positions) before
   and after the step: the share whose gradient was non-zero and whose value did not move;
3. the dtype each nn.Linear's output has (its GEMM's dtype: autocast casts inside the call) against
   the dtype the run asked for (metadata only);
5. with a GradScaler, the gradients' sum of squares as backward computes them and as the optimizer
   sees them (a step pre-hook): off by the scale means never unscaled, or unscaled twice.

Once, after the first optimizer step (dtypes only, no device read): 16-bit parameters or optimizer
moments under a mixed setup (2), and an optimizer's eps below what its state's dtype holds (4). The
loss's dtype is looked at as it is handed over (5). Each finding is said once.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Iterable, Mapping

import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_pre_hook

from amptui.core import hygiene as words
from amptui.core.config.dtypes import DTYPES
from amptui.core.config.precision import Precision
from amptui.core.config.values import Config
from amptui.telemetry.fsdp_policy import first_policy, local
from amptui.telemetry.modulehook import ModuleHook
from amptui.telemetry.numerics import unwrap

PROBE = 4096                  # values compared per parameter tensor (all of a smaller one)
SIXTEEN = (torch.float16, torch.bfloat16)
LOST, COUNTED, CHANGED = range(3)


def stochastic_rounding(opt: Any) -> bool:
    """An optimizer that rounds its bfloat16 update stochastically (torchao's `bf16_stochastic_round`, or a
    param group's key of that name): small updates survive on average, so none is called lost."""
    return bool(getattr(opt, "bf16_stochastic_round", False)
                or any(group.get("bf16_stochastic_round") for group in getattr(opt, "param_groups", [])))


def guarded(method):
    """Measuring never breaks the loop: a sampler that fails (a layout it does not know) takes its hooks
    out and stays off for the rest of the run."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if self.every <= 0:
            return [] if method.__name__ in ("riders", "records") else None
        try:
            return method(self, *args, **kwargs)
        except Exception:  # noqa: BLE001 -- see the doc
            self.every, self.pending = 0, []
            self.cancel()
            return [] if method.__name__ in ("riders", "records") else None
    return wrapper


def _own_norm(module: nn.Module) -> bool:
    """A normalisation written by hand (not torch's: those add eps in float32): a float `eps` (or Hugging
    Face's `variance_epsilon`), a 1-D 16-bit weight, no buffers (nothing a probe could update)."""
    eps = getattr(module, "eps", getattr(module, "variance_epsilon", None))
    weight = getattr(module, "weight", None)
    return (isinstance(eps, float) and not type(module).__module__.startswith("torch.")
            and isinstance(weight, torch.Tensor) and weight.dim() == 1 and weight.dtype in SIXTEEN
            and not any(True for _ in module.buffers(recurse=False)))


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


class HygieneSampler:
    """`params`: the trained parameters by name; `optimizers`: a callable giving the loop's optimizers
    now; `asked`: the dtype the run asked its forward to compute in (a 16-bit one is checked, finding 3)
    and `source` what asked it; `mixed`: the setup's name says mixed precision (autocast, a GradScaler,
    an FSDP policy), what finding 2 needs; `own`: module names computing in another dtype on purpose."""

    def __init__(self, params: Iterable[tuple[str, torch.Tensor]], optimizers: Callable[[], list[Any]], *,
                 every: int, device: torch.device, model: nn.Module | None = None, asked: str | None = None,
                 source: str = "autocast", mixed: bool = False, scaled: bool = False, autocast: bool = False,
                 own: Mapping[str, str] | None = None):
        self.every, self.device = int(every), torch.device(device)
        self.params = [(n, p) for n, p in params if p.requires_grad]
        self.optimizers, self.asked, self.source, self.mixed, self.scaled = optimizers, asked, source, mixed, scaled
        self.autocast = autocast
        self.tracked = [(n, p) for n, p in self.params if local(p).dtype in SIXTEEN and local(p).numel()]
        self.probes = [self._positions(local(p), i) for i, (_, p) in enumerate(self.tracked)]
        self.lost = words.LostUpdates({n: _name(local(p).dtype) for n, p in self.tracked})
        self.scale_check = words.ScaleCheck()
        own = own or {}
        self.linears = [(n, m) for n, m in (model.named_modules() if model is not None else [])
                        if isinstance(m, nn.Linear) and not any(n == o or n.startswith(o + ".") for o in own)]
        self.norms = [(n, m) for n, m in (model.named_modules() if model is not None else []) if _own_norm(m)]
        self.norm_probe: tuple[list[tuple[str, float, str]], torch.Tensor] | None = None  # (norm, eps, dtype), flags
        self.said: set[str] = set()
        self.findings: list[tuple[str, str]] = []   # (code, message) waiting for the next record
        self.looked_once = False
        self.current: dict[str, Any] | None = None
        self.pending: list[dict[str, Any]] = []
        self._handles: list[Any] = []

    @staticmethod
    def _positions(tensor: torch.Tensor, seed: int) -> torch.Tensor | None:
        if tensor.numel() <= PROBE:
            return None  # all of it
        gen = torch.Generator().manual_seed(seed)
        return torch.randperm(tensor.numel(), generator=gen)[:PROBE].to(tensor.device)

    def _values(self, i: int, tensor: torch.Tensor) -> torch.Tensor:
        flat = local(tensor).detach().reshape(-1)
        where = self.probes[i]
        return flat.clone() if where is None else flat.index_select(0, where)

    def say(self, code: str, message: str) -> None:
        if code not in self.said:
            self.said.add(code)
            self.findings.append((code, message))

    def due(self, step: int) -> bool:
        return self.every > 0 and step % self.every == 0

    # --- the step ---------------------------------------------------------------------------------

    @guarded
    def prepare(self, step: int, scale: torch.Tensor | None) -> None:
        """Before optimizer step `step` runs its forward: hooks in if it is sampled. `scale`: the
        GradScaler's scale tensor now (this step's backward is scaled by it)."""
        if self.current is not None or not self.due(step):
            return
        optimizers = self.optimizers()
        # no optimizer known (a Monitor without optimizer=): a step is taken when some value moved
        sample: dict[str, Any] = {"step": step, "linears": {}, "stepped": not optimizers, "blind": not optimizers}
        if words.UPDATES_LOST not in self.said and self.tracked and not any(map(stochastic_rounding, optimizers)):
            sample["before"] = [self._values(i, p) for i, (_, p) in enumerate(self.tracked)]
        if self.asked is not None and words.POLICY_IGNORED not in self.said:
            # the hooks stay on the user's modules until the step is done: ModuleHooks, so the modules
            # pickle, deep-copy and torch.save as without amptui
            self._handles += [m.register_forward_hook(ModuleHook(self._linear_hook(sample, n)))
                              for n, m in self.linears]
        if optimizers:  # torch's global pre-hook: nothing is stored on the optimizers (they pickle as before)
            self._handles.append(register_optimizer_step_pre_hook(
                self._optimizer_hook(sample, {id(opt) for opt in optimizers})))
        if self.scaled and scale is not None and len(optimizers) == 1 and words.GRAD_SCALE_WRONG not in self.said:
            grads = sample["grads"] = torch.zeros(4, dtype=torch.float32, device=self.device)
            grads[2] = scale.detach().reshape(()).float()
            grads[3] = 1.0
            self._handles += [p.register_hook(self._grad_hook(grads)) for _, p in self.params]
        self.current = sample

    def _linear_hook(self, sample: dict, name: str):
        def hook(_module: nn.Module, _inputs: Any, output: Any) -> None:
            if isinstance(output, torch.Tensor) and output.is_floating_point() and torch.is_grad_enabled():
                sample["linears"].setdefault(name, output.dtype)
        return hook

    def _grad_hook(self, grads: torch.Tensor):
        def hook(grad: torch.Tensor) -> None:
            grads[0] += local(grad.detach()).float().pow(2).sum()
        return hook

    def _optimizer_hook(self, sample: dict, ours: set[int]):
        def hook(opt: Any, _args: Any, _kwargs: Any) -> None:
            if id(opt) not in ours:
                return
            sample["stepped"] = True
            found_inf = getattr(opt, "found_inf", None)
            if isinstance(found_inf, torch.Tensor):  # the fused step may still skip
                sample["found_inf"] = found_inf.detach().reshape(()).float()
            grads = sample.get("grads")
            if grads is None:
                return
            for group in opt.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        grads[1] += local(p.grad.detach()).float().pow(2).sum()
            # a fused optimizer under a GradScaler unscales (and skips) inside its own step: the scaler hands it
            # the scale and the inf flag as attributes
            inside = getattr(opt, "grad_scale", None)
            if isinstance(inside, torch.Tensor):
                grads[3] = inside.detach().reshape(()).float()
        return hook

    @guarded
    def step_done(self) -> None:
        """After the optimizer step: hooks out; the lost-update counts queued (kernels only)."""
        if not self.looked_once:
            self.looked_once = True
            self._look_once()
        sample, self.current = self.current, None
        if sample is None:
            return
        self._remove_hooks()
        before = sample.pop("before", None)
        if before is not None and sample["stepped"]:
            counts = torch.zeros(len(self.tracked), 3, dtype=torch.float32, device=self.device)
            for i, ((_, p), was) in enumerate(zip(self.tracked, before, strict=True)):
                now = self._values(i, p)
                moved = now != was
                grad = p.grad
                dense = grad is not None and not grad.is_sparse and local(grad).numel() == local(p).numel()
                wanted = self._values(i, grad) != 0 if grad is not None and dense else torch.ones_like(moved)
                counts[i, LOST] = (wanted & ~moved).sum()
                counts[i, COUNTED] = wanted.sum()
                counts[i, CHANGED] = moved.sum()
            sample["counts"] = counts
        self._policy(sample.pop("linears"))
        if sample["stepped"] and ("counts" in sample or "grads" in sample):
            self.pending.append(sample)

    def cancel(self) -> None:
        self._remove_hooks()
        self.current = None

    def _remove_hooks(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    @guarded
    def loss(self, loss: Any) -> None:
        """The loss as the loop hands it over (finding 5): its dtype only. Under autocast a float16 loss is
        a reduction the loop wrote itself (autocast keeps its losses in float32): not judged."""
        if (not self.autocast and isinstance(loss, torch.Tensor) and loss.dtype == torch.float16
                and words.LOSS_FLOAT16 not in self.said):
            self.say(words.LOSS_FLOAT16, words.TEXTS[words.LOSS_FLOAT16])

    # --- findings from metadata -------------------------------------------------------------------

    def _policy(self, seen: dict[str, torch.dtype]) -> None:
        """Finding 3: the dtype the linears computed in against the one asked for."""
        if not seen or self.asked is None:
            return
        other = [(n, d) for n, d in seen.items() if _name(d) != self.asked]
        if len(other) <= words.POLICY_SHARE * len(seen):
            return
        got = _name(other[0][1])
        fix = {"autocast": "enter torch.autocast on the device the model is on, around the forward and the loss",
               "preset": "check that the run's autocast or FSDP MixedPrecisionPolicy reaches the model",
               "FSDP policy": "give fully_shard a MixedPrecisionPolicy(param_dtype=...) in the asked dtype"}
        self.say(words.POLICY_IGNORED, words.TEXTS[words.POLICY_IGNORED].format(
            asked=self.asked, got=got, n=len(other), total=len(seen), names=words.names_said([n for n, _ in other]),
            source=self.source, fix=fix.get(self.source, fix["preset"])))

    def _look_once(self) -> None:
        """Findings 2 and 4, from dtypes (after the first optimizer step: its state exists)."""
        optimizers = self.optimizers()
        if self.mixed and self.params:
            narrow = [(n, p) for n, p in self.params if local(p).dtype in SIXTEEN]
            moments = sorted({k for opt in optimizers for st in opt.state.values() for k, v in st.items()
                              if isinstance(v, torch.Tensor) and v.dim() and v.dtype in SIXTEEN})
            if narrow:
                total = sum(local(p).numel() for _, p in self.params)
                share = sum(local(p).numel() for _, p in narrow) / total if total else 1.0
                dtype = _name(local(narrow[0][1]).dtype)
                what = dtype + (f", and so are the optimizer's moments ({', '.join(moments)})" if moments else "")
                setup = self.source if self.source != "preset" else "a mixed-precision setup"
                self.say(words.MASTER_16BIT, words.TEXTS[words.MASTER_16BIT].format(
                    dtype=dtype, setup=setup, share=share, names=words.names_said([n for n, _ in narrow]),
                    what=what, fix="autocast" if self.source != "FSDP policy" else "the FSDP MixedPrecisionPolicy"))
        self._probe_norms()
        for opt in optimizers:
            for group in opt.param_groups:
                eps = group.get("eps")
                if not isinstance(eps, (int, float)):
                    continue
                dtypes = {_name(v.dtype) for p in group["params"] for v in opt.state.get(p, {}).values()
                          if isinstance(v, torch.Tensor) and v.dim() and v.is_floating_point()}
                for dtype in sorted(dtypes):
                    said = words.adam_eps(float(eps), dtype, type(opt).__name__)
                    if said:
                        self.say(words.EPS_VANISHES, said)

    def _probe_norms(self) -> None:
        """Finding 4 for a hand-written norm in a 16-bit dtype (torch's own add their eps in float32): one
        all-zero row through it, without gradients; an inf/NaN out means its eps rounded to zero. Once."""
        found, flags = [], []
        for name, module in self.norms:
            weight = module.weight
            eps = float(getattr(module, "eps", getattr(module, "variance_epsilon", 0.0)))
            try:
                with torch.no_grad():
                    out = module(torch.zeros(1, weight.shape[-1], dtype=weight.dtype, device=weight.device))
            except Exception:  # noqa: BLE001 -- a norm that wants other inputs: not judged
                continue
            if isinstance(out, torch.Tensor):
                found.append((name, eps, _name(weight.dtype)))
                flags.append((~out.isfinite()).any().float())
        if flags:
            self.norm_probe = (found, torch.stack(flags))

    # --- at the step record -----------------------------------------------------------------------

    @guarded
    def riders(self) -> list[torch.Tensor]:
        out = []
        for sample in self.pending:
            parts = [sample[k].reshape(-1) for k in ("counts", "grads", "found_inf") if k in sample]
            out.append(torch.cat(parts))
        return out + ([self.norm_probe[1]] if self.norm_probe is not None else [])

    @guarded
    def records(self, host: list[list[float]]) -> list[tuple[str, str]]:
        """The pending samples judged (their riders read back, in `riders()` order), with the
        metadata findings: the (code, message) pairs to write, each code once."""
        for sample, values in zip(self.pending, host, strict=False):
            at = 0
            if "found_inf" in sample and values[-1] > 0:
                continue  # a skipped step: nothing moved on purpose
            if "counts" in sample:
                n = len(self.tracked)
                rows = [values[at + 3 * i: at + 3 * i + 3] for i in range(n)]
                at += 3 * n
                if any(r[CHANGED] for r in rows) or not sample["blind"]:  # an optimizer stepped: not a skip
                    said = self.lost.observe({name: r[LOST] / r[COUNTED] for (name, _), r in zip(self.tracked, rows,
                                                                                                   strict=True)
                                              if r[COUNTED]})
                    if said:
                        self.say(words.UPDATES_LOST, said)
            if "grads" in sample:
                backward, seen, scale, inside = values[at:at + 4]
                said = self.scale_check.observe(sample["step"], backward, seen / (inside * inside), scale)
                if said:
                    self.say(words.GRAD_SCALE_WRONG, said)
        if self.norm_probe is not None and len(host) > len(self.pending):
            for (name, eps, dtype), bad in zip(self.norm_probe[0], host[len(self.pending)], strict=False):
                if bad:
                    self.say(words.EPS_VANISHES, words.norm_eps(name, eps, dtype))
            self.norm_probe = None
        self.pending = []
        out, self.findings = self.findings, []
        return out


def for_loop(model: nn.Module | None, optimizers: Callable[[], list[Any]], precision: Precision, every: int, *,
             params: Iterable[tuple[str, torch.Tensor]] | None = None, source: str = "preset",
             own: Mapping[str, str] | None = None, entered: bool | None = None,
             stated: bool = True) -> HygieneSampler | None:
    """The sampler for a loop training `model` (its parameters by name, unless `params` names them)
    in `precision`, as `source` asked ("preset", "autocast", "FSDP policy"); None when off. `entered`:
    whether the loop entered an enabled autocast (None: what `precision` says); `stated`: the precision
    was chosen by the user (a preset), not read from the loop, so a mode's own choice is respected."""
    if every <= 0 or (model is None and params is None):
        return None
    inner = unwrap(model) if model is not None else None
    named = list(params if params is not None else inner.named_parameters())  # type: ignore[union-attr]
    if not named:
        return None
    policy = first_policy([inner]) if inner is not None else None
    if policy is not None and source == "autocast":
        source = "FSDP policy"
    asked = precision.reduced if precision.reduced in DTYPES else None  # a reduced dtype was asked for
    # mixed by name: an autocast context, a GradScaler, an FSDP policy (a mode with none of them, pure bfloat16
    # by choice, keeps no float32 master copy on purpose: finding 2 is not its to hear)
    autocast = precision.autocast_dtype is not None if entered is None else entered
    mixed = (autocast or precision.scaler or precision.fsdp_policy is not None or policy is not None) and not (
        stated and not precision.mode.master_copy)
    return HygieneSampler(named, optimizers, every=every, device=local(named[0][1]).device, model=inner,
                          asked=asked, source=source, mixed=mixed, scaled=precision.scaler,
                          autocast=autocast, own=own)


def for_script(models: list[nn.Module], optimizers: list[Any], cfg: Config, entered: bool,
               precision: Precision | None) -> HygieneSampler | None:
    """A script's sampler (the hooks' session): its first model, every optimizer it steps (the list grows),
    the parameters named as the overflow tracer names them, the precision its loop was seen to use (the
    start record's: the Recorder's; None before it, when nothing is sampled)."""
    from amptui.telemetry.scripthooks.models import NamedParams  # the script hooks' naming, shared

    if precision is None:
        return None
    pairs = NamedParams(models, optimizers).pairs
    return for_loop(models[0], lambda: list(optimizers), precision, cfg.numerics.hygiene_every,
                    params=pairs, source="autocast", entered=entered, stated=False)
