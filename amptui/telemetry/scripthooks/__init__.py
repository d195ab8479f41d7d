"""Recording an unmodified training script: `amptui run --script` starts it through
`amptui.trainer.scriptrun`, which calls `install()` before the script's first line runs.

Rooms: patches.py (every hook into torch, reversible), session.py (`ScriptSession`, a small
dispatcher: each hook's news to the watcher it concerns, and the run's records through the one
Recorder), its watchers, each an object with its own state: stephooks.py (`StepWatch`: the
optimizer, backward() and clip calls; stepclock.py where a training step ends with several
optimizers, and whose loss is the step's), scalerhooks.py (`ScalerWatch`: the GradScaler's
calls), loopshape.py (`LoopShape`: forwards, evaluation and loaders), precision.py
(`AutocastSeen`: the precision a loop really uses; the Monitor asks it too); guard.py (a hook
never breaks the script), models.py (`script_models`: the modules owning the optimizers'
parameters; varnames.py: the script's own variable names for them), mistakes.py (the AMP
mistakes said live).
"""

from __future__ import annotations

import os
from pathlib import Path

from amptui.telemetry.scripthooks.session import ScriptSession

_ACTIVE: list[ScriptSession] = []


def install(run_dir: Path) -> ScriptSession:
    """Hooks in, for this process's rank (torchrun's RANK / WORLD_SIZE)."""
    session = ScriptSession(Path(run_dir), int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)))
    _ACTIVE.append(session)
    return session


def _forked() -> None:
    """A child the script forked records nothing: its parent writes the run's records and its end."""
    for session in _ACTIVE:
        session.forked_child()
    _ACTIVE.clear()


os.register_at_fork(after_in_child=_forked)


def active() -> ScriptSession | None:
    """The session recording this process, if the hooks are in and no Monitor took over."""
    _ACTIVE[:] = [s for s in _ACTIVE if not (s.handed_over or s.ended)]
    return _ACTIVE[-1] if _ACTIVE else None


def script_models():
    """The running script's model(s), known after its first optimizer step ([] before, or
    without hooks): for samplers that attach to a script's model."""
    session = active()
    return list(session.models) if session is not None else []
