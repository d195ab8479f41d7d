"""The precision autopilot in amptui's trainer: `[amp.autopilot]`'s rules (core/autopilot.py) read
each step record; when one fires, `act` switches the run's precision at a checkpoint, exactly as a
resume from that checkpoint with the new precision set by hand would continue:

    the checkpoint is written (and kept as checkpoints/switch-stepN.pt), the training state is built
    again for the new precision (state.build_state) and the checkpoint restored into it
    (resume.restore): the same model, optimizer, lr schedule, RNG and data position; the GradScaler's
    state is dropped when leaving float16 (a disabled scaler loads nothing).

Rule widen_overflow on a run without a GradScaler: a non-finite step N was not skipped, so its weights may
hold NaN and no checkpoint of it can be written. The run rewinds instead: the last checkpoint (the run's
start when there is none) is restored as a resume would, the steps up to N-1 are trained again, and
before step N the triage replays it on the weights it had; a module it finds overflowing is widened at a
checkpoint of step N-1 like any switch (at most `retry_limit` rewinds a run).

Under torchrun rank 0's rules decide: `sync` (after each step record, on every rank) broadcasts its decision,
so every rank switches at the same step; rank 0 writes the checkpoint and every rank restores it.

`advise` writes what `act` would do as a warning and changes nothing. The keys a switch set are kept in
every later checkpoint (`autopilot`), so `amptui resume` continues in the new precision.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from amptui.core import autopilot as rules
from amptui.core.config import autopilot as settings_of
from amptui.core.config.precision import Precision
from amptui.core.config.values import Config
from amptui.core.run import checkpoints as info
from amptui.core.run.runfiles import CHECKPOINT_FILE, RunFolder
from amptui.core.stream.records import PrecisionSwitch, Record, Step, WarningRecord
from amptui.telemetry.autopilot import CODE
from amptui.telemetry.autopilot import Autopilot as Rules
from amptui.telemetry.notify import notify

if TYPE_CHECKING:
    from amptui.trainer.host import Trainer



def switched_keys(run_dir: Path, field: str = "autopilot") -> dict[str, Any]:
    """The keys earlier switches set, as the last checkpoint keeps them ({} when none): a resumed run
    continues in the precision its autopilot chose. From last.json (no torch), else last.pt.
    `field="autopilot_state"`: what the autopilot counts a run (the rules fired, the rewinds: `kept`)."""
    folder = RunFolder(run_dir)
    described = info.read_info(folder.checkpoints)
    if described is not None and isinstance(described.get(field), dict):
        return dict(described[field])
    if described is not None or not folder.checkpoints.joinpath(CHECKPOINT_FILE).is_file():
        return {}
    from amptui.trainer import checkpoint

    saved = checkpoint.load(folder.checkpoints)
    keys = saved.get(field) if isinstance(saved, dict) else None
    return dict(keys) if isinstance(keys, dict) else {}


def resumed_config(run_dir: Path, base: Config) -> tuple[Config, dict[str, Any]]:
    """(the config a resumed run trains with, the keys earlier switches set): config.toml's with them."""
    keys = switched_keys(run_dir)
    return (base.with_overrides(keys, source="autopilot") if keys else base), keys


