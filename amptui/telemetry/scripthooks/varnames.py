"""The script's own names for its models: the variable that holds each one (`generator`,
`critic`), so a GAN's overflowing parameters read `critic.0.weight` rather than a class and an
index (`Sequential1.0.weight`).

Looked up once, when the names are first needed (the first step's end, called from inside the
script's loop): in the globals of the script run as `__main__`, then in the locals of the
script's own functions on the call stack, outermost first (`def main(): netG = ...`). Identity
only (`is`): nothing of the script is called or changed. The first of those scopes that holds a
model names it; a model held there by several variables, or by none anywhere, gets None (the
caller names it as before, by its class).
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any, Mapping

import torch

MAX_FRAMES = 256  # how far up the stack to look for the script's functions (a deep recursion stops here)


def variable_names(models: list[torch.nn.Module]) -> list[str | None]:
    """Each model's variable name in the running script (see the module doc), or None."""
    try:
        scopes = _script_scopes()
        return [_name_in(scopes, model) for model in models]
    except Exception:  # noqa: BLE001 -- a name is a nicety: never a reason to stop recording
        return [None] * len(models)


def _script_scopes() -> list[Mapping[str, Any]]:
    """`__main__`'s globals, then the locals of its functions now running, outermost first."""
    main = sys.modules.get("__main__")
    module_globals = getattr(main, "__dict__", None)
    if not isinstance(module_globals, dict):
        return []
    frames: list[FrameType] = []
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and len(frames) < MAX_FRAMES:
        if frame.f_globals is module_globals and frame.f_code.co_name != "<module>":
            frames.append(frame)
        frame = frame.f_back
    return [module_globals, *(f.f_locals for f in reversed(frames))]


def _name_in(scopes: list[Mapping[str, Any]], model: torch.nn.Module) -> str | None:
    inner = getattr(model, "module", None)  # DistributedDataParallel(net): the script may name either
    for target in (model, inner) if isinstance(inner, torch.nn.Module) else (model,):
        for scope in scopes:
            names = [name for name, value in list(scope.items())
                     if value is target and not name.startswith("__")]
            if names:
                return names[0] if len(names) == 1 and names[0].isidentifier() else None
    return None
