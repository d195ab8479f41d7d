"""`ModuleHook`: every hook amptui puts on a user's module (the script hooks, the range sampler, the
plan probe and the modes' numerics probes). Module-level, so `torch.save(model)`, `pickle` and `copy.deepcopy` of the
module work as without amptui whatever is hooked at that moment: a copy or an unpickled module
gets an inert hook, holding none of amptui's state (its session, buffers and files stay with the
module amptui watches)."""

from __future__ import annotations

from typing import Any, Callable


class ModuleHook:
    __slots__ = ("call",)

    def __init__(self, call: Callable[..., Any] | None = None):
        self.call = call

    def __call__(self, *args: Any) -> Any:
        return None if self.call is None else self.call(*args)

    def __reduce__(self):
        return (ModuleHook, ())