class Autopilot:
    """One run's autopilot, built with its training state; `None` from `of` when off."""

    def __init__(self, trainer: Trainer):
        self.trainer = trainer
        self.settings = settings_of.of(trainer.cfg.amp)
        self.pending: rules.Decision | None = None   # the switch every rank makes at the next chance
        self.proposed: rules.Decision | None = None  # under torchrun: this rank's decision, until sync makes it rank 0's
        self.switching = False
        # the rules this run's switches fired (promote fires once a run) and its rewinds (retry_limit a run): kept in
        # each checkpoint, so a resumed run goes on counting
        kept = switched_keys(trainer.run_dir, "autopilot_state") if trainer.resume else {}
        self.fired: list[str] = [str(r) for r in kept.get("fired", ()) if isinstance(r, str)]
        self.rewind_for: int | None = None  # widen_overflow without a GradScaler: the non-finite step to rewind for
        self.triage_at: int | None = None   # ... and, once rewound, the step to triage before training it
        self.rewinds = int(kept.get("rewinds", 0)) if isinstance(kept.get("rewinds"), int) else 0
        self.pilot = self._pilot()

    @classmethod
    def of(cls, trainer: Trainer) -> Autopilot | None:
        on = settings_of.of(trainer.cfg.amp).on  # under torchrun: rank 0 decides for every rank (sync)
        if not on:
            return None
        pilot = cls(trainer)
        trainer.recorder.sinks.append(pilot)  # sees the numerics samples (rule float8_sqnr)
        return pilot

    def _pilot(self) -> Rules:
        t = self.trainer
        widened = len(set(t.cfg.amp.layers) - set(t.base_cfg.amp.layers))  # by earlier widen_overflow switches
        return Rules.of(t.cfg.amp, t.state.precision, t.state.device, trainer=True, widened=widened,
                        total_steps=t.state.total_steps, fired_before=tuple(self.fired)) or \
            Rules(self.settings, t.state.precision, t.state.device)

    def kept(self) -> dict[str, Any]:
        """What a checkpoint keeps of this autopilot (`autopilot_state`): the rules fired, the rewinds made."""
        return {"fired": list(self.fired), "rewinds": self.rewinds}

    # a Sink of the Recorder (telemetry/sinks.py): the records besides step records (numerics samples)
    def note(self, record: Record) -> None:
        if self.pending is None and not (isinstance(record, WarningRecord) and record.code == CODE):
            self._decided(self.pilot.note(record))
            if (said := self.pilot.said()) and self.trainer.dist.rank == 0:
                self.trainer.warn(said, code=CODE)

    def step(self, record: Step) -> None:
        self.observe(record)

    def epoch(self, record: Any, step: int) -> None:
        pass

    def close(self) -> None:
        pass

    def observe(self, record: Step | None) -> None:
        """A step record just written: a rule that fires is acted on at once (`act`, see `due`) or said."""
        if record is None or self.pending is not None:
            return
        decision, said = self.pilot.observe(record)
        if said and self.trainer.dist.rank == 0:  # under torchrun rank 0 decides, and speaks: one line, not one a rank
            self.trainer.warn(said, code=CODE)
        self._decided(decision)
        self._unskipped(record)

    def _unskipped(self, record: Step) -> None:
        """A non-finite step no GradScaler skipped: rewind for it (rule widen_overflow, `act`, see the module doc)."""
        t, bad = self.trainer, self.trainer.recorder.nonfinite_step
        if bad is None or t.state.skips is not None or self.pending is not None or self.rewind_for is not None or \
                not self.settings.acts or "widen_overflow" not in self.settings.rules or t.triage is None:
            return
        if self.rewinds >= self.settings.retry_limit:
            if self.rewinds == self.settings.retry_limit:
                self.rewinds += 1  # said once
                t.warn(f"autopilot: step {bad} is not finite and the run rewound {self.settings.retry_limit} times "
                       "already (retry_limit): not rewinding", code=CODE)
            return
        self.rewind_for = bad

    def _decided(self, decision: rules.Decision | None) -> None:
        if decision is None:
            return
        if self.settings.acts:
            self.proposed = decision
            if not self.trainer.dist.enabled:
                self.pending, self.proposed = decision, None
        elif self.trainer.dist.rank == 0:  # advise under torchrun: rank 0's advice, as act takes rank 0's decision
            self.trainer.warn(decision.advice(self.trainer.state.precision.short), code=CODE)

    def sync(self) -> None:
        """After each step record, on every rank (the loop calls it at the same records everywhere): under
        torchrun rank 0's decision, made on its own records, becomes every rank's pending switch, so all switch
        at the same step to the same precision (one broadcast a record; nothing in one process)."""
        t = self.trainer
        if not t.dist.enabled or self.switching:
            return
        decided = t.dist.from_rank0(self.proposed if t.dist.rank == 0 else None)
        self.proposed = None
        if isinstance(decided, rules.Decision) and self.pending is None:
            self.pending = decided

    def due(self) -> bool:
        return self.pending is not None or self.rewind_for is not None

    def before_step(self) -> bool:
        """Before each optimizer step: True when a switch is due first (one decided at the epoch's end record; on a
        rewound run, step N triaged on the weights it had, a module found overflowing: rule widen_overflow's)."""
        t = self.trainer
        if self.triage_at is None or t.progress.step + 1 != self.triage_at or t.triage is None:
            return self.pending is not None  # decided at an epoch's last record: switch there, not a step later
        step, self.triage_at = self.triage_at, None
        with t.recorder.paused("replay"):
            found = t.triage.find(step)
        if found is None:
            t.warn(f"autopilot: step {step} replayed finite after the rewind: nothing to widen", code=CODE)
        else:  # the warning reaches the rules (note): a precision_overflow makes the switch pending
            t.warn(f"{found['text']}: {found['advice']}", code="nonfinite_cause", cause=found)
        return self.due()

    def at_end(self) -> None:
        """The run completed with a switch or a rewind still due (decided at its last step record): no step is left
        to take it at, so it is said, not dropped."""
        t = self.trainer
        if t.dist.rank == 0 and self.pending is not None:
            t.warn(f"{self.pending.advice(t.state.precision.short)}; not switched: that was the run's last step",
                   code=CODE)
        elif t.dist.rank == 0 and self.rewind_for is not None:
            t.warn(f"autopilot: step {self.rewind_for}'s loss is not finite and no GradScaler skipped it; not rewound: "
                   "that was the run's last step", code=CODE)
        self.pending = self.rewind_for = None

    def rewind(self) -> None:
        """Restore the last checkpoint (or the run's start) to triage step `rewind_for` on its weights (module doc)."""
        from amptui.trainer.recording import attach_state
        from amptui.trainer.resume import Progress, restore
        from amptui.trainer.state import build_state
        from amptui.trainer.triage import Triage

        t, bad = self.trainer, self.rewind_for
        assert bad is not None
        self.rewind_for, self.rewinds = None, self.rewinds + 1
        at = t.progress.step
        t.state = build_state(t.cfg, t.dist, t.state.device, t.log)  # seeded: the run's start, as a fresh one
        if RunFolder(t.run_dir).checkpoints.joinpath(CHECKPOINT_FILE).is_file():
            restore(t.run_dir, t.base_cfg, t.state, t.progress, lambda *a, **k: None)
        else:
            for key, value in vars(Progress()).items():  # in place: the Recorder counts on the same object
                setattr(t.progress, key, value)
        attach_state(t.recorder, t.cfg, t.state)
        t.recorder.last_loss = t.recorder.nonfinite_step = None  # the steps trained again are the run's record
        t.recorder.last_scale = None
        t.triage, t.checkpointed_step = Triage(t.state, t.cfg.amp.accumulate), -1
        self.triage_at = bad
        t.warn(f"autopilot: step {bad}'s loss is not finite and no GradScaler skipped it (its weights may hold NaN): "
               f"rewound from step {at} to step {t.progress.step} ({'the last checkpoint' if t.progress.step else 'the start'}"
               f"), to replay step {bad} on the weights it had (rewind {self.rewinds} of {self.settings.retry_limit})",
               code=CODE)

    def switch(self) -> None:
        """Switch to the pending decision's precision at a checkpoint of this step (see the module doc)."""
        from amptui.trainer.recording import attach_state
        from amptui.trainer.resume import restore
        from amptui.trainer.state import build_state

        if self.pending is None:
            self.rewind()
            return
        t, decision = self.trainer, self.pending
        self.pending = None
        before, before_values, kept_keys = t.state.precision, t.cfg.flat(), dict(t.switched)
        t.switched.update(decision.to)  # in the checkpoint: a resume from it, or a later one, goes on switched
        self.fired.append(decision.rule)  # ... and that this rule fired (promote: once a run, resumed or not)
        t.checkpointed_step = -1        # written even where this step's checkpoint is (it lacks the keys)
        self.switching = True           # its step record is not a decision point
        try:
            t.save_checkpoint()
        finally:
            self.switching = False
        t.dist.barrier()                # rank 0 wrote it: every rank reads the same checkpoint below
        written = info.read_info(RunFolder(t.run_dir).checkpoints)
        if written is None or written.get("step") != t.progress.step:  # e.g. a non-finite loss without a scaler
            t.switched = kept_keys
            self.fired.pop()
            t.warn(f"{decision.advice(before.short)}; not switched: no checkpoint of step {t.progress.step} to switch "
                   "at (the last one is older)", code=CODE)
            return
        kept = keep_checkpoint(t.run_dir, t.progress.step) if t.dist.rank == 0 else \
            RunFolder(t.run_dir).checkpoints / f"switch-step{t.progress.step}.pt"
        t.cfg = t.base_cfg.with_overrides(t.switched, source="autopilot")
        t.state = build_state(t.cfg, t.dist, t.state.device, t.log)
        restore(t.run_dir, t.base_cfg, t.state, t.progress, lambda *a, **k: None)  # said by the record instead
        attach_state(t.recorder, t.cfg, t.state)
        t.recorder.last_scale = None
        _replays_anew(t)
        after = t.state.precision
        said_after = _said(after, t.cfg.flat(), decision.to, decision.layers)
        if after.short == before.short:  # e.g. one layer out of a per-layer recipe: the run's name for it does not change
            said_after["short"] = f"{after.short}, {decision.to_words}"
        t.recorder.write(PrecisionSwitch(step=t.progress.step, source=_said(before, before_values, decision.to, decision.layers),
                                         to=said_after, rule=decision.rule,
                                         why=decision.why, evidence=decision.evidence, checkpoint=str(kept)))
        if t.dist.rank == 0:
            t.log(decision.done(before.short, t.progress.step))
            notify(t.recorder.sinks, decision.done(before.short, t.progress.step))  # log.notify_url: off-thread, fail-soft
        self.pilot = self._pilot()


