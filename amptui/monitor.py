"""`amptui.Monitor`: your own training loop writes the same event stream as amptui's trainer.

    import amptui
    with amptui.Monitor("my-run", scaler=scaler, optimizer=optimizer, model=model) as mon:
        for epoch in range(epochs):
            for x, y in loader:
                ...                                   # autocast, scaler.scale(loss).backward(), ...
                scaler.step(optimizer); scaler.update()
                mon.step(loss, batch_size=len(x))     # once per optimizer step
            mon.epoch(val_acc=evaluate())

Measuring does not change what is measured: `step()` adds the loss to a sum on the device and
keeps a reference to the GradScaler's scale tensor; both are read back with one device-to-host
copy every `log_every` steps. A step whose scale went down was skipped (GradScaler backs off
if and only if it found inf/NaN gradients), so skipped steps need no extra sync either. It writes
through the same telemetry Recorder as amptui's own trainer: same records, same fields.

Honest step times: a step record's clock holds training steps only. Keep your evaluation (and
checkpoint writing) out of it, and get them timed in the epoch record, with

    with mon.paused():               # eval_time_s;  mon.paused("checkpoint"): checkpoint_time_s
        val_acc = evaluate()
    mon.epoch(val_acc=val_acc)

Time spent waiting for data (`data_wait_ms` in step records: the input pipeline's share of a
step) is measured when you iterate your loader through the Monitor: `for x, y in
mon.batches(loader):` (host time blocked in the loader's next(); no device sync).

Overflowing parameters: with `model=` and a GradScaler, a backoff names the parameters whose
gradients held inf/NaN when the gradients still exist at `mon.step()` (call it before
`optimizer.zero_grad()`). They are counted on the device only in the first window and after a
window that had a backoff, so a healthy run pays nothing for it.

The run folder (opened by amptui/monitor_folder.py): `$AMPTUI_RUN_DIR` when the script was
started by `amptui run --script`, else a new folder under `$AMPTUI_RUNS_DIR` (default ./runs) with
config.toml and run.json, so `amptui runs`, `watch`, `compare` and the dashboard see it. Under
torchrun rank 0 writes events.jsonl and rank N events.rank<N>.jsonl (create the Monitor after
init_process_group when amptui did not launch the script, so the ranks agree on the folder).
A model sharded with FSDP2 `fully_shard` is named by its policy, with dist.mode "fsdp".
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import weakref
from types import FrameType
from typing import Any, Callable, Iterable, Iterator, Literal

import torch

from amptui.core.config.precision import Precision
from amptui.core.config.scriptview import script_sections
from amptui.core.run import runs
from amptui.core.run.runfiles import RunFolder
from amptui.core.safefile import atomic_write_text
from amptui.core.stream.events import EventWriter, events_file
from amptui.core.stream.records import End, WarningRecord
from amptui.jobs.scriptexit import python_exit_code
from amptui.monitor_folder import Opening
from amptui.telemetry import Recorder, autopilot, ddp, hygiene, scripthooks
from amptui.telemetry.mirrors import mirror_sinks
from amptui.telemetry.scripthooks.patches import Patches
from amptui.telemetry.scripthooks.precision import AutocastSeen, loop_overrides

_MONITORS: weakref.WeakSet[Monitor] = weakref.WeakSet()  # this process's, for the fork hook below


def _forked_children() -> None:
    """In a child this process forked: only the parent records the run (steps, epochs, its end)."""
    for monitor in list(_MONITORS):
        monitor._forked = True
        monitor.recorder.writer, monitor.recorder.sinks = None, []


os.register_at_fork(after_in_child=_forked_children)


class Monitor:
    """Write amptui's event stream (start, step, scaler, epoch, mem, warning, end) from your loop.

    name: shown as the run's preset name. scaler: your torch.amp.GradScaler (scale, growth and
    backoff, skipped steps). optimizer: for the learning rate. model: for the device (and the
    parameter count in the start record). config: a preset-shaped dict ({"amp": {"dtype":
    "float16"}, ...}), dotted keys ({"amp.dtype": "float16"}) or a Config, saying how you train,
    so `amptui runs`/`compare` name the precision right. run_dir: where to write (default: see
    the module doc). log_every: optimizer steps per step record (default config log.every, 10).
    total_steps / epochs: for progress bars, when known.
    """

    def __init__(self, name: str, scaler=None, optimizer=None, model=None, config: Any = None,
                 run_dir: str | os.PathLike | None = None, *, log_every: int | None = None,
                 total_steps: int | None = None, epochs: int | None = None, device: Any = None):
        self.name = str(name)
        self.scaler = scaler
        self.optimizer = optimizer
        self.model = model
        self.rank = int(os.environ.get("RANK", 0))
        self.world_size = int(os.environ.get("WORLD_SIZE", 1))
        self.device = self._guess_device(device, model, scaler)
        self.closed = False
        self.stop_requested = False
        self._old_sigterm: Callable[[int, FrameType | None], Any] | int | None = None

        opening = Opening(self.name, self.rank, self.world_size, self.device, self._scaler_enabled, epochs, log_every)
        self.run_dir, self.config, self._user_keys, self._writes = opening.open(run_dir, config)
        self.log_every = int(log_every or self.config.log.every or 10)
        writer = EventWriter(events_file(self.run_dir, self.rank), self.rank) if self._writes else None
        self.recorder = Recorder(writer, self.rank, self.world_size, scaler=scaler, optimizer=optimizer, model=model)
        self.recorder.use_device(self.device)
        if self.recorder.scaler_enabled:
            self.recorder.last_scale = float(scaler.get_scale())  # before the first step
        self._start_fields = dict(run_id=self.run_dir.name, preset=self.name, total_steps=total_steps, epochs=epochs,
                                  steps_per_epoch=None, resumed_from=None, source="monitor",
                                  parameters=sum(p.numel() for p in model.parameters()) if model is not None else None)
        # The start record waits for the first step: its precision is what the loop was seen to do
        # (the autocast contexts it entered, its GradScaler), for every key config= did not state.
        self._seen = AutocastSeen()
        session = scripthooks.active()
        if session is not None:  # under `amptui run --script`: this Monitor records the run, once
            self._seen.entered.update(session.entered)
            session.hand_over()
        self._watch: Patches | None = Patches(self._seen).install(autocast_only=True)
        self._started = False
        self._install_sigterm()
        atexit.register(self._at_exit)
        self._forked = False  # set in a child this process forks: it writes nothing (_forked_children)
        _MONITORS.add(self)

    def _at_exit(self) -> None:
        """A script that never called close(): its run still gets an end record -- failed with the
        error when Python is exiting on an uncaught exception, completed otherwise."""
        if not self.closed:
            error = getattr(sys, "last_value", None) or getattr(sys, "last_exc", None)
            self.close("failed", error) if error is not None else self.close("completed")

    # --- setup ----------------------------------------------------------------------------------

    @property
    def _scaler_enabled(self) -> bool:
        return self.scaler is not None and bool(getattr(self.scaler, "is_enabled", lambda: True)())

    @property
    def steps(self) -> int:
        return self.recorder.counters.step

    @property
    def skipped_total(self) -> int:
        return self.recorder.counters.skipped_total

    @property
    def last_loss(self) -> float | None:
        """The last step record's loss (read from the device at that record)."""
        return self.recorder.last_loss

    @staticmethod
    def _guess_device(device, model, scaler) -> torch.device:
        if device is not None:
            return torch.device(device)
        if model is not None:
            for p in model.parameters():
                return p.device
        if scaler is not None and getattr(scaler, "_device", None):
            return torch.device(scaler._device)
        return torch.device("cpu")

    def _ensure_started(self) -> None:
        """The start record (and config.toml) with the precision the loop was seen to use."""
        if self._started:
            return
        self._started = True
        if self._watch is not None:
            self._watch.remove()
            self._watch = None
        detected = loop_overrides(self._seen, self.scaler if self._scaler_enabled else None,
                                  [self.model] if self.model is not None else [])  # an FSDP2 model: its policy
        told = {k: v for k, v in detected.items() if k not in self._user_keys}
        self.config = self.config.with_overrides(told, source="Monitor")
        if self._writes and self.rank == 0:
            path = RunFolder(self.run_dir).config
            text = runs.config_text(self.config, f"# amptui run {self.run_dir.name}: written by amptui.Monitor",
                                    users_loop=True)
            try:
                atomic_write_text(path, text)
            except OSError:
                pass
        precision = Precision.from_config(self.config, self.device.type)
        self.recorder.watch_scale(self.scaler.get_growth_interval() if self.recorder.scaler_enabled  # NaN loss said without one too
                                  else self.config.amp.growth_interval, precision)
        self.recorder.sinks += autopilot.advisors(self.config.amp, precision, self.device,  # [amp.autopilot]: advice only
                                                  lambda code, message: self.recorder.warn(message, code=code), self.rank)
        if self.model is not None and self.config.numerics.every:  # config={"numerics": {"every": N}}: range headroom
            self.recorder.sample_numerics(self.model, self.config.numerics.every, self.config.numerics.depth,
                                          precision.reduced)
        self.recorder.check_hygiene(hygiene.for_loop(
            self.model, lambda: [self.optimizer] if self.optimizer is not None else [], precision,
            self.config.numerics.hygiene_every, source="preset" if {"amp.dtype", "amp.autocast"} & self._user_keys
            else "autocast", entered=bool(self.config.amp.autocast if "amp.autocast" in self._user_keys
                                          else self._seen.entered),
            stated="amp.mode" in self._user_keys))
        if self._writes:
            # log.tensorboard (config= or the run's config.toml): the trainer's TensorBoard sink
            self.recorder.sinks += mirror_sinks(self.config, self.run_dir, self.rank)
        shown = {"config_shown": script_sections(self.config)} if self.config.run.script else {}
        self.recorder.start(config=self.config, precision=precision, **self._start_fields, **shown)
        if self.config.numerics.trace_nonfinite:  # asked for, and would otherwise be dropped unsaid
            self.recorder.warn("numerics.trace_nonfinite: the Monitor does not replay a skipped step (re-running a "
                               "batch needs amptui's trainer); numerics.every = N names the first non-finite module "
                               "on the sampled steps")

    def _install_sigterm(self) -> None:
        """SIGTERM to a single process ends the run as stopped at its next record (only when the
        script has no SIGTERM handler of its own). Not under torchrun: its agent uses SIGTERM to
        take the other ranks down when one fails, and `amptui stop` writes the stop file anyway."""
        if self.world_size > 1 or threading.current_thread() is not threading.main_thread():
            return
        try:
            if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
                self._old_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)
        except (ValueError, OSError):
            pass

    def _on_sigterm(self, signum, _frame) -> None:
        self.stop_requested = True

    # --- recording ----------------------------------------------------------------------------------

    def step(self, loss, batch_size: int | None = None) -> None:
        """Call once per optimizer step, after scaler.update() (or optimizer.step()). No host sync:
        the loss stays on the device until the next record."""
        if self.closed:
            raise RuntimeError("Monitor.step() after close()")
        self._ensure_started()
        recorder = self.recorder
        if not isinstance(loss, torch.Tensor):  # a Python number: on the device the meter already uses
            loss = torch.tensor(float(loss), device=recorder.device)
        if loss.device != recorder.device and not recorder.active_meter.steps:
            recorder.use_device(loss.device)  # the model's device was a guess; the loss's is the truth
        if recorder.hygiene is not None:
            recorder.hygiene.loss(loss)  # its dtype (a float16 loss)
        recorder.active_meter.add_loss(loss.detach().float().mean() if loss.dim() else loss)
        recorder.optimizer_step(samples=batch_size)
        if self.steps % self.log_every == 0:
            self._write_step()
            if self._stop_now():
                # `amptui stop` (or SIGTERM): end the run as stopped and leave the script, at a
                # record boundary, all ranks at the same step (as amptui's trainer does).
                self.close("stopped")
                raise SystemExit(0)

    def batches(self, loader: Iterable) -> Iterator:
        """`for x, y in mon.batches(loader):` -- your loader's batches, with the time your loop waits
        for each one measured (host time; step records' data_wait_ms)."""
        return self.recorder.timed(loader)

    def paused(self, what: str = "eval"):
        """`with mon.paused():` keeps a block (your evaluation; `mon.paused("checkpoint")` for saving)
        out of the step records' clock; the epoch record reports it as eval_time_s /
        checkpoint_time_s."""
        return self.recorder.paused(what)

    def _stop_now(self) -> bool:
        """Checked once per record: the run folder's stop file (what `amptui stop` writes) or
        SIGTERM. Under torch.distributed the ranks agree with one small all-reduce."""
        flag = self.stop_requested or (self._writes and RunFolder(self.run_dir).stop.exists())
        return ddp.any_rank(bool(flag), self.recorder.active_meter.device, self.world_size)

    def _write_step(self, reduce: bool = True) -> None:
        self.recorder.reduce = ddp.all_sum if reduce and ddp.initialized(self.world_size) else None
        self.recorder.write_step()

    def epoch(self, **metrics: Any) -> None:
        """End of an epoch: train_loss (default: the mean of this epoch's steps), val_loss, val_acc,
        or any other number you pass. `epoch=N` sets the epoch number (default: counts up)."""
        if self.closed:
            raise RuntimeError("Monitor.epoch() after close()")
        self._ensure_started()
        self._write_step()  # step records never straddle two epochs
        counters = self.recorder.counters
        number = int(metrics.pop("epoch", counters.epoch + 1))
        self.recorder.write_epoch(number, **{k: _number(v) for k, v in metrics.items()})
        counters.epoch = number

    def warning(self, message: str) -> None:
        self._ensure_started()
        self.recorder.write(WarningRecord(message=str(message)))

    def close(self, status: str = "completed", error: BaseException | None = None) -> None:
        """Write the last step record and the `end` record. Safe to call twice."""
        if self.closed:
            return
        if self._forked:  # a forked child's exit never decides the run's end
            self.closed = True
            return
        if status not in End.STATUSES:
            raise ValueError(f"status must be {', '.join(End.STATUSES[:-1])} or {End.STATUSES[-1]}, not {status!r}")
        self.closed = True
        self._ensure_started()
        try:
            # Collectives only when every rank is expected to get here together.
            self._write_step(reduce=status == "completed")
            self.recorder.end(status, error)
        finally:
            atexit.unregister(self._at_exit)
            self.recorder.close()
            if self._old_sigterm is not None:
                try:
                    signal.signal(signal.SIGTERM, self._old_sigterm)
                except (ValueError, OSError):
                    pass

    def __enter__(self) -> "Monitor":
        return self

    def __exit__(self, exc_type, exc, tb) -> Literal[False]:
        if exc_type is None:
            self.close("completed")
        elif issubclass(exc_type, KeyboardInterrupt):
            self.close("stopped")
        elif issubclass(exc_type, SystemExit) and python_exit_code(exc.code) == 0:  # SystemExit(256) too
            self.close("completed")
        else:
            self.close("failed", exc)
        return False  # re-raise

    def __repr__(self) -> str:
        return f"Monitor({self.name!r}, run_dir={str(self.run_dir)!r}, steps={self.steps})"


def _number(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.item() if value.numel() == 1 else value.tolist()
    return value
