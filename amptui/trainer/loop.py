"""The training loop: one process (one rank), configured by the run folder's config.toml.

Read top to bottom it is the tutorials' loop:

    with torch.autocast(device_type, dtype):      # forward and loss only
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()                  # backward outside autocast
    scaler.unscale_(optimizer)                     # before clipping
    clip_grad_norm_(...)
    scaler.step(optimizer); scaler.update()

plus what a dashboard needs: metrics accumulated on the device and written to the event stream
every `log.every` steps, checkpoints, a graceful stop on SIGTERM/SIGINT, and resume.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from ..core import config as cfgmod
from ..core import preflight
from ..hardware import cpu_name
from ..core.errors import UserError
from ..core.events import EventWriter, events_file
from ..core.launch import STOP_FILE
from . import checkpoint, host_memory, telemetry
from .alarms import ScaleAlarms
from .data import build_train_val, choose_criterion
from .models import CNNS, build_model
from .optim import Schedule, build_optimizer


class StopRequested(Exception):
    pass


@dataclass
class Progress:
    """Counters that make a resumed run continue exactly where it stopped."""

    step: int = 0             # optimizer steps done
    epoch: int = 0            # current epoch, 0-based
    batch_in_epoch: int = 0   # micro-batches of the current epoch already consumed
    skipped_total: int = 0
    epoch_loss_sum: float = 0.0
    epoch_batches: int = 0


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
        self.events = EventWriter(events_file(run_dir, self.dist.rank), self.dist.rank)
        self.stop_requested = False
        self.stop_file = run_dir / STOP_FILE
        self.progress = Progress()
        self.t_start = time.time()
        self.last_loss: float | None = None
        self.val_acc: float | None = None
        self.overflow_names: dict[int, list[str]] = {}
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
        self.train_data, self.val_data = build_train_val(cfg, self.dist.rank, self.dist.world_size, self.device)
        self.criterion = choose_criterion(cfg, self.train_data)
        self.steps_per_epoch = self.train_data.batches_per_epoch // cfg.amp.accumulate
        if self.steps_per_epoch < 1:
            raise UserError(f"amp.accumulate ({cfg.amp.accumulate}) is more than the {self.train_data.batches_per_epoch}"
                            " batches of an epoch; lower it or use more data")
        total = self.steps_per_epoch * cfg.run.epochs
        self.total_steps = min(total, cfg.run.max_steps) if cfg.run.max_steps else total
        self.optimizer = build_optimizer(cfg, self.model.parameters(), self.device, use_scaler)
        self.schedule = Schedule(cfg, self.optimizer, self.steps_per_epoch, self.total_steps)
        self.meter = telemetry.StepMeter(self.device)
        self.sampler = telemetry.DeviceSampler()

        self.tensorboard = None
        if cfg.log.tensorboard and self.dist.rank == 0:
            from .tensorboard import TensorBoardScalars

            self.tensorboard = TensorBoardScalars(self.run_dir)
        self.step_flops = self.count_flops()
        self.peak_tflops = None
        if self.dist.rank == 0:  # one rank measures: ranks sharing a CPU would only slow each other down
            from ..hardware import peak_tflops

            self.peak_tflops = peak_tflops(self.device, self.amp_dtype if self.autocast else torch.float32)
        if self.device.type == "cuda":  # the FLOP count and the matmul measurement are not the run's memory
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(self.device)
        # native bfloat16 only, as `amptui doctor` judges it (emulated bf16 on a T4/V100 is slow)
        native_bf16 = self.device.type == "cpu" or torch.cuda.is_bf16_supported(including_emulation=False)
        self.alarms = ScaleAlarms(cfg.amp.growth_interval, dtype_name if self.autocast else "float32",
                                  bf16_available=native_bf16)

        resumed_from = None
        if self.resume:
            resumed_from = self.load_checkpoint()
        self.last_scale = self.scaler.get_scale() if use_scaler else None
        self.emit_start(resumed_from)
        for message in preflight.odd_combinations(cfg.to_dict()):
            self.warn(message)

    def emit_start(self, resumed_from: int | None) -> None:
        cfg = self.cfg
        if self.device.type == "cuda":
            device = {"type": "cuda", "name": torch.cuda.get_device_name(self.device),
                      "count": torch.cuda.device_count(), "index": self.device.index}
        else:
            device = {"type": "cpu", "name": cpu_name(), "count": os.cpu_count() or 1, "index": None}
        self.events.emit(
            "start", run_id=self.run_dir.name, preset=cfg.run.name, config=cfg.to_dict(),
            world_size=self.dist.world_size, device=device, torch=torch.__version__, host=socket.gethostname(),
            pid=os.getpid(), total_steps=self.total_steps, steps_per_epoch=self.steps_per_epoch,
            epochs=cfg.run.epochs, precision=cfgmod.precision_words(cfg.to_dict(), self.device.type),
            resumed_from=resumed_from, scale=self.last_scale, step_flops=self.step_flops,
            peak_tflops=self.peak_tflops)
        self.log(f"start {self.run_dir.name}: {cfg.run.name}, "
                 f"{cfgmod.precision_words(cfg.to_dict(), self.device.type)} on {device['name']}, "
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
        self.meter.restart_clock()  # set-up (data, FLOP count, peak measurement) is not step time
        while p.epoch < cfg.run.epochs and p.step < self.total_steps:
            epoch_t0 = time.perf_counter()
            resumed_mid_epoch = p.batch_in_epoch > 0  # its epoch_time_s covers only part of it
            self.ddp_model.train()
            batches = self.train_data.batches(p.epoch, start=p.batch_in_epoch)
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
                    if self.meter.steps:  # the checkpoint must hold every step's loss
                        self.write_step_record()
                    self.save_checkpoint()
                if p.step >= self.total_steps:
                    break
            if self.meter.steps:  # step records never straddle two epochs
                self.write_step_record()
            finished_epoch = p.batch_in_epoch >= self.steps_per_epoch * cfg.amp.accumulate
            self.end_epoch(time.perf_counter() - epoch_t0, finished_epoch, partial=resumed_mid_epoch or not finished_epoch)
        return "completed"

    def train_step(self, batches) -> None:
        """One optimizer step over `amp.accumulate` micro-batches."""
        cfg, p = self.cfg, self.progress
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
            self.meter.add_loss(loss)
            p.batch_in_epoch += 1
        self.maybe_inject_inf(p.step + 1)

        skipped = False
        grad_norm = None
        if self.scaler.is_enabled():
            self.scaler.unscale_(self.optimizer)
            # The same found-inf flag scaler.step() reads; reading it here lets the lr schedule
            # (and the overflow report) know whether this step will be skipped.
            skipped = bool(sum(v.item() for v in self.scaler._found_inf_per_device(self.optimizer).values()))
            if skipped:
                self.overflow_names[p.step + 1] = telemetry.overflowing_parameters(self.model)
        if cfg.amp.clip_grad_norm > 0:
            grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(), cfg.amp.clip_grad_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        p.step += 1
        if skipped:
            p.skipped_total += 1
        else:
            self.schedule.optimizer_stepped()
        self.meter.optimizer_step(self.scaler._get_scale_async() if self.scaler.is_enabled() else None, grad_norm)
        d = cfg.debug
        if d.fail_at_step and p.step == d.fail_at_step and self.dist.rank == d.fail_rank:
            raise RuntimeError(f"debug.fail_at_step: injected failure at step {p.step} on rank {self.dist.rank}")

    def maybe_inject_inf(self, step: int) -> None:
        """debug.inject_inf_every: poison one gradient with inf so the scaler must skip and back off."""
        every = self.cfg.debug.inject_inf_every
        if every and step % every == 0:
            params = [p for p in self.model.parameters() if p.grad is not None]
            if params:
                params[-1].grad.view(-1)[0] = float("inf")

    def write_step_record(self) -> None:
        p, cfg = self.progress, self.cfg
        reduce = self.dist.all_sum if self.dist.enabled else None
        window = self.meter.flush(reduce)
        first_step = p.step - window.steps + 1
        events, self.last_scale = telemetry.scaler_events(first_step, self.last_scale, window.scales,
                                                          self.overflow_names)
        for event in events:
            self.events.emit("scaler", **event)
        skipped = sum(e["event"] == "backoff" for e in events)
        self.overflow_names.clear()
        samples = window.steps * cfg.data.batch_size * cfg.amp.accumulate * self.dist.world_size
        self.last_loss = window.loss
        if window.loss is not None:
            micro_batches = window.steps * cfg.amp.accumulate
            p.epoch_loss_sum += window.loss * micro_batches
            p.epoch_batches += micro_batches
        record = dict(step=p.step, epoch=p.epoch + 1, loss=window.loss, lr=self.schedule.lr, scale=self.last_scale,
                      skipped=skipped, skipped_total=p.skipped_total,
                      samples_per_s=samples / window.seconds if window.seconds > 0 else None,
                      step_time_ms=1000 * window.seconds / max(1, window.steps),
                      mem=telemetry.step_memory(self.device))
        if window.grad_norm is not None:
            record["grad_norm"] = window.grad_norm
        if self.step_flops and window.seconds > 0:
            record["tflops"] = self.step_flops * window.steps / window.seconds / 1e12
        self.events.emit("step", **record)
        if self.tensorboard:
            self.tensorboard.step(record)
        for alarm in self.alarms.observe(events, p.step, self.last_scale, window.loss):
            self.warn(alarm.message, code=alarm.code)
        if self.sampler.due():
            self.events.emit("mem", **self.sampler.sample(with_gpus=self.device.type == "cuda" and self.dist.rank == 0))

    def end_epoch(self, seconds: float, finished: bool, partial: bool) -> None:
        """Epoch record, plateau schedule, evaluation and the epoch checkpoint."""
        cfg, p = self.cfg, self.progress
        # The epoch's mean train loss: one read per epoch of the meter's running totals.
        train_loss = self.epoch_train_loss()
        last_epoch = p.epoch + 1 >= cfg.run.epochs or p.step >= self.total_steps
        val_loss = val_acc = None
        evaluate = cfg.log.eval_every and ((p.epoch + 1) % cfg.log.eval_every == 0 or last_epoch)
        if self.val_data is not None and evaluate:
            val_loss, val_acc = self.evaluate()
            self.val_acc = val_acc
        record = self.events.emit("epoch", epoch=p.epoch + 1, train_loss=train_loss, val_loss=val_loss,
                                  val_acc=val_acc, epoch_time_s=seconds, partial=partial)
        if self.tensorboard:
            self.tensorboard.epoch(record, p.step)
        self.log(f"epoch {p.epoch + 1}/{cfg.run.epochs}: train loss {train_loss:.4f}"
                 + (f", val loss {val_loss:.4f}, val acc {val_acc:.4f}" if val_loss is not None else "")
                 + (f", acc {val_acc}" if val_loss is None and val_acc is not None else ""))
        if finished:
            self.schedule.epoch_done(train_loss)
            p.epoch += 1
            p.batch_in_epoch = 0
            p.epoch_loss_sum, p.epoch_batches = 0.0, 0
            if cfg.log.checkpoint_every and p.epoch % cfg.log.checkpoint_every == 0:
                self.save_checkpoint()

    def epoch_train_loss(self) -> float:
        # Built from the step records' window means, weighted by micro-batches: no extra sync.
        p = self.progress
        return p.epoch_loss_sum / p.epoch_batches if p.epoch_batches else float("nan")

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
        self.ddp_model.train()
        if not count:
            return None, None
        return loss_sum / count, (correct / count if classify else None)

    # --- state --------------------------------------------------------------------------------------

    def save_checkpoint(self) -> None:
        p = self.progress
        if self.dist.rank != 0 or p.step == self.checkpointed_step:
            return
        state = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "schedule": self.schedule.state_dict(),
            "scaler": self.scaler.state_dict(),
            "progress": dict(vars(p)),
            "last_scale": self.last_scale,
            "rng": checkpoint.rng_state(),
            "config": self.cfg.to_dict(),
            "code": checkpoint.code_fingerprint(),
        }
        path = checkpoint.save(self.run_dir / "checkpoints", state)
        self.checkpointed_step = p.step
        self.events.emit("checkpoint", step=p.step, epoch=min(p.epoch + 1, self.cfg.run.epochs), path=str(path))

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
        self.progress = Progress(**state["progress"])
        checkpoint.set_rng_state(state["rng"])
        return self.progress.step

    # --- reporting ----------------------------------------------------------------------------------

    def warn(self, message: str, code: str = "config") -> None:
        self.events.emit("warning", message=message, code=code)
        self.log(f"warning: {message}")

    def log(self, line: str) -> None:
        print(line, flush=True)  # under torchrun, each line gets its "[rank N]" prefix from torchrun

    def finish(self, status: str, error: BaseException | None = None) -> None:
        p = self.progress
        payload = dict(status=status, total_time_s=time.time() - self.t_start, steps=p.step,
                       final_loss=self.last_loss, val_acc=self.val_acc,
                       peak_mem=telemetry.peak_memory(self.device) if hasattr(self, "device") else None)
        if error is not None:
            tail = "".join(traceback.format_exception(type(error), error, error.__traceback__)[-6:])
            payload["error"] = {"type": type(error).__name__, "message": str(error), "rank": self.dist.rank,
                                "traceback": tail[-4000:]}
        self.events.emit("end", **payload)
        self.events.close()
        if getattr(self, "tensorboard", None):
            self.tensorboard.close()


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
        trainer.log(f"completed: {trainer.progress.step} steps, final loss {trainer.last_loss}")
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
                trainer.events.close()
                if getattr(trainer, "tensorboard", None):
                    trainer.tensorboard.close()
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
