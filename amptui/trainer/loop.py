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
writing are paused out of it); checkpoints, a graceful stop on SIGTERM/SIGINT, and resume.

No host sync is added to a step: whether the GradScaler skipped a step reaches the host through a
SkipLedger (non_blocking copy + CUDA event, only queried), and the lr schedule advances for a step
only once its flag is known to be clean, in step order -- possibly a step or two late, never on a
skipped step. On CUDA the optimizer is fused, so scaler.step() does not sync either.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from ..core import config as cfgmod
from ..core import preflight
from ..core.errors import UserError
from ..core.events import EventWriter, events_file
from ..core.fmt import fmt_accuracy
from ..core.launch import STOP_FILE
from ..telemetry import Counters, Recorder, torch_amp
from ..telemetry.alarms import ScaleAlarms
from ..telemetry.device import native_bf16
from ..telemetry.scaler import SkipLedger
from . import checkpoint, host_memory
from .data import build_train_val, choose_criterion
from .models import CNNS, build_model, compile_if_asked
from .optim import Schedule, build_optimizer


class StopRequested(Exception):
    pass


@dataclass
class Progress(Counters):
    """Counters that make a resumed run continue exactly where it stopped (the Recorder's, plus)."""

    batch_in_epoch: int = 0   # micro-batches of the current epoch already consumed


class Dist:
    """torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE); a single process without it."""

    def __init__(self) -> None:
        self.rank = int(os.environ.get("RANK", 0))
        self.local_rank = int(os.environ.get("LOCAL_RANK", 0))
        self.world_size = int(os.environ.get("WORLD_SIZE", 1))
        self.enabled = self.world_size > 1
        self.under_torchrun = "TORCHELASTIC_RUN_ID" in os.environ

    def init(self, backend: str) -> None:
        if self.enabled:
            torch.distributed.init_process_group(backend=backend)

    def all_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.enabled:
            torch.distributed.all_reduce(tensor)
        return tensor

    def any(self, flag: bool, device: torch.device) -> bool:
        if not self.enabled:
            return flag
        t = torch.tensor([1.0 if flag else 0.0], device=device)
        torch.distributed.all_reduce(t)
        return bool(t.item() > 0)

    def close(self) -> None:
        if self.enabled and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


class AutocastForward(nn.Module):
    """Runs the wrapped module's forward under autocast, in whatever thread calls it."""

    def __init__(self, module: nn.Module, device_type: str, dtype: torch.dtype, enabled: bool):
        super().__init__()
        self.module, self.device_type, self.dtype, self.enabled = module, device_type, dtype, enabled

    def forward(self, *args, **kwargs):
        with torch.autocast(self.device_type, dtype=self.dtype, enabled=self.enabled):
            return self.module(*args, **kwargs)


