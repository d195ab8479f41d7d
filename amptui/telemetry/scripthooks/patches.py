"""Every hook amptui puts into an unmodified script's torch, in this one module, all reversible.

Public torch hooks where they exist: the global optimizer step post hook
(`torch.optim.optimizer.register_optimizer_step_post_hook`) and the global module forward
pre-hook (`torch.nn.modules.module.register_module_forward_pre_hook`, removed again once the
script's models are known: per-model hooks replace it, so submodules keep torch's fast path).
Patched, because torch has no hook for them: `Optimizer.__init__` (which optimizers a step waits
for, before each has stepped), `GradScaler.scale/unscale_/step/update`,
`torch.autocast.__enter__` (which precision the loop really uses), `torch.autograd.backward`
(the loss of a loop without a scaler; `Tensor.backward` goes through it), the DataLoader's
`__iter__` and its iterators' `__next__` (passes and data wait), `clip_grad_norm_`,
`LRScheduler.__init__` (a scheduler stepped before its optimizer's first step: seen from its
`last_epoch`, not from torch's Python warning, which a script or PYTHONWARNINGS may silence), and `torch.save` (amptui's hooks
taken off the modules it saves, so the file loads where amptui is not). Each wrapper calls the original
and tells a `listener` (scripthooks.session.ScriptSession): nothing here reads a device tensor.
With AMP applied by amptui (applyamp.py) the optimizer, backward and clip wrappers also hand the
call to it: its GradScaler scales the loss, takes over the step and unscales before a clip.

Hooks put on a user's module are `ModuleHook`s, a module-level class: the module pickles and
deep-copies as it does without amptui (a copy's hook does nothing).

Tested on every torch CI runs (tests/functional/test_scripthooks.py is in .ci/run's OLDEST_TORCH_TESTS):
if a torch release renames one of these, this module is the one to mend.
"""

from __future__ import annotations

import contextlib
import functools
import time
from typing import Any, Callable

import torch
import torch.nn.utils
import torch.nn.utils.clip_grad
import torch.serialization
import torch.utils.data.dataloader as dataloader_module
from torch.amp.autocast_mode import autocast
from torch.amp.grad_scaler import GradScaler
from torch.nn.modules.module import register_module_forward_pre_hook
from torch.optim.lr_scheduler import LRScheduler
from torch.optim.optimizer import register_optimizer_step_post_hook

from amptui.telemetry.modulehook import ModuleHook


