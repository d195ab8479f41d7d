"""The training loop: one process (one rank), configured by the run folder's config.toml.

Read top to bottom it is the tutorials' loop:

    with torch.autocast(device_type, dtype):      # forward and loss only
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()                  # backward outside autocast
    scaler.unscale_(optimizer)                     # before clipping
    clip_grad_norm_(...)
    scaler.step(optimizer); scaler.update()

plus what a dashboard needs, through the same telemetry Recorder a user's loop gets from
`amptui.Monitor`: metrics accumulated on the device and written to the event stream every
`log.every` steps, with a clock that holds training steps only (evaluation, checkpoints and record
writing are paused out of it); checkpoints, a graceful stop on SIGTERM/SIGINT (the process
around the loop: __main__.py), and resume.

What it trains with is built once by `state.build_state` (a frozen `TrainingState`); what it has
counted lives in one place, the Recorder's counters (`Progress`, checkpointed by `resume`).

No host sync is added to a step: whether the GradScaler skipped a step reaches the host through a
SkipLedger (non_blocking copy + CUDA event, only queried), and the lr schedule advances for a step
only once its flag is known to be clean, in step order -- possibly a step or two late, never on a
skipped step. On CUDA the optimizer is fused, so scaler.step() does not sync either.
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path
from typing import Any

import torch
from torch import nn

from amptui.core import cluster
from amptui.core.config.precision import Precision
from amptui.core.fmt import fmt_accuracy
from amptui.core.prepare import preflight
from amptui.core.run.runfiles import RunFolder
from amptui.core.run.turns import Turns
from amptui.core.stream.events import EventWriter, events_file
from amptui.core.stream.records import Checkpoint
from amptui.machine import tf32
from amptui.telemetry import Recorder, torch_amp
from amptui.trainer import fsdp
from amptui.trainer.autopilot import Autopilot, resumed_config
from amptui.trainer.dist import Dist, no_sync
from amptui.trainer.evaluate import evaluate
from amptui.trainer.recording import attach_recorder, notify_setup_failure
from amptui.trainer.replay import StepReplay
from amptui.trainer.resume import Progress, gather_sharded, restore, write_checkpoint
from amptui.trainer.state import TrainingState, build_state, choose_device
from amptui.trainer.triage import Triage


class StopRequested(Exception):
    pass


class Trainer:
    """One rank's run: what exists before anything is built (config, process group, event stream,
    counters) is made here, so a failing set-up still ends the run's record; `setup()` builds the
    frozen `TrainingState`, `train()` runs the loop over it."""

    def __init__(self, run_dir: Path, resume: bool):
        self.run_dir = run_dir
        self.resume = resume
        self.cfg = self.base_cfg = RunFolder(run_dir).load_config()  # cfg: with what an autopilot switch set
        self.dist = Dist()
        self.stop_requested = False
        self.stop_file = RunFolder(run_dir).stop
        self.progress = Progress()
        self.recorder = Recorder(EventWriter(events_file(run_dir, self.dist.rank), self.dist.rank, reserve=True), self.dist.rank,
                                 self.dist.world_size, counters=self.progress,
                                 reduce=self.dist.all_sum if self.dist.enabled else None)
        self.recorder.echo = self.log
        self.checkpointed_step = -1
        self.state: TrainingState  # built by setup(); until then the run can only fail
        self.replay: StepReplay | None = None  # numerics.trace_nonfinite with a GradScaler
        self.triage: Triage | None = None      # why the first non-finite step was not finite
        self.autopilot: Autopilot | None = None  # [amp.autopilot]; `switched`: the keys its switches set (checkpointed)
        self.switched: dict[str, Any] = {}
        # `amptui ab --interleave`: train only in this variant's turn (core/run/turns.py); one process only
        self.turns = None if self.dist.enabled else Turns.from_env()

    # --- setup -------------------------------------------------------------------------------------

    def setup(self) -> None:
        """Checks, device and process group, the TrainingState, the Recorder's attachments; the
        checkpoint when resuming; then the start record."""
        if self.resume:  # in the precision an autopilot switch chose before
            self.cfg, self.switched = resumed_config(self.run_dir, self.base_cfg)
        cfg = self.cfg
        self.wait_turn()  # building and measuring (the start record's rates) never overlap another variant's steps
        preflight.check_data(cfg)
        preflight.check_weights(cfg)
        device = choose_device(cfg.run, self.dist.local_rank, self.log)
        precision = Precision.from_config(cfg, device.type)  # once per process: the state, the start record, the notes
        tf32.apply(True if precision.mode.tf32(precision) else cfg.amp.tf32)  # before anything computes: the start record reads it back
        self.dist.init(cfg.dist.backend, always=cfg.dist.mode == "fsdp")
        self.recorder.use_device(device)
        self.state = build_state(cfg, self.dist, device, self.log, precision)
        attach_recorder(self.recorder, cfg, self.state, self.run_dir, self.dist.rank)
        if cfg.numerics.trace_nonfinite and self.state.skips is not None:
            self.replay = StepReplay(self.state, self.dist, self.recorder)
        if not self.dist.enabled:  # the cause of a first non-finite step (one process: see trainer/triage.py)
            self.triage = Triage(self.state, cfg.amp.accumulate)
        resumed_from = None
        if self.resume:
            resumed_from = restore(self.run_dir, self.base_cfg, self.state, self.progress, self.warn)
        self.autopilot = Autopilot.of(self)
        self.emit_start(resumed_from)
        for message in preflight.odd_combinations(cfg, _cpu_slow_dtypes(cfg), self.state.precision):
            self.warn(message)
        for runtime, done in self.state.conversions:  # what each mode's conversion did, and how
            if done is not None:
                self.warn(done.note(device), code=runtime.record_key or "precision")
        if order := cluster.node_order_warning(self.dist.rank):
            self.warn(order)

    def emit_start(self, resumed_from: int | None) -> None:
        cfg, s = self.cfg, self.state
        kept = (s.model, cfg.optim.name, cfg.optim.momentum)  # what a rank keeps: compare's state per rank
        start = self.recorder.start(
            run_id=self.run_dir.name, preset=cfg.run.name, config=cfg, total_steps=s.total_steps,
            steps_per_epoch=s.steps_per_epoch, epochs=cfg.run.epochs, resumed_from=resumed_from,
            step_flops=s.step_flops, peak_tflops=s.peak_tflops,
            sharded=fsdp.shard_bytes(*kept) if s.sharded else None,
            replica=None if s.sharded else fsdp.replica_bytes(*kept), conversions={r.record_key: done.record() for r, done in s.conversions if done is not None and r.record_key},
            precision=s.precision, layer_modules=s.layers, interleaved=True if self.turns is not None else None)
        self.log(f"start {self.run_dir.name}: {cfg.run.name}, {start['precision']['words']} on {start['device']['name']}, "
                 f"{s.total_steps} steps" + (f", resumed from step {resumed_from}" if resumed_from else ""))
        if start.get("sharded"):
            held = start["sharded"]
            self.log(f"FSDP: this rank holds {held['params_bytes'] / 2**20:.1f} MiB of parameter shards + "
                     f"{held['optimizer_bytes'] / 2**20:.1f} MiB of optimizer state (the whole model: "
                     f"{held['model_params_bytes'] / 2**20:.1f} MiB of parameters)")

    # --- the loop ---------------------------------------------------------------------------------

    def train(self) -> str:
        cfg, s, p = self.cfg, self.state, self.progress
        self.recorder.active_meter.restart_clock()  # set-up (data, FLOP count, peak measurement) is not step time
        while p.epoch < cfg.run.epochs and p.step < s.total_steps:
            cfg, s = self.cfg, self.state  # new after an autopilot switch
            resumed_mid_epoch = p.batch_in_epoch > 0  # its epoch_time_s covers only part of it
            s.forward.train()
            batches = self.recorder.timed(s.train_data.batches(p.epoch, start=p.batch_in_epoch))
            # Consume whole optimizer steps; leftover micro-batches at the end of an epoch are dropped.
            for _ in range(s.steps_per_epoch - p.batch_in_epoch // cfg.amp.accumulate):
                if self.autopilot is not None and self.autopilot.before_step():
                    break  # a rewound run's bad step, triaged on its weights: the switch comes first
                self.train_step(batches)
                if p.step % cfg.log.every == 0 or p.step == s.total_steps:
                    self.write_step_record()
                    if self.turns is not None and p.step < s.total_steps:
                        self.turns.pass_on()  # the next variant's window, then this one's again
                        self.wait_turn()
                    stop = self.stop_requested or self.stop_file.exists()
                    # the last step finishes the run instead (final evaluation included)
                    if p.step < s.total_steps and self.dist.any(stop, s.device):
                        raise StopRequested
                if cfg.log.checkpoint_every_steps and p.step % cfg.log.checkpoint_every_steps == 0:
                    self.save_checkpoint()
                if p.step >= s.total_steps or (self.autopilot is not None and self.autopilot.due()):
                    break
            if self.autopilot is not None and self.autopilot.due() and p.step < s.total_steps:
                self.autopilot.switch()  # at a checkpoint: then this epoch goes on as a resume from it would
                continue
            self.write_step_record()  # step records never straddle two epochs
            finished_epoch = p.batch_in_epoch >= s.steps_per_epoch * cfg.amp.accumulate
            self.end_epoch(finished_epoch, partial=resumed_mid_epoch or not finished_epoch)
        if self.autopilot is not None:
            self.autopilot.at_end()  # a switch decided at the last step: said
        return "completed"

    def wait_turn(self) -> None:
        """Wait for this variant's turn (ab --interleave), off the step clock and out of the
        machine-load window: the time the other variants train is not this run's."""
        if self.turns is None:
            return
        with self.recorder.paused("turn"):
            self.turns.wait(lambda: self.stop_requested or self.stop_file.exists())
        self.recorder.machine_load.restart()

    def train_step(self, batches) -> None:
        """One optimizer step over `amp.accumulate` micro-batches. Reads nothing from the device."""
        cfg, s, p, recorder = self.cfg, self.state, self.progress, self.recorder
        accumulate = cfg.amp.accumulate
        replay = self.replay
        if replay is not None:
            replay.begin()
        losses: list[torch.Tensor] = []  # this step's micro-batch losses, on the device
        for micro in range(accumulate):
            x, y = next(batches)
            x = s.on_device(x)
            if replay is not None:
                replay.keep(x, y)
            last = micro == accumulate - 1
            # DDP: all-reduce the gradients only on the last micro-batch.
            sync = contextlib.nullcontext() if last or not self.dist.enabled else no_sync(s.forward)
            with sync:
                with s.autocast():
                    loss = s.criterion(s.forward(x), y)
                s.scaler.scale(loss / accumulate).backward()
            losses.append(loss.detach().float())
            p.batch_in_epoch += 1
        # The step's own loss (its micro-batches' mean, counted as one): read back per step at the
        # record, so a non-finite one is named by its step; the window's mean loss is the same.
        recorder.active_meter.add_step_loss(losses[0] if accumulate == 1 else torch.stack(losses).mean())
        s.faults.after_backward(p.step + 1, s.model)

        grad_norm = None
        if cfg.amp.clip_grad_norm > 0:
            s.scaler.unscale_(s.optimizer)  # no-op without a GradScaler
            grad_norm = fsdp.plain(nn.utils.clip_grad_norm_(s.model.parameters(), cfg.amp.clip_grad_norm))
        s.scaler.step(s.optimizer)
        for runtime, done in s.conversions:  # e.g. a conversion's weight scales for the next FSDP all-gather
            runtime.after_optimizer_step(s.model, done)
        flags: list[tuple[int, bool]] = []
        if s.skips is not None:
            s.skips.record(p.step + 1, torch_amp.found_inf(s.scaler, s.optimizer))
            # on a CPU (or a GPU that keeps up) this step's flag is here already; a replay waits for it
            flags = s.skips.settle() if replay is not None else s.skips.known()
        s.scaler.update()
        # Counts the step; before zero_grad, so the overflow tracer still sees the gradients: when
        # armed, or when this very step is already known to be skipped.
        skipped_now = any(skipped for step, skipped in flags if step == p.step + 1)
        recorder.optimizer_step(grad_norm, samples=cfg.data.batch_size * accumulate, trace=skipped_now)
        s.optimizer.zero_grad(set_to_none=True)
        if replay is not None and skipped_now:
            replay.trace(p.step)
        if s.skips is None:
            s.schedule.optimizer_stepped()
        else:
            self.apply_skips(flags)
        s.faults.after_step(p.step)

    def apply_skips(self, flags: list[tuple[int, bool]]) -> None:
        """Steps whose skip flag has reached the host, in order: the schedule advances for the clean
        ones only; a skipped one arms the overflow tracer for the steps that follow."""
        for _step, skipped in flags:
            if skipped:
                self.recorder.tracer.armed = True
                if self.recorder.numerics is not None:
                    self.recorder.numerics.armed = True
            else:
                self.state.schedule.optimizer_stepped()

    def write_step_record(self) -> None:
        """The window's step record (one device read). Skip flags are settled first, so the record's
        lr is the schedule's for every step so far."""
        if self.state.skips is not None:
            self.apply_skips(self.state.skips.settle())
        self.recorder.write_step()  # an autopilot (a sink of the Recorder) reads the record
        if self.autopilot is not None:
            self.autopilot.sync()  # under torchrun: rank 0's decision, every rank's
        if self.replay is not None:
            self.replay.window_done()
        step = self.recorder.trouble_step
        if step is not None and self.triage is not None and not self.triage.done:
            with self.recorder.paused("replay"):
                found = self.triage.find(step)
            if found is not None:
                self.warn(f"{found['text']}: {found['advice']}", code="nonfinite_cause", cause=found)

    def end_epoch(self, finished: bool, partial: bool) -> None:
        """Evaluation, plateau schedule, the epoch checkpoint, then the epoch record (which times them)."""
        cfg, s, p, recorder = self.cfg, self.state, self.progress, self.recorder
        number = p.epoch + 1
        train_loss = recorder.epoch_train_loss()
        train_loss = float("nan") if train_loss is None else train_loss
        last_epoch = p.epoch + 1 >= cfg.run.epochs or p.step >= s.total_steps
        val_loss = val_acc = None
        due = cfg.log.eval_every and ((p.epoch + 1) % cfg.log.eval_every == 0 or last_epoch)
        if s.val_data is not None and due:
            with recorder.paused("eval"):
                val_loss, val_acc = evaluate(s, self.dist)
        if finished:
            s.schedule.epoch_done(train_loss)
            p.epoch += 1
            p.batch_in_epoch = 0
            p.epoch_loss_sum, p.epoch_batches = 0.0, 0
            if cfg.log.checkpoint_every and p.epoch % cfg.log.checkpoint_every == 0:
                self.save_checkpoint()
        recorder.write_epoch(number, keep_totals=not finished, train_loss=train_loss, val_loss=val_loss,
                             val_acc=val_acc, partial=partial)
        self.log(f"epoch {number}/{cfg.run.epochs}: train loss {train_loss:.4f}"
                 + (f", val loss {val_loss:.4f}, val acc {fmt_accuracy(val_acc)}" if val_loss is not None else "")
                 + (f", acc {fmt_accuracy(val_acc)}" if val_loss is None and val_acc is not None else ""))

    def save_checkpoint(self) -> None:
        """Every rank calls it: the open window is written first (the checkpoint holds every step's
        loss, and no skip flag is left pending), then rank 0 writes, off the window's clock. Under
        FSDP every rank first takes part in gathering the full state to rank 0."""
        p = self.progress
        self.write_step_record()
        if p.step == self.checkpointed_step or (self.dist.rank != 0 and not self.state.sharded):
            return
        loss = self.recorder.last_loss
        if self.state.skips is None and loss is not None and not math.isfinite(loss):
            # no GradScaler skipped the non-finite step: the weights may hold NaN; keep the last good checkpoint
            self.warn(f"no checkpoint at step {p.step}: its loss is not finite and no GradScaler skipped the step, "
                      "so the weights may hold NaN; the last checkpoint is kept", code="checkpoint_skipped")
            self.checkpointed_step = p.step
            return
        with self.recorder.paused("checkpoint"):
            gathered = gather_sharded(self.state)
            if self.dist.rank != 0:
                self.checkpointed_step = p.step
                return
            path = write_checkpoint(self.run_dir, self.base_cfg, self.state, p, self.recorder.last_scale, gathered,
                                    switched=self.switched, pilot=self.autopilot.kept() if self.autopilot else None)
            self.checkpointed_step = p.step
            self.recorder.write(Checkpoint(step=p.step, epoch=min(p.epoch + 1, self.cfg.run.epochs), path=str(path)))

    # --- reporting ----------------------------------------------------------------------------------

    def warn(self, message: str, code: str = "config", cause: dict | None = None) -> None:
        self.recorder.warn(message, code=code, cause=cause)  # echoed to the log by the Recorder

    def log(self, line: str) -> None:
        print(line, flush=True)  # under torchrun, each line gets its "[rank N]" prefix from torchrun

    def finish(self, status: str, error: BaseException | None = None) -> None:
        notify_setup_failure(self, status)  # failed in set-up, before the mirrors: the webhook hears it too
        self.recorder.end(status, error)


def _cpu_slow_dtypes(cfg) -> dict[str, str] | None:
    """{dtype: why} slow on this CPU, as doctor measures it (the cached rates, else the flags), for
    odd_combinations' advice; None off the CPU."""
    from amptui.machine.dtype_speed import slow_dtypes

    return slow_dtypes("cpu") if cfg.run.device == "cpu" else None