class Trainer:
    def __init__(self, run_dir: Path, resume: bool):
        self.run_dir = run_dir
        self.resume = resume
        cfg_path = run_dir / "config.toml"
        self.cfg = cfgmod.build_config(cfgmod.read_toml(cfg_path), source=str(cfg_path))
        self.dist = Dist()
        self.stop_requested = False
        self.stop_file = run_dir / STOP_FILE
        self.progress = Progress()
        self.recorder = Recorder(EventWriter(events_file(run_dir, self.dist.rank), self.dist.rank), self.dist.rank,
                                 self.dist.world_size, counters=self.progress,
                                 reduce=self.dist.all_sum if self.dist.enabled else None)
        self.recorder.echo = self.log
        self.skips: SkipLedger | None = None
        self.checkpointed_step = -1

    # --- setup -------------------------------------------------------------------------------------

    def setup(self) -> None:
        cfg = self.cfg
        preflight.check_data(cfg.to_dict())
        preflight.check_weights(cfg.to_dict())
        if cfg.run.device == "cuda":
            if not torch.cuda.is_available():
                raise UserError("this run was configured for CUDA but no CUDA GPU is usable here")
            self.device = torch.device("cuda", self.dist.local_rank)
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")
            if cfg.run.reuse_host_memory:  # before the run allocates anything big
                self.log(host_memory.keep_freed_memory())
        self.dist.init(cfg.dist.backend)
        self.recorder.use_device(self.device)
        torch.manual_seed(cfg.run.seed)

        self.autocast, dtype_name, use_scaler = cfgmod.resolve_precision(cfg.to_dict(), self.device.type)
        self.amp_dtype = getattr(torch, dtype_name)
        self.scaler = torch.amp.GradScaler(
            self.device.type, init_scale=cfg.amp.init_scale, growth_factor=cfg.amp.growth_factor,
            backoff_factor=cfg.amp.backoff_factor, growth_interval=cfg.amp.growth_interval, enabled=use_scaler)

        model = build_model(cfg.model).to(self.device)
        if self.device.type == "cuda" and cfg.model.name in CNNS and not cfg.model.factory:
            model = model.to(memory_format=torch.channels_last)
        self.model = model
        self.ddp_model = model
        if self.dist.enabled:
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.ddp_model = nn.parallel.DistributedDataParallel(model, device_ids=ids)
        elif cfg.dist.mode == "dp":
            # DataParallel runs each replica's forward in a thread of its own; autocast state is
            # per thread, so it is entered inside the replicas' forward, not only around the call.
            self.ddp_model = nn.DataParallel(AutocastForward(model, self.device.type, self.amp_dtype, self.autocast))
        self.ddp_model = compile_if_asked(self.ddp_model, cfg.run)
        self.train_data, self.val_data = build_train_val(cfg, self.dist.rank, self.dist.world_size, self.device)
        self.criterion = choose_criterion(cfg, self.train_data)
        self.steps_per_epoch = self.train_data.batches_per_epoch // cfg.amp.accumulate
        if self.steps_per_epoch < 1:
            raise UserError(f"amp.accumulate ({cfg.amp.accumulate}) is more than the {self.train_data.batches_per_epoch}"
                            " batches of an epoch; lower it or use more data")
        total = self.steps_per_epoch * cfg.run.epochs
        self.total_steps = min(total, cfg.run.max_steps) if cfg.run.max_steps else total
        self.optimizer = build_optimizer(cfg, self.model.parameters())
        self.schedule = Schedule(cfg, self.optimizer, self.steps_per_epoch, self.total_steps)
        self.recorder.attach(scaler=self.scaler, optimizer=self.optimizer, model=self.model)
        if use_scaler:
            self.skips = SkipLedger(self.device, capacity=cfg.log.every + 1)

        if cfg.log.tensorboard and self.dist.rank == 0:
            from .tensorboard import TensorBoardScalars

            self.recorder.sinks.append(TensorBoardScalars(self.run_dir))
        self.step_flops = self.recorder.step_flops = self.count_flops()
        self.peak_tflops = None
        if self.dist.rank == 0:  # one rank measures: ranks sharing a CPU would only slow each other down
            from ..hardware import peak_tflops

            self.peak_tflops = peak_tflops(self.device, self.amp_dtype if self.autocast else torch.float32)
        if self.device.type == "cuda":  # the FLOP count and the matmul measurement are not the run's memory
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(self.device)
        self.recorder.alarms = ScaleAlarms(cfg.amp.growth_interval, dtype_name if self.autocast else "float32",
                                           bf16_available=native_bf16(self.device))

        resumed_from = None
        if self.resume:
            resumed_from = self.load_checkpoint()
        self.emit_start(resumed_from)
        for message in preflight.odd_combinations(cfg.to_dict()):
            self.warn(message)

    def emit_start(self, resumed_from: int | None) -> None:
        cfg = self.cfg
        start = self.recorder.start(
            run_id=self.run_dir.name, preset=cfg.run.name, config=cfg.to_dict(), total_steps=self.total_steps,
            steps_per_epoch=self.steps_per_epoch, epochs=cfg.run.epochs, resumed_from=resumed_from,
            step_flops=self.step_flops, peak_tflops=self.peak_tflops)
        self.log(f"start {self.run_dir.name}: {cfg.run.name}, {start['precision']['words']} on {start['device']['name']}, "
                 f"{self.total_steps} steps" + (f", resumed from step {resumed_from}" if resumed_from else ""))

    def count_flops(self) -> int | None:
        """FLOPs of one optimizer step, counted once on a real batch (achieved TFLOP/s = this x
        steps / time). The batch is drawn with the RNG state saved and put back."""
        from .flops import count_step_flops

        rng = checkpoint.rng_state()
        try:
            x, y = next(iter(self.train_data.batches(0)))
            flops = count_step_flops(self.model, self.criterion, x, y, self.device.type, self.amp_dtype,
                                     self.autocast)
        except Exception as exc:  # an exotic op FlopCounterMode cannot follow: report no tflops
            self.log(f"FLOP count unavailable: {exc}")
            return None
        finally:
            checkpoint.set_rng_state(rng)
        return flops * self.cfg.amp.accumulate

    # --- the loop ---------------------------------------------------------------------------------

    def train(self) -> str:
        cfg, p = self.cfg, self.progress
        self.recorder.meter.restart_clock()  # set-up (data, FLOP count, peak measurement) is not step time
        while p.epoch < cfg.run.epochs and p.step < self.total_steps:
            resumed_mid_epoch = p.batch_in_epoch > 0  # its epoch_time_s covers only part of it
            self.ddp_model.train()
            batches = self.recorder.timed(self.train_data.batches(p.epoch, start=p.batch_in_epoch))
            # Consume whole optimizer steps; leftover micro-batches at the end of an epoch are dropped.
            for _ in range(self.steps_per_epoch - p.batch_in_epoch // cfg.amp.accumulate):
                self.train_step(batches)
                if p.step % cfg.log.every == 0 or p.step == self.total_steps:
                    self.write_step_record()
                    stop = self.stop_requested or self.stop_file.exists()
                    # the last step finishes the run instead (final evaluation included)
                    if p.step < self.total_steps and self.dist.any(stop, self.device):
                        raise StopRequested
                if cfg.log.checkpoint_every_steps and p.step % cfg.log.checkpoint_every_steps == 0:
                    self.save_checkpoint()
                if p.step >= self.total_steps:
                    break
            self.write_step_record()  # step records never straddle two epochs
            finished_epoch = p.batch_in_epoch >= self.steps_per_epoch * cfg.amp.accumulate
            self.end_epoch(finished_epoch, partial=resumed_mid_epoch or not finished_epoch)
        return "completed"

    def train_step(self, batches) -> None:
        """One optimizer step over `amp.accumulate` micro-batches. Reads nothing from the device."""
        cfg, p, recorder = self.cfg, self.progress, self.recorder
        accumulate = cfg.amp.accumulate
        for micro in range(accumulate):
            x, y = next(batches)
            if self.device.type == "cuda" and x.dim() == 4:
                x = x.contiguous(memory_format=torch.channels_last)
            last = micro == accumulate - 1
            # DDP: all-reduce the gradients only on the last micro-batch.
            sync = contextlib.nullcontext() if last or not self.dist.enabled else self.ddp_model.no_sync()
            with sync:
                with torch.autocast(self.device.type, dtype=self.amp_dtype, enabled=self.autocast):
                    loss = self.criterion(self.ddp_model(x), y)
                self.scaler.scale(loss / accumulate).backward()
            recorder.meter.add_loss(loss)
            p.batch_in_epoch += 1
        self.maybe_inject_inf(p.step + 1)

        grad_norm = None
        if cfg.amp.clip_grad_norm > 0:
            self.scaler.unscale_(self.optimizer)  # no-op without a GradScaler
            grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(), cfg.amp.clip_grad_norm)
        self.scaler.step(self.optimizer)
        flags: list[tuple[int, bool]] = []
        if self.skips is not None:
            self.skips.record(p.step + 1, torch_amp.found_inf(self.scaler, self.optimizer))
            flags = self.skips.known()  # on a CPU (or a GPU that keeps up) this step's flag is here already
        self.scaler.update()
        # Counts the step; before zero_grad, so the overflow tracer still sees the gradients: when
        # armed, or when this very step is already known to be skipped.
        skipped_now = any(skipped for step, skipped in flags if step == p.step + 1)
        recorder.optimizer_step(grad_norm, samples=cfg.data.batch_size * accumulate, trace=skipped_now)
        self.optimizer.zero_grad(set_to_none=True)
        if self.skips is None:
            self.schedule.optimizer_stepped()
        else:
            self.apply_skips(flags)
        d = cfg.debug
        if d.fail_at_step and p.step == d.fail_at_step and self.dist.rank == d.fail_rank:
            raise RuntimeError(f"debug.fail_at_step: injected failure at step {p.step} on rank {self.dist.rank}")

    def apply_skips(self, flags: list[tuple[int, bool]]) -> None:
        """Steps whose skip flag has reached the host, in order: the schedule advances for the clean
        ones only; a skipped one arms the overflow tracer for the steps that follow."""
        for _step, skipped in flags:
            if skipped:
                self.recorder.tracer.armed = True
            else:
                self.schedule.optimizer_stepped()

    def maybe_inject_inf(self, step: int) -> None:
        """debug.inject_inf_every: poison one gradient with inf so the scaler must skip and back off."""
        every = self.cfg.debug.inject_inf_every
        if every and step % every == 0:
            params = [p for p in self.model.parameters() if p.grad is not None]
            if params:
                params[-1].grad.view(-1)[0] = float("inf")

    def write_step_record(self) -> None:
        """The window's step record (one device read). Skip flags are settled first, so the record's
        lr is the schedule's for every step so far."""
        if self.skips is not None:
            self.apply_skips(self.skips.settle())
        self.recorder.write_step()

    def end_epoch(self, finished: bool, partial: bool) -> None:
        """Evaluation, plateau schedule, the epoch checkpoint, then the epoch record (which times them)."""
        cfg, p, recorder = self.cfg, self.progress, self.recorder
        number = p.epoch + 1
        train_loss = recorder.epoch_train_loss()
        train_loss = float("nan") if train_loss is None else train_loss
        last_epoch = p.epoch + 1 >= cfg.run.epochs or p.step >= self.total_steps
        val_loss = val_acc = None
        evaluate = cfg.log.eval_every and ((p.epoch + 1) % cfg.log.eval_every == 0 or last_epoch)
        if self.val_data is not None and evaluate:
            with recorder.paused("eval"):
                val_loss, val_acc = self.evaluate()
        if finished:
            self.schedule.epoch_done(train_loss)
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

    @torch.no_grad()
    def evaluate(self) -> tuple[float | None, float | None]:
        self.ddp_model.eval()
        classify = not isinstance(self.criterion, nn.MSELoss)
        totals = torch.zeros(3, device=self.device, dtype=torch.float64)  # loss sum, correct, count
        for x, y in self.val_data.batches(0):
            if self.device.type == "cuda" and x.dim() == 4:
                x = x.contiguous(memory_format=torch.channels_last)
            with torch.autocast(self.device.type, dtype=self.amp_dtype, enabled=self.autocast):
                out = self.ddp_model(x)
                loss = self.criterion(out, y)
            totals[0] += loss.double() * y.shape[0]
            if classify:
                totals[1] += (out.argmax(1) == y).sum()
            totals[2] += y.shape[0]
        self.dist.all_sum(totals)
        loss_sum, correct, count = totals.tolist()
        if self.cfg.debug.slow_eval_s:
            time.sleep(self.cfg.debug.slow_eval_s)
        self.ddp_model.train()
        if not count:
            return None, None
        return loss_sum / count, (correct / count if classify else None)

    # --- state --------------------------------------------------------------------------------------

    def save_checkpoint(self) -> None:
        """Every rank calls it: the open window is written first (the checkpoint holds every step's
        loss, and no skip flag is left pending), then rank 0 writes, off the window's clock."""
        p = self.progress
        self.write_step_record()
        if self.dist.rank != 0 or p.step == self.checkpointed_step:
            return
        with self.recorder.paused("checkpoint"):
            self._write_checkpoint()

    def _write_checkpoint(self) -> None:
        p = self.progress
        state = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "schedule": self.schedule.state_dict(),
            "scaler": self.scaler.state_dict(),
            "progress": dict(vars(p)),
            "last_scale": self.recorder.last_scale,
            "rng": checkpoint.rng_state(),
            "config": self.cfg.to_dict(),
            "code": checkpoint.code_fingerprint(),
        }
        path = checkpoint.save(self.run_dir / "checkpoints", state)
        if self.cfg.debug.slow_checkpoint_s:
            time.sleep(self.cfg.debug.slow_checkpoint_s)
        self.checkpointed_step = p.step
        self.recorder.emit("checkpoint", step=p.step, epoch=min(p.epoch + 1, self.cfg.run.epochs), path=str(path))

    def load_checkpoint(self) -> int:
        # On the CPU first: RNG states must stay CPU tensors; load_state_dict moves the rest.
        state = checkpoint.load(self.run_dir / "checkpoints", map_location="cpu")
        changes = checkpoint.config_changes(state.get("config", {}), self.cfg.to_dict())
        if changes:
            listed = ", ".join(f"{k} {a!r} -> {b!r}" for k, a, b in changes)
            self.warn(f"config.toml changed since the checkpoint ({listed}); resuming with the current file",
                      code="resume_config_changed")
        if state.get("code") != checkpoint.code_fingerprint():
            self.warn(f"amptui's trainer code changed since the checkpoint ({state.get('code')} -> "
                      f"{checkpoint.code_fingerprint()}); results may not match an uninterrupted run",
                      code="resume_code_changed")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.schedule.load_state_dict(state["schedule"])
        self.scaler.load_state_dict(state["scaler"])
        for key, value in state["progress"].items():  # in place: the Recorder counts on the same object
            setattr(self.progress, key, value)
        checkpoint.set_rng_state(state["rng"])
        return self.progress.step

    # --- reporting ----------------------------------------------------------------------------------

    def warn(self, message: str, code: str = "config") -> None:
        self.recorder.warn(message, code=code)  # echoed to the log by the Recorder

    def log(self, line: str) -> None:
        print(line, flush=True)  # under torchrun, each line gets its "[rank N]" prefix from torchrun

    def finish(self, status: str, error: BaseException | None = None) -> None:
        self.recorder.end(status, error)


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