class Patches:
    """install() puts the hooks in; remove() takes every one of them out again."""

    def __init__(self, listener: Any, applied: Any = None):
        self.listener = listener
        self.applied = applied  # AMP amptui applies to the script (applyamp.AppliedAmp), or None
        self._undo: list[Callable[[], None]] = []
        self._forward_hook: Any = None

    # --- bookkeeping -------------------------------------------------------------------------------

    def _replace(self, owner: Any, name: str, make: Callable[[Callable], Callable]) -> None:
        original = getattr(owner, name)
        wrapper = make(original)
        functools.update_wrapper(wrapper, original)
        setattr(owner, name, wrapper)
        self._undo.append(lambda: setattr(owner, name, original))

    def remove(self) -> None:
        self.stop_watching_forwards()
        while self._undo:
            self._undo.pop()()

    def stop_watching_forwards(self) -> None:
        """Take the global forward pre-hook out (the per-model hooks took over)."""
        if self._forward_hook is not None:
            self._forward_hook.remove()
            self._forward_hook = None

    # --- install -----------------------------------------------------------------------------------

    def install(self, autocast_only: bool = False) -> "Patches":
        self._patch_autocast()
        if autocast_only:
            return self
        on = self.listener
        post = register_optimizer_step_post_hook(lambda opt, args, kwargs: on.optimizer_post(opt))
        self._undo.append(post.remove)
        self._forward_hook = register_module_forward_pre_hook(
            lambda module, args: on.any_forward(module, args))
        self._patch_optimizer_init()
        self._patch_scaler()
        self._patch_backward()
        self._patch_loader()
        self._patch_clip()
        self._patch_scheduler()
        self._patch_save()
        return self

    def _patch_autocast(self) -> None:
        on = self.listener

        def make(original):
            def __enter__(self):
                out = original(self)
                if getattr(self, "_enabled", False) and torch.is_grad_enabled():
                    on.autocast_entered(self.device, self.fast_dtype)
                return out
            return __enter__
        self._replace(autocast, "__enter__", make)

    def _patch_optimizer_init(self) -> None:
        on, applied = self.listener, self.applied

        def make(original):
            def __init__(self, *args, **kwargs):
                original(self, *args, **kwargs)
                if applied is not None:
                    applied.take_step(self)
                on.optimizer_made(self)
            return __init__
        self._replace(torch.optim.Optimizer, "__init__", make)

    def _patch_scaler(self) -> None:
        on = self.listener

        def make_scale(original):
            def scale(self, outputs):
                on.scaler_scale(self, outputs)
                return original(self, outputs)
            return scale

        def make_unscale(original):
            def unscale_(self, optimizer):
                on.scaler_unscale(self, optimizer)
                return original(self, optimizer)
            return unscale_

        def make_step(original):
            def step(self, optimizer, *args, **kwargs):
                on.scaler_step_enter(self, optimizer)
                done = False
                try:
                    out = original(self, optimizer, *args, **kwargs)
                    done = True
                    return out
                finally:
                    on.scaler_step_exit(self, optimizer, done)  # a step that raised is no training step
            return step

        def make_update(original):
            def update(self, new_scale=None):
                out = original(self, new_scale)
                on.scaler_updated(self)
                return out
            return update
        for name, make in (("scale", make_scale), ("unscale_", make_unscale), ("step", make_step),
                           ("update", make_update)):
            self._replace(GradScaler, name, make)

    def _patch_backward(self) -> None:
        on, applied = self.listener, self.applied

        def make(original):
            def backward(tensors, *args, **kwargs):
                if applied is not None:  # amptui's own GradScaler scales the loss (applyamp.py)
                    tensors = applied.scale_loss(tensors, args, kwargs)
                on.backward(tensors)
                return original(tensors, *args, **kwargs)
            return backward
        self._replace(torch.autograd, "backward", make)

    def _patch_loader(self) -> None:
        on = self.listener

        def make_iter(original):
            def __iter__(self):
                it = original(self)
                on.loader_pass(self, it)
                return it
            return __iter__

        def make_next(original):
            def __next__(self):
                t0 = time.perf_counter()
                ran_out = True  # StopIteration (or a worker's error): the pass is over
                try:
                    batch = original(self)
                    ran_out = False
                    return batch
                finally:
                    on.batch_waited(self, time.perf_counter() - t0, ran_out)
            return __next__
        self._replace(dataloader_module.DataLoader, "__iter__", make_iter)
        self._replace(dataloader_module._BaseDataLoaderIter, "__next__", make_next)

    def _patch_clip(self) -> None:
        on, applied = self.listener, self.applied

        def make(original):
            def clip_grad_norm_(parameters, *args, **kwargs):
                if not isinstance(parameters, torch.Tensor):
                    parameters = list(parameters)  # a generator is read once: by us, then handed on
                if applied is not None:  # unscaled before the clip, as a GradScaler needs (applyamp.py)
                    applied.unscale_for(parameters)
                on.clip(parameters)
                norm = original(parameters, *args, **kwargs)
                on.clipped(norm)
                return norm
            return clip_grad_norm_
        clip = torch.nn.utils.clip_grad.clip_grad_norm_
        self._replace(torch.nn.utils.clip_grad, "clip_grad_norm_", make)
        wrapped = torch.nn.utils.clip_grad.clip_grad_norm_
        if torch.nn.utils.clip_grad_norm_ is clip:  # the name scripts call, re-exported
            torch.nn.utils.clip_grad_norm_ = wrapped
            self._undo.append(lambda: setattr(torch.nn.utils, "clip_grad_norm_", clip))

    def _patch_scheduler(self) -> None:
        """Only __init__: a wrapped step() would move torch's own warnings (stacklevel=2) onto this
        file; the listener reads the scheduler's public `last_epoch` to see that it stepped."""
        on = self.listener

        def make(original):
            def __init__(self, *args, **kwargs):
                original(self, *args, **kwargs)
                on.scheduler_made(self)
            return __init__
        self._replace(LRScheduler, "__init__", make)

    def _patch_save(self) -> None:
        def make(original):
            def save(obj, *args, **kwargs):
                with without_module_hooks(obj):
                    return original(obj, *args, **kwargs)
            return save
        self._replace(torch.serialization, "save", make)
        wrapped = torch.serialization.save
        original = torch.save
        torch.save = wrapped  # the name scripts call, re-exported
        self._undo.append(lambda: setattr(torch, "save", original))


_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks")
_HOOK_FLAGS = ("_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs", "_forward_hooks_always_called")


@contextlib.contextmanager
def without_module_hooks(obj: Any):
    """amptui's ModuleHooks off the modules in `obj` (a module, or a dict/list/tuple of them, as
    checkpoints hold them) while it is saved, then back in their order."""
    found = [obj] if isinstance(obj, torch.nn.Module) else \
        list(obj.values()) if isinstance(obj, dict) else list(obj) if isinstance(obj, (list, tuple)) else []
    saved: list[tuple[dict, dict]] = []
    for top in found:
        for module in top.modules() if isinstance(top, torch.nn.Module) else ():
            ours = {k for name in _HOOK_DICTS for k, hook in getattr(module, name, {}).items()
                    if isinstance(hook, ModuleHook)}
            for name in (_HOOK_DICTS + _HOOK_FLAGS) if ours else ():
                table = getattr(module, name, None)
                if isinstance(table, dict):
                    saved.append((table, dict(table)))
                    for key in ours & table.keys():
                        del table[key]
    try:
        yield
    finally:
        for table, before in saved:
            table.clear()
            table.update(before)


def model_forward_hook(module: torch.nn.Module, listener: Any):
    """A per-model forward pre-hook (with keyword arguments): the batch size and evaluation."""
    return module.register_forward_pre_hook(ModuleHook(listener.model_forward), with_kwargs=True)
