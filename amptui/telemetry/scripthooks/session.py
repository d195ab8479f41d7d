"""`ScriptSession`: what the hooks (patches.py) tell it, turned into amptui's event stream through
the one telemetry Recorder, as the trainer and the Monitor write it.

A training step ends when every optimizer in use has stepped since the last one (stepclock.py: one
step per generator step in a GAN), at the `scaler.update()` after that when an enabled GradScaler
scales the loss. The loss is what `scaler.scale()` receives, or without a scaler the scalar
`backward()` runs on, of the step's last optimizer that had one, summed over its micro-batches
(gradient accumulation's loss / ACC sums to the true loss). The start record waits for the first
step, so its precision is what the loop really did. Epochs are the passes of the training
DataLoader that feed steps (none without one); no-grad work between steps that is not part of
each step is evaluation, kept out of the step clock (loopshape.py). With `numerics.every` set, the
script's (first) model gets the Recorder's range sampler from the second step on, in the dtype its loop
computes in. Nothing here reads a device tensor outside the Recorder's one read per `log.every` steps.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Any

import torch

from amptui.core.config import values as cfgmod
from amptui.core.config.precision import Precision
from amptui.core.config.scriptview import script_sections
from amptui.core.run import runs
from amptui.core.run.runfiles import RunFolder
from amptui.core.run.turns import Turns
from amptui.core.safefile import atomic_write_text
from amptui.core.scriptcode import fingerprint
from amptui.core.stream.events import EventWriter, events_file
from amptui.core.stream.records import ErrorInfo, WarningRecord
from amptui.telemetry import Recorder, autopilot, ddp, hygiene
from amptui.telemetry.mirrors import mirror_sinks
from amptui.telemetry.scripthooks import mistakes, probe
from amptui.telemetry.scripthooks.applyamp import AppliedAmp, refuse
from amptui.telemetry.scripthooks.guard import StopRequested, guarded
from amptui.telemetry.scripthooks.loopshape import LoopShape
from amptui.telemetry.scripthooks.models import NamedParams, optimizer_params, script_models
from amptui.telemetry.scripthooks.patches import Patches, model_forward_hook
from amptui.telemetry.scripthooks.precision import AutocastSeen, loop_overrides
from amptui.telemetry.scripthooks.replaycause import LastForward, replay_cause
from amptui.telemetry.scripthooks.scalerhooks import ScalerWatch
from amptui.telemetry.scripthooks.stephooks import StepWatch
from amptui.telemetry.scripthooks.underflow import FlushCheck

STOP_CHECK_S = 0.25       # how often a single-process run looks for `amptui stop`'s file (a stat each time)


class ScriptSession:
    """A small dispatcher: each hook's news goes to the watcher it concerns (the step's StepWatch,
    the scaler's ScalerWatch, the loop's LoopShape, the autocast contexts' AutocastSeen); the
    session itself keeps the run's records (start, steps, epochs, end) and the warnings."""

    def __init__(self, run_dir, rank: int = 0, world_size: int = 1):
        self.run_dir, self.rank, self.world_size = run_dir, rank, world_size
        folder = RunFolder(run_dir)
        self.base = folder.load_config() if folder.config.is_file() else cfgmod.build_config({})
        self.log_every = int(self.base.log.every)
        self.max_steps = int(self.base.run.max_steps or 0)  # `plan --script --steps N`: stopped after exactly N
        script = str(self.base.run.script or "")  # hashed before it runs: a script may edit itself
        self.code = fingerprint(script) if rank == 0 and script else None
        self.stop_file = str(folder.stop)
        self.recorder = Recorder(EventWriter(events_file(run_dir, rank), rank), rank, world_size)
        self.off = self.started = self.handed_over = self.stop_sent = self.ended = False
        self.forked = False  # this process is a fork of the script's: it records nothing (forked_child)
        self._next_stop_check = 0.0
        self.models: list[torch.nn.Module] = []
        self._model_hooks: list[Any] = []
        self.last_forward = LastForward()  # the first model's last training inputs, weakly (replaycause.py)
        self.replaying = False  # that forward running again: no hook of the loop's takes it for the loop's
        self.plan_every = 0  # numerics.plan_every (amptui plan --script)
        self.sampling: tuple[int, int, str] | None = None  # [numerics] every, depth, the dtype computed in
        self.reduced: str | None = None  # the dtype the script's forward computes in, once seen
        self.warned: set[str] = set()
        self.early_warnings: list[tuple[str, str]] = []
        # `ab --script --interleave`: the script trains only in its turn (core/run/turns.py), handed on at
        # each step record, as the trainer does; the first wait is before its first line runs
        self.turns = Turns.from_env() if world_size == 1 else None
        if self.turns is not None:
            self.turns.wait(lambda: os.path.exists(self.stop_file))
        self.seen = AutocastSeen()
        self.steps = StepWatch(self)
        self.scaling = ScalerWatch(self)
        self.loop = LoopShape(self)
        self.flushes = FlushCheck(self)  # float16 without a scaler: gradients flushed that float32 keeps
        applying = str(getattr(self.base.run, "apply_amp", "") or "")
        self.applied = AppliedAmp(applying).install() if applying else None  # run.apply_amp (applyamp.py)
        self.patches = Patches(self, self.applied).install()
        self.probe = probe.probing()  # `ab --script`'s probe: ended at the first step (probe.py)

    @property
    def entered(self) -> dict[tuple[str, str], int]:
        """The autocast contexts the loop entered (AutocastSeen): a Monitor that takes over keeps them."""
        return self.seen.entered

    # --- the run's records -----------------------------------------------------------------------------

    def warn(self, code: str, message: str) -> None:
        if code in self.warned:
            return
        self.warned.add(code)
        print(f"[amptui] warning: {message}", file=sys.stderr, flush=True)
        if self.started:
            self.recorder.write(WarningRecord(message=message, code=code))
        else:
            self.early_warnings.append((code, message))

    def meter(self, device: torch.device | None = None) -> None:
        """The step window's meter and clock, started at the loop's first batch or forward."""
        meter = self.recorder.meter
        if meter is None or (device is not None and device != meter.device and not meter.steps
                             and not meter.micro_batches and not self.steps.clock.holds_losses):
            self.recorder.use_device(device if device is not None else torch.device("cpu"))

    def config(self) -> cfgmod.Config:
        device = self.recorder.device
        told = loop_overrides(self.seen, self.scaling.scaler, self.models)
        if self.scaling.initial_scale is not None:
            told["amp.init_scale"] = float(self.scaling.initial_scale)
        if device is not None and device.type in ("cpu", "cuda"):
            told["run.device"] = device.type
        return self.base.with_overrides(told, source="the script")

    def begin(self, seen: bool = True) -> None:
        """At the first step's end: the script's models, training loader and precision are known
        (not `seen`: the script ended before its first step, its precision unknown: no [amp])."""
        self.started = True
        self.meter()
        loop, steps, scaling = self.loop, self.steps, self.scaling
        self.models = script_models(loop.seen_modules.values(), steps.optimizers)
        first = id(self.models[0]) if self.models else None
        loop.samples += sum(bs for mid, bs in loop.first_forwards if mid == first)
        loop.seen_modules.clear()
        loop.first_forwards.clear()
        self.patches.stop_watching_forwards()
        self._model_hooks = [model_forward_hook(m, self) for m in self.models]
        if self.applied is not None:
            self.applied.watch_models(self.models)
        if loop.last_loader is not None:
            loop.train_loader, loop.epoch_pass = loop.last_loader, loop.feeding
            self.recorder.add_data_wait(loop.waits_before.get(loop.last_loader, 0.0))
        loop.waits_before.clear()
        recorder = self.recorder
        recorder.epochs_known = loop.train_loader is not None  # no training DataLoader: epochs unknown
        recorder.attach(scaling.scaler, steps.clock.last,
                        NamedParams(self.models, steps.optimizers) if self.models else None)
        cfg = self.config()
        precision = Precision.from_config(cfg, recorder.device.type if recorder.device else "cpu")
        if recorder.scaler_enabled:
            recorder.last_scale = scaling.initial_scale
        # the alarms with or without a scaler: a float32/bfloat16 loop's NaN loss is said too, as the trainer's
        recorder.watch_scale(scaling.scaler.get_growth_interval() if recorder.scaler_enabled else cfg.amp.growth_interval,
                             precision)
        if self.rank == 0:
            with contextlib.suppress(OSError):
                atomic_write_text(RunFolder(self.run_dir).config,
                                  runs.config_text(cfg, f"# amptui run {self.run_dir.name}: a script, as its hooks saw it",
                                                   precision_seen=seen))
        recorder.sinks += mirror_sinks(cfg, self.run_dir, self.rank)  # --set log.tensorboard=true, as the trainer
        recorder.start(run_id=self.run_dir.name, preset=cfg.run.name or "script", config=cfg, total_steps=None,
                       epochs=None, steps_per_epoch=None, resumed_from=None, source="script",
                       parameters=sum(p.numel() for p in optimizer_params(steps.optimizers)) or None,
                       config_shown=script_sections(cfg, seen), precision_seen=seen, code=self.code, precision=precision,
                       interleaved=True if self.turns is not None else None)
        for code, message in self.early_warnings:
            recorder.write(WarningRecord(message=message, code=code))
        self.early_warnings.clear()
        for code, message in mistakes.precision_mistakes(precision, recorder.scaler_enabled,
                                                         recorder.device.type if recorder.device else None):
            self.warn(code, message)
        if cfg.numerics.every and self.models:
            self.sampling = (cfg.numerics.every, cfg.numerics.depth, precision.reduced)
        self.reduced = precision.reduced
        self.plan_every = cfg.numerics.plan_every
        recorder.sinks += autopilot.advisors(cfg.amp, precision, recorder.device, self.warn,  # advice only: its loop
                                             self.rank)

    def finish_step(self) -> None:
        steps, loop = self.steps, self.loop
        steps.pending = False
        first = not self.started
        if first:
            if self.probe:
                probe.report(self, self.probe, stepped=True)
            self.begin()
        loop.leave_eval()
        if loop.feeding != loop.epoch_pass:  # a new pass of the training loader fed this step
            self.end_epoch()
            loop.epoch_pass = loop.feeding
        recorder, losses = self.recorder, steps.clock.boundary()
        if losses.total is not None:  # the sum of the step's backward losses (stepclock.py)
            recorder.active_meter.add_step_loss(losses.total)
        recorder.optimizer = steps.step_lr.took(steps.clock.last)  # the lr of the step's last optimizer (a GAN's G), now
        recorder.optimizer_step(grad_norm=steps.grad_norm, samples=loop.samples or None,
                                trace=self.scaling.skipped_now(recorder.counters.step + 1))
        steps.grad_norm, loop.samples = None, 0
        if first and self.sampling is not None:  # range headroom from the second step: the model is known now
            recorder.sample_numerics(self.models[0], *self.sampling)
        if first and self.models:  # precision hygiene likewise (on unless numerics.hygiene_every = 0)
            recorder.check_hygiene(hygiene.for_script(self.models, steps.optimizers, self.config(), bool(self.seen.entered),
                                                      recorder.precision))
        if first and self.plan_every and self.models:  # `amptui plan --script`: likewise
            recorder.sample_plan(self.models[0], self.plan_every)
        loop.steps_in_epoch += 1
        step = recorder.counters.step
        if self.max_steps and step >= self.max_steps:
            self.write_step()
            self._stop()
        if step % self.log_every == 0:
            self.write_step()
            self.take_turn()
            if ddp.any_rank(os.path.exists(self.stop_file), recorder.active_meter.device, self.world_size):
                self._stop()
        elif self.world_size == 1 and time.monotonic() >= self._next_stop_check:
            self._next_stop_check = time.monotonic() + STOP_CHECK_S
            if os.path.exists(self.stop_file):
                self._stop()

    def take_turn(self) -> None:
        """`ab --script --interleave`: hand the turn on at a step record and wait for it again, off
        the step clock and out of the machine-load window (the others' steps are not this run's)."""
        if self.turns is None or not self.turns.on:
            return
        self.turns.pass_on()
        with self.recorder.paused("turn"):
            self.turns.wait(lambda: os.path.exists(self.stop_file))
        self.recorder.machine_load.restart()

    def _stop(self) -> None:
        """`amptui stop`: leave the script at this step (a KeyboardInterrupt it may catch to save)."""
        self.stop_sent = True
        raise StopRequested

    def write_step(self, reduce: bool = True) -> None:
        self.recorder.reduce = ddp.all_sum if reduce and ddp.initialized(self.world_size) else None
        self.recorder.write_step()
        self.flushes.say()
        if self.recorder.trouble_step is not None and self.models and self.reduced is not None:
            if not replay_cause(self, self.recorder.counters.step):  # else: sample the next steps' ranges
                self.recorder.triage_by_sampling(self.models[0], self.reduced)

    def end_epoch(self) -> None:
        if self.started and self.loop.steps_in_epoch:
            self.loop.leave_eval()
            self.write_step()
            counters = self.recorder.counters
            self.recorder.write_epoch(counters.epoch + 1)
            counters.epoch += 1
            self.loop.steps_in_epoch = 0

    def end(self, status: str, error: BaseException | ErrorInfo | None = None) -> None:
        """The run's last records (from the bootstrap, as the script ends)."""
        if self.forked:
            return
        if self.handed_over or self.off:
            self.remove()
            if self.off and self.started:  # recording broke mid-run: the run still gets its end
                with contextlib.suppress(Exception):
                    self.recorder.end(status, error)
            return
        try:
            try:
                if self.steps.pending:
                    self.finish_step()
            except (StopRequested, KeyboardInterrupt):
                pass
            self.steps.check_schedulers()
            if not self.started:  # no step finished: what precision the loop would train in is unknown
                self.begin(seen=False)
            if not self.recorder.counters.step and status == "completed":  # a stop or a failure says why itself
                self.steps.no_optimizer(at_end=True)
            self.loop.leave_eval()
            self.write_step(reduce=status == "completed")
            if self.loop.train_loader is not None and self.loop.steps_in_epoch:
                self.end_epoch()
            self.recorder.end(status, error)
        finally:
            self.remove()  # the hooks come out even when the last records fail

    def remove(self) -> None:
        self.ended = True
        if self.turns is not None:  # the other variants go on taking turns without this one
            self.turns.retire()
        self.patches.remove()
        if self.applied is not None:
            self.applied.remove()
        for handle in self._model_hooks:
            handle.remove()
        self._model_hooks = []
        if self.recorder.numerics is not None:
            self.recorder.numerics.cancel()  # a sampled step the script never finished: no hooks stay

    def forked_child(self) -> None:
        """In a child the script forked (os.fork, multiprocessing's fork), right after the fork: the
        parent records the run, so every hook here stands down (`off`: not even the hooks' lock is
        taken, which another thread of the parent may have held as it forked) and nothing is
        written, neither steps nor the end. Only flags: nothing else is safe in a forked child."""
        self.forked = self.off = True
        self.recorder.writer, self.recorder.sinks = None, []  # nothing written, nothing mirrored

    def hand_over(self) -> None:
        """The script made an amptui.Monitor: it records the run; the hooks stand down."""
        self.handed_over = True
        self.remove()
        self.recorder.writer = None

    # --- what the hooks say (patches.py), each handed to the watcher it concerns -----------------

    @guarded
    def optimizer_made(self, opt) -> None:
        self.steps.made(opt)

    @guarded
    def optimizer_post(self, opt) -> None:
        self.steps.stepped(opt)

    @guarded
    def backward(self, tensors) -> None:
        self.flushes.backward(tensors)  # before the loop's own backward, on a sampled step only
        self.steps.backward(tensors)

    @guarded
    def clip(self, parameters) -> None:
        self.steps.clip(parameters)

    @guarded
    def clipped(self, norm) -> None:
        self.steps.clipped(norm)

    @guarded
    def scheduler_made(self, scheduler) -> None:
        self.steps.scheduler_made(scheduler)

    @guarded
    def scaler_scale(self, scaler, outputs) -> None:
        if self.applied is not None and scaler is not self.applied.scaler:
            if scaler.is_enabled():
                refuse("a GradScaler of its own")
            return  # the script's disabled scaler passes its loss through: counted at backward()
        self.scaling.scale(scaler, outputs)

    @guarded
    def scaler_unscale(self, scaler, opt) -> None:
        self.scaling.unscale(scaler, opt)

    @guarded
    def scaler_step_enter(self, scaler, opt) -> None:
        self.scaling.step_enter(scaler, opt)

    @guarded
    def scaler_step_exit(self, scaler, opt, done: bool = True) -> None:
        self.scaling.step_exit(scaler, opt, done)

    @guarded
    def scaler_updated(self, scaler) -> None:
        self.scaling.updated(scaler)

    @guarded
    def any_forward(self, module, args) -> None:
        self.loop.any_forward(module, args)

    @guarded
    def model_forward(self, module, args, kwargs) -> None:
        if self.replaying:
            return
        if module is self.models[0] and torch.is_grad_enabled():
            self.last_forward.keep(args, kwargs)
        self.loop.model_forward(module, args, kwargs)

    @guarded
    def loader_pass(self, loader, iterator) -> None:
        self.loop.loader_pass(loader, iterator)

    @guarded
    def batch_waited(self, iterator, seconds: float, ran_out: bool = False) -> None:
        self.loop.batch_waited(iterator, seconds, ran_out)

    @guarded
    def autocast_entered(self, device_type, dtype) -> None:
        if self.replaying:
            return
        if self.applied is not None and not self.applied.own:
            refuse(f"torch.autocast({str(device_type)!r}, dtype={dtype})")
        self.seen.autocast_entered(device_type, dtype)
