"""The trainer's side of the event stream: what the Recorder is attached to, and a failed rank's
note to torchrun's supervisor."""

from __future__ import annotations

import os
import time
import traceback
from pathlib import Path

from amptui.core.config.values import Config
from amptui.telemetry import Recorder, hygiene
from amptui.telemetry.mirrors import mirror_sinks
from amptui.trainer.state import TrainingState


def attach_recorder(recorder: Recorder, cfg: Config, state: TrainingState, run_dir: Path, rank: int) -> None:
    """What the Recorder reads (attach_state); TensorBoard and the other mirrors as further sinks (rank 0)."""
    attach_state(recorder, cfg, state)
    recorder.sinks += mirror_sinks(cfg, run_dir, rank)


def attach_state(recorder: Recorder, cfg: Config, state: TrainingState) -> None:
    """The scaler (scale, skipped steps), the optimizer (lr) and the model (overflowing parameters);
    the FLOPs of a step; the scale alarms for this precision; the samplers [numerics] asks for. Again
    after an autopilot switch (trainer/autopilot.py): a new state, the same sinks."""
    recorder.attach(scaler=state.scaler, optimizer=state.optimizer, model=state.model)
    recorder.precision = state.precision  # after a switch: the precision the run trains in now
    recorder.step_flops = state.step_flops
    recorder.watch_scale(cfg.amp.growth_interval, state.precision, cfg.amp.init_scale, cfg.amp.backoff_factor)
    recorder.sample_numerics(state.model, cfg.numerics.every, cfg.numerics.depth, state.precision.reduced,
                             state.layer_dtypes)
    recorder.sample_plan(state.model, cfg.numerics.plan_every)
    recorder.check_hygiene(hygiene.for_loop(state.model, lambda: [state.optimizer], state.precision,
                                            cfg.numerics.hygiene_every, own=state.layer_dtypes))


def notify_setup_failure(trainer, status: str) -> None:
    """A run that failed before attach_recorder (building the model, the data: no `state` yet):
    its webhook (log.notify_url) still hears of the failure from the end record."""
    cfg = trainer.cfg
    if status == "failed" and not hasattr(trainer, "state") and trainer.dist.rank == 0 and cfg.log.notify_url:
        from amptui.telemetry.notify import notifier_from

        notifier = notifier_from(cfg.log.notify_url, Path(trainer.run_dir).name)
        if notifier is not None:
            trainer.recorder.sinks.append(notifier)


def record_failure(exc: BaseException) -> None:
    """Under torchrun: write this rank's exception to torchelastic's error file (what `@record`
    writes), with an exact time so the supervisor can tell the root cause from the ranks that
    failed because of it."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return
    import json

    now = time.time()
    data = {"message": {"message": f"{type(exc).__name__}: {exc}",
                        "extraInfo": {"py_callstack": traceback.format_exc(), "timestamp": str(int(now)),
                                      "amptui_time": now}}}
    with open(path, "w") as fh:
        json.dump(data, fh)
