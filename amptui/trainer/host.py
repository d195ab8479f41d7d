"""What the trainer's parts (the autopilot) read and change of the run they belong to (loop.Trainer).
They are typed against this protocol, not against loop.py, so the loop imports its parts and no part
imports the loop back (tests/unit/test_import_graph.py counts type-checking imports too)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from amptui.core.config.values import Config
    from amptui.telemetry import Recorder
    from amptui.trainer.dist import Dist
    from amptui.trainer.replay import StepReplay
    from amptui.trainer.resume import Progress
    from amptui.trainer.state import TrainingState
    from amptui.trainer.triage import Triage


class Trainer(Protocol):
    """loop.Trainer, as an autopilot sees it: it reads the run and, at a switch, rebuilds its state."""

    run_dir: Path
    resume: bool         # a resumed session (`amptui resume`): its checkpoint's autopilot state goes on
    cfg: Config          # with what autopilot switches set
    base_cfg: Config     # config.toml's
    dist: Dist
    recorder: Recorder
    state: TrainingState
    progress: Progress
    switched: dict[str, Any]   # the keys the switches set (checkpointed)
    checkpointed_step: int
    triage: Triage | None      # one process: the first non-finite step's cause (a switch or a rewind makes a new one)
    replay: StepReplay | None  # numerics.trace_nonfinite with a GradScaler (a switch makes a new one)

    def save_checkpoint(self) -> None: ...

    def warn(self, message: str, code: str = ..., cause: dict | None = ...) -> None: ...

    def log(self, line: str) -> None: ...