def run(run_dir: Path, resume: bool) -> int:
    trainer = Trainer(run_dir, resume)

    def request_stop(signum, _frame):
        trainer.stop_requested = True
        trainer.log(f"received {signal.Signals(signum).name}: stopping at the next record, with a checkpoint")

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    try:
        trainer.setup()
        status = trainer.train()
        trainer.save_checkpoint()
        trainer.finish(status)
        trainer.log(f"completed: {trainer.progress.step} steps, final loss {trainer.recorder.last_loss}")
        return 0
    except StopRequested:
        trainer.save_checkpoint()
        trainer.finish("stopped")
        trainer.log(f"stopped at step {trainer.progress.step}; resume with: amptui resume {run_dir.name}")
        return 0
    except BaseException as exc:  # the run's record must say why it ended, whatever happened
        if trainer.dist.under_torchrun:
            # The supervisor writes the run's end record from torchelastic's error files, naming
            # the rank that failed first; this rank only records its own exception.
            record_failure(exc)
            if trainer.dist.rank == 0:
                trainer.recorder.close()
            else:
                trainer.finish("failed", exc)  # into this rank's own events.rank<N>.jsonl
            print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            return 1
        trainer.finish("failed", exc)
        if isinstance(exc, UserError):
            print(f"error: {exc}", file=sys.stderr, flush=True)
        else:
            traceback.print_exc()
        return 1
    finally:
        trainer.dist.close()
