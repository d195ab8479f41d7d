"""`ScriptSession`: what the hooks (patches.py) tell it, turned into amptui's event stream through
the one telemetry Recorder, as the trainer and the Monitor write it.

A training step ends when every optimizer in use has stepped since the last one (stepclock.py: one
step per generator step in a GAN), at the `scaler.update()` after that when an enabled GradScaler
scales the loss. The loss is what `scaler.scale()` receives, or without a scaler the scalar
`backward()` runs on, of the step's last optimizer that had one, summed over its micro-batches
(gradient accumulation's loss / ACC sums to the true loss). The start record waits for the first
step, so its precision is what the loop really did. Epochs are the passes of the training
DataLoader that feed steps (none without one); no-grad work between steps that is not part of
each step is evaluation, kept out of the step clock (loopshape.py). With `numerics.every`
set, the script's (first) model gets the Recorder's range sampler from the second step on, in the
dtype its loop computes in. Nothing here reads a device tensor outside the Recorder's one read per
`log.every` steps.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import weakref
from typing import Any

import torch

from amptui.core.config import values as cfgmod
from amptui.core.config.precision import Precision
from amptui.core.config.scriptview import script_sections
from amptui.core.events import EventWriter, events_file
from amptui.core.records import ErrorInfo, WarningRecord
from amptui.core.run import runs
from amptui.core.run.runfiles import RunFolder
from amptui.core.safefile import atomic_write_text
from amptui.telemetry import Recorder, ddp
from amptui.telemetry.scaler import SkipLedger
from amptui.telemetry.scripthooks import mistakes
from amptui.telemetry.scripthooks.guard import StopRequested, guarded
from amptui.telemetry.scripthooks.loopshape import LoopShape
from amptui.telemetry.scripthooks.models import NamedParams, optimizer_params, script_models
from amptui.telemetry.scripthooks.patches import Patches, model_forward_hook
from amptui.telemetry.scripthooks.precision import AutocastSeen, loop_overrides
from amptui.telemetry.scripthooks.scalerhooks import ScalerHooks
from amptui.telemetry.scripthooks.stepclock import StepClock, StepLr
from amptui.telemetry.scripthooks.stephooks import StepHooks
from amptui.telemetry.tensorboard import mirror_sinks

STOP_CHECK_S = 0.25       # how often a single-process run looks for `amptui stop`'s file (a stat each time)
UNDERFLOW_CHECKS = 3      # records at which a float16 loop without a scaler has its gradients checked
UNDERFLOW_SHARE = 0.05


class ScriptSession(LoopShape, ScalerHooks, StepHooks, AutocastSeen):
    def __init__(self, run_dir, rank: int = 0, world_size: int = 1):
        super().__init__()
        self.run_dir, self.rank, self.world_size = run_dir, rank, world_size
        folder = RunFolder(run_dir)
        self.base = folder.load_config() if folder.config.is_file() else cfgmod.build_config({})
        self.log_every = int(self.base.log.every)
        self.stop_file = str(folder.stop)
        self.recorder = Recorder(EventWriter(events_file(run_dir, rank), rank), rank, world_size)
        self.off = self.started = self.handed_over = self.stop_sent = self.ended = False
        self.scaler: Any = None
        self.initial_scale: float | None = None
        self.optimizers: list[torch.optim.Optimizer] = []
        self._optimizer_ids: set[int] = set()
        self._next_stop_check = 0.0
        self.clock = StepClock()
        self.step_lr = StepLr()
        self.seen_modules: dict[int, torch.nn.Module] = {}
        self.first_forwards: list[tuple[int, int]] = []   # (id(module), batch size) before the first step
        self.models: list[torch.nn.Module] = []
        self._model_hooks: list[Any] = []
        self.sampling: tuple[int, int, str] | None = None  # [numerics] every, depth, the dtype computed in
        self.samples = 0
        self.pending = False                               # a scaler step waiting for its update()
        self.in_scaler_step: Any = None
        self.stepped_in_scaler = False
        self.stepped_since_update: set[int] = set()
        self.unscaled_since_update: set[int] = set()
        self.scaled_since_update = False
        self.losses_from_scaler = False
        self.skipped_before_first_step = False
        self.grad_norm: torch.Tensor | None = None
        self.skips: SkipLedger | None = None                # the GradScaler's skip flags (scalerhooks.py)
        self.found_inf: torch.Tensor | None = None
        self.loader_of: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.waits_before: dict[int, float] = {}
        self.last_loader: int | None = None
        self.train_loader: int | None = None
        self.loader_passes = 0
        self.feeding: int | None = None                    # the train loader's pass its last batch came from
        self.epoch_pass: int | None = None                 # the pass that fed the current epoch's steps
        self.steps_in_epoch = 0
        self._eval: Any = None
        self._quiet_since: float | None = None
        self._quiet_models: set[int] = set()
        self._quiet_batches = 0
        self._quiet_pass = False
        self._quiet_first_batch: float | None = None
        self._batch_after_forward: float | None = None
        self.train_pass_over = False
        self.warned: set[str] = set()
        self.early_warnings: list[tuple[str, str]] = []
        self.checked_fp16: set[int] = set()
        self.underflow_checks = 0
        self.losses_seen = 0
        self.patches = Patches(self).install()

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

    def _meter(self, device: torch.device | None = None) -> None:
        """The step window's meter and clock, started at the loop's first batch or forward."""
        meter = self.recorder.meter
        if meter is None or (device is not None and device != meter.device and not meter.steps
                             and not meter.micro_batches and not self.clock.holds_losses):
            self.recorder.use_device(device if device is not None else torch.device("cpu"))

    def config(self) -> cfgmod.Config:
        device = self.recorder.device
        told = loop_overrides(self, self.scaler, self.models)
        if self.initial_scale is not None:
            told["amp.init_scale"] = float(self.initial_scale)
        if device is not None and device.type in ("cpu", "cuda"):
            told["run.device"] = device.type
        return self.base.with_overrides(told, source="the script")

    def begin(self, seen: bool = True) -> None:
        """At the first step's end: the script's models, training loader and precision are known
        (not `seen`: the script ended before its first step, its precision unknown: no [amp])."""
        self.started = True
        self._meter()
        self.models = script_models(self.seen_modules.values(), self.optimizers)
        first = id(self.models[0]) if self.models else None
        self.samples += sum(bs for mid, bs in self.first_forwards if mid == first)
        self.seen_modules.clear()
        self.first_forwards.clear()
        self.patches.stop_watching_forwards()
        self._model_hooks = [model_forward_hook(m, self) for m in self.models]
        if self.last_loader is not None:
            self.train_loader, self.epoch_pass = self.last_loader, self.feeding
            self.recorder.add_data_wait(self.waits_before.get(self.last_loader, 0.0))
        self.waits_before.clear()
        recorder = self.recorder
        recorder.epochs_known = self.train_loader is not None  # no training DataLoader: epochs unknown
        recorder.attach(self.scaler, self.clock.last, NamedParams(self.models, self.optimizers) if self.models else None)
        cfg = self.config()
        precision = Precision.from_config(cfg, recorder.device.type if recorder.device else "cpu")
        if recorder.scaler_enabled:
            recorder.last_scale = self.initial_scale
        # the alarms with or without a scaler: a float32/bfloat16 loop's NaN loss is said too, as the trainer's
        recorder.watch_scale(self.scaler.get_growth_interval() if recorder.scaler_enabled else cfg.amp.growth_interval,
                             precision)
        if self.rank == 0:
            with contextlib.suppress(OSError):
                atomic_write_text(RunFolder(self.run_dir).config,
                                  runs.config_text(cfg, f"# amptui run {self.run_dir.name}: a script, as its hooks saw it",
                                                   precision_seen=seen))
        recorder.sinks += mirror_sinks(cfg, self.run_dir, self.rank)  # --set log.tensorboard=true, as the trainer
        recorder.start(run_id=self.run_dir.name, preset=cfg.run.name or "script", config=cfg, total_steps=None,
                       epochs=None, steps_per_epoch=None, resumed_from=None, source="script",
                       parameters=sum(p.numel() for p in optimizer_params(self.optimizers)) or None,
                       config_shown=script_sections(cfg, seen), precision_seen=seen)
        for code, message in self.early_warnings:
            recorder.write(WarningRecord(message=message, code=code))
        self.early_warnings.clear()
        if recorder.scaler_enabled and precision.autocast and precision.dtype == "bfloat16":
            self.warn("scaler_bfloat16", mistakes.SCALER_BF16)
        if cfg.numerics.every and self.models:
            self.sampling = (cfg.numerics.every, cfg.numerics.depth, precision.reduced)

    def finish_step(self) -> None:
        self.pending = False
        first = not self.started
        if first:
            self.begin()
        self._leave_eval()
        if self.feeding != self.epoch_pass:  # a new pass of the training loader fed this step
            self.end_epoch()
            self.epoch_pass = self.feeding
        recorder, losses = self.recorder, self.clock.boundary()
        if losses.total is not None:  # the sum of the step's backward losses (stepclock.py)
            recorder.active_meter.add_step_loss(losses.total)
        recorder.optimizer = self.step_lr.took(self.clock.last)  # the lr of the step's last optimizer (a GAN's G), now
        recorder.optimizer_step(grad_norm=self.grad_norm, samples=self.samples or None,
                                trace=self._skipped_now(recorder.counters.step + 1))
        self.grad_norm, self.samples = None, 0
        if first and self.sampling is not None:  # range headroom from the second step: the model is known now
            recorder.sample_numerics(self.models[0], *self.sampling)
        self.steps_in_epoch += 1
        step = recorder.counters.step
        if step % self.log_every == 0:
            self._write_step()
            self._check_underflow(step)
            if ddp.any_rank(os.path.exists(self.stop_file), recorder.active_meter.device, self.world_size):
                self._stop()
        elif self.world_size == 1 and time.monotonic() >= self._next_stop_check:
            self._next_stop_check = time.monotonic() + STOP_CHECK_S
            if os.path.exists(self.stop_file):
                self._stop()

    def _stop(self) -> None:
        """`amptui stop`: leave the script at this step (a KeyboardInterrupt it may catch to save)."""
        self.stop_sent = True
        raise StopRequested

    def _write_step(self, reduce: bool = True) -> None:
        self.recorder.reduce = ddp.all_sum if reduce and ddp.initialized(self.world_size) else None
        self.recorder.write_step()

    def _check_underflow(self, step: int) -> None:
        if self.scaler_on or self.underflow_checks >= UNDERFLOW_CHECKS or ("cuda", "float16") not in self.entered \
                and ("cpu", "float16") not in self.entered:
            return
        self.underflow_checks += 1
        share = mistakes.underflow_share(self.optimizers)
        if share is not None:
            value = float(share)  # once per record, for at most UNDERFLOW_CHECKS records
            if value > UNDERFLOW_SHARE:
                self.warn("fp16_underflow", mistakes.FP16_UNDERFLOW.format(share=value, step=step))

    def end_epoch(self) -> None:
        if self.started and self.steps_in_epoch:
            self._leave_eval()
            self._write_step()
            counters = self.recorder.counters
            self.recorder.write_epoch(counters.epoch + 1)
            counters.epoch += 1
            self.steps_in_epoch = 0

    def end(self, status: str, error: BaseException | ErrorInfo | None = None) -> None:
        """The run's last records (from the bootstrap, as the script ends)."""
        if self.handed_over or self.off:
            self.remove()
            if self.off and self.started:  # recording broke mid-run: the run still gets its end
                with contextlib.suppress(Exception):
                    self.recorder.end(status, error)
            return
        try:
            try:
                if self.pending:
                    self.finish_step()
            except (StopRequested, KeyboardInterrupt):
                pass
            if not self.started:  # no step finished: what precision the loop would train in is unknown
                self.begin(seen=False)
            if not self.recorder.counters.step and status == "completed":  # a stop or a failure says why itself
                self._no_optimizer(at_end=True)
            self._leave_eval()
            self._write_step(reduce=status == "completed")
            if self.train_loader is not None and self.steps_in_epoch:
                self.end_epoch()
            self.recorder.end(status, error)
        finally:
            self.remove()  # the hooks come out even when the last records fail

    def remove(self) -> None:
        self.ended = True
        self.patches.remove()
        for handle in self._model_hooks:
            handle.remove()
        self._model_hooks = []
        if self.recorder.numerics is not None:
            self.recorder.numerics.cancel()  # a sampled step the script never finished: no hooks stay

    def hand_over(self) -> None:
        """The script made an amptui.Monitor: it records the run; the hooks stand down."""
        self.handed_over = True
        self.remove()
        self.recorder.writer = None

    # --- what the hooks say (the step's: stephooks.py; the scaler's: scalerhooks.py; the loop's: loopshape.py)

    @guarded
    def autocast_entered(self, device_type, dtype) -> None:
        AutocastSeen.autocast_entered(self, device_type, dtype)