def _replays_anew(t: Trainer) -> None:
    """After a switch the triage and the skipped-step replay replay on the new state (the old model is gone): the
    next non-finite step's cause is found in the precision it ran in (a second widen_overflow can fire)."""
    from amptui.trainer.replay import StepReplay
    from amptui.trainer.triage import Triage

    if t.triage is not None:  # one process only (loop.Trainer.setup)
        t.triage = Triage(t.state, t.cfg.amp.accumulate)
    t.replay = StepReplay(t.state, t.dist, t.recorder) if t.cfg.numerics.trace_nonfinite and t.state.skips is not None \
        else None


def _said(precision: Precision, values: Mapping[str, Any], keys: Mapping[str, Any], layers: tuple[str, ...]
          ) -> dict[str, Any]:
    """A precision_switch side: its precision in words and short, the modules the switch changes with their
    precision on this side (`layers`; {"*": short}: the whole model), and the preset keys it set."""
    return {"precision": precision.words, "short": precision.short,
            "layers": rules.layer_precisions(precision, values, layers), "keys": {k: values.get(k) for k in keys}}


def keep_checkpoint(run_dir: Path, step: int) -> Path:
    """last.pt as it is now, kept as switch-stepN.pt beside it: the checkpoint the switch resumed from (a
    hard link: free until the next checkpoint replaces last.pt; a copy where links are refused)."""
    folder = RunFolder(run_dir).checkpoints
    target = folder / f"switch-step{step}.pt"
    target.unlink(missing_ok=True)
    try:
        os.link(folder / CHECKPOINT_FILE, target, follow_symlinks=False)
    except OSError:
        shutil.copyfile(folder / CHECKPOINT_FILE, target, follow_symlinks=False)
    return target
