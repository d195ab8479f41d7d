"""`Recorder`: the one writer of amptui's event stream, used by amptui's trainer and by
`amptui.Monitor` alike, so every measurement fix reaches both.

The training loop tells it about each optimizer step (`optimizer_step`, after scaler.update()),
the loss of each micro-batch (`meter.add_loss`) or of each whole step (`meter.add_step_loss`, so a
non-finite one is named by its step), where its batches come from (`timed(batches)`),
and pauses its clock around anything that is not a training step (`paused("eval")`,
`paused("checkpoint")`). Every `log.every` steps `write_step()` reads the window back with one
device-to-host copy and writes the step record, scaler events, alarms and memory samples.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import asdict
from dataclasses import fields as dataclass_fields
from typing import Any, Callable, Iterable, Iterator, Mapping

import torch

from amptui.core.config.precision import Precision
from amptui.core.config.values import Config
from amptui.core.stream.events import EventWriter
from amptui.core.stream.records import (
    EPOCH,
    End,
    Epoch,
    ErrorInfo,
    Mem,
    Numerics,
    PlanSample,
    Record,
    Scaler,
    Step,
    WarningRecord,
)
from amptui.telemetry import torch_amp
from amptui.telemetry.alarms import HeadroomAlarms, ScaleAlarms
from amptui.telemetry.device import DeviceSampler, native_bf16, peak_memory, step_memory
from amptui.telemetry.hygiene import HygieneSampler
from amptui.telemetry.machineload import MachineLoad
from amptui.telemetry.meter import StepMeter, TimedBatches
from amptui.telemetry.numerics import RangeSampler
from amptui.telemetry.outbound import close_together
from amptui.telemetry.plan_probe import PlanProbe
from amptui.telemetry.scaler import OverflowTracer, scaler_events
from amptui.telemetry.sinks import EventStream, Mirror, Sink
from amptui.telemetry.startrecord import start_record
from amptui.telemetry.tally import Counters, EpochTimes, first_bad_step, loss_source, nonfinite_at, with_replays
from amptui.telemetry.triagecause import TRIAGE_DEPTH, TRIAGE_SAMPLES, say_cause, trouble_step
from amptui.telemetry.windowfeed import WindowFeed

OWN_LOOP_SOURCES = ("script", "monitor")  # start records' `source` for a run of the user's own loop


class Recorder:
    def __init__(self, writer: EventWriter | None, rank: int = 0, world_size: int = 1, *,
                 counters: Counters | None = None, scaler=None, optimizer=None, model=None,
                 reduce: Callable[[torch.Tensor], torch.Tensor] | None = None):
        self.writer = writer
        self.rank, self.world_size = rank, world_size
        self.counters = counters if counters is not None else Counters()
        self.reduce = reduce
        self.attach(scaler, optimizer, model)
        self.echo: Callable[[str], None] | None = None  # warnings also go here (the trainer's log)
        self.meter: StepMeter | None = None
        self.sampler = DeviceSampler()
        self.alarms: ScaleAlarms | None = None
        self.precision: Precision | None = None  # the loop's, once per process: given to (or computed by) `start`
        self.numerics: RangeSampler | None = None      # per-layer range samples ([numerics] every > 0)
        self.headroom_alarms: HeadroomAlarms | None = None
        self.plan: PlanProbe | None = None             # `amptui plan`'s per-linear probes (numerics.plan_every > 0)
        self.hygiene: HygieneSampler | None = None     # silent precision mistakes (numerics.hygiene_every > 0)
        self.traced: dict[int, Numerics] = {}          # step -> what a replay found (numerics.trace_nonfinite)
        self.cause_said = False                          # a nonfinite_cause warning was written
        self.triage_left: int | None = None              # triage_by_sampling's samples still to take
        self.triage_model: torch.nn.Module | None = None  # the model it samples
        self.trouble_step: int | None = None            # the last step record's first non-finite step (trainer/triage.py)
        self.nonfinite_step: int | None = None          # the run's first step with an inf/NaN loss (the end record)
        self.machine_load = MachineLoad()               # the load each step record's window ran under
        self.sinks: list[Sink] = [EventStream(writer)] if writer is not None else []  # then e.g. TensorBoard
        self.step_flops: int | None = None
        self.last_scale: float | None = None
        self.last_loss: float | None = None
        self.val_acc: float | None = None
        self.t_start = time.time()
        self.times = EpochTimes()
        self.feed = WindowFeed()       # the window's samples and data wait
        self.epochs_known = True       # False: step records carry no epoch (a script with no training loader)

    # --- set-up -------------------------------------------------------------------------------------

    def attach(self, scaler=None, optimizer=None, model=None) -> None:
        """The GradScaler (scale, skipped steps), the optimizer (lr) and the model (which parameters
        overflowed); each optional."""
        self.scaler, self.optimizer = scaler, optimizer
        self.tracer = OverflowTracer(model if self.scaler_enabled else None)

    @property
    def scaler_enabled(self) -> bool:
        return self.scaler is not None and bool(getattr(self.scaler, "is_enabled", lambda: True)())

    @property
    def device(self) -> torch.device | None:
        return self.meter.device if self.meter is not None else None

    @property
    def active_meter(self) -> StepMeter:
        """The step window's meter; the loop and the Monitor call use_device() before measuring."""
        if self.meter is None:
            raise RuntimeError("Recorder used before use_device()")
        return self.meter

    def use_device(self, device: torch.device) -> None:
        """Where the loop's tensors live; the window's clock starts now."""
        clock = self.meter.clock if self.meter is not None else None
        self.meter = StepMeter(device)
        if clock is not None:
            self.meter.clock = clock

    def write(self, record: Record) -> dict | None:
        written = self.writer.write(record) if self.writer is not None else None
        for sink in self.sinks:  # e.g. the numerics summaries MLflow keeps, the TrainJob's progress
            sink.note(record)
        return written

    def watch_scale(self, growth_interval: int, precision: Precision, init_scale: float | None = None,
                    backoff_factor: float | None = None) -> None:
        """Turn on the loss-scale alarms (a GradScaler's run): they know the growth interval, the
        dtype the forward computes in, whether this device has native bfloat16, and how long
        calibration may back off from `init_scale` (default: the scale before the first step)."""
        if backoff_factor is None and self.scaler_enabled:
            backoff_factor = float(self.scaler.get_backoff_factor())
        self.alarms = ScaleAlarms(int(growth_interval), precision.reduced, native_bf16(self.device or torch.device("cpu")),
                                  init_scale=self.last_scale if init_scale is None else init_scale,
                                  backoff_factor=backoff_factor)

    def sample_numerics(self, model: torch.nn.Module, every: int, depth: int, dtype: str,
                        layer_dtypes: Mapping[str, str] | None = None) -> None:
        """Per-layer range headroom every `every` optimizer steps (0: nothing is hooked, nothing
        costs), for the modules `depth` levels down; `dtype`: what the forward computes in
        (`layer_dtypes`: the modules [amp.layers] computes in another)."""
        if model is None or every <= 0:
            self.numerics = None
            return
        device = self.device or torch.device("cpu")
        self.numerics = RangeSampler(model, every=every, depth=depth, dtype=dtype, device=device,
                                     layer_dtypes=layer_dtypes)
        self.headroom_alarms = HeadroomAlarms(dtype)
        self.numerics.prepare(self.counters.step + 1, self._scale_now(device))

    def triage_by_sampling(self, model: torch.nn.Module, dtype: str) -> None:
        """After the first non-finite loss or backoff streak of a loop amptui cannot replay (a script's): sample
        the layers' ranges on the next TRIAGE_SAMPLES steps (nothing was hooked before) so the first module past
        the dtype's range is named with a `nonfinite_cause` (triagecause.say_cause). Once per run."""
        if self.triage_left is not None or self.numerics is not None or self.cause_said:
            return
        self.triage_left, self.triage_model = TRIAGE_SAMPLES, model
        self.sample_numerics(model, 1, TRIAGE_DEPTH, dtype)

    def check_hygiene(self, sampler: HygieneSampler | None) -> None:
        """Precision hygiene (telemetry/hygiene.py) on its sampled steps; None: nothing hooked."""
        self.hygiene = sampler
        if sampler is not None:
            sampler.prepare(self.counters.step + 1, self._scale_now(self.device or torch.device("cpu")))

    def sample_plan(self, model: torch.nn.Module, every: int) -> None:
        """`amptui plan`'s probe of every linear every `every` optimizer steps (0: nothing hooked)."""
        self.plan = PlanProbe(model, every) if model is not None and every > 0 else None
        if self.plan is not None:
            self._plan_prepare()

    def _plan_prepare(self) -> None:
        plan = self.plan
        if plan is not None and plan.due(self.counters.step + 1):  # read the scale on sampled steps only
            scale = self._scale_now(self.device or torch.device("cpu"))
            plan.prepare(self.counters.step + 1, float(scale) if scale is not None else None)

    def _scale_now(self, device: torch.device) -> torch.Tensor | None:
        if not self.scaler_enabled:
            return None
        scale = torch_amp.scale_tensor(self.scaler)
        return scale if scale is not None else torch.tensor(float(self.scaler.get_scale()), device=device)

    def start(self, config: Config, **fields: Any) -> dict:
        """The start record (run_id, preset, total_steps, ... as `core.stream.records.Start`), for the
        resolved `config`: its precision, and the device, torch version, host, pid, world size
        and scale are filled in. `precision_seen=False`: a script that ended before its loop showed
        its precision: the record's precision is "" (not seen), never the config's defaults."""
        if self.scaler_enabled and self.last_scale is None:  # a caller may know it already
            self.last_scale = float(self.scaler.get_scale())  # once, before the first step
        if self.alarms is not None and fields.get("source") in OWN_LOOP_SOURCES:
            self.alarms.own_loop = True  # their advice names the loop's code: a script has no preset keys
        device = self.device or torch.device("cpu")
        self.precision = fields.pop("precision", None) or Precision.from_config(config, device.type)
        record = start_record(config, device, self.world_size, self.last_scale, self.precision, **fields)
        self.write(record)
        return record.fields()

    def warn(self, message: str, code: str = "config", cause: dict | None = None) -> None:
        self.write(WarningRecord(message=message, code=code, cause=cause))
        self.cause_said = self.cause_said or cause is not None
        if self.echo is not None:
            self.echo(f"warning: {message}")

    # --- the hot path: no host reads -------------------------------------------------------------------

    def timed(self, batches: Iterable) -> TimedBatches:
        """Wrap the loop's batch iterator: the time blocked in next() becomes data_wait_ms."""
        return self.feed.timed(batches)

    def add_data_wait(self, seconds: float) -> None:
        """Host seconds the loop waited for a batch, measured by the caller (the script hooks)."""
        self.feed.add_wait(seconds)

    def optimizer_step(self, grad_norm: torch.Tensor | None = None, samples: int | None = None,
                       trace: bool = False) -> None:
        """After scaler.update(): count the step, keep the scale and (when the tracer is armed, or
        `trace`: the step is known to be skipped) the per-parameter overflow counts."""
        meter = self.active_meter
        scale = None
        if self.scaler_enabled:
            scale = torch_amp.scale_tensor(self.scaler)
            if scale is None:  # update() never ran: still the initial scale
                scale = torch.tensor(float(self.scaler.get_scale()), device=meter.device)
        meter.optimizer_step(scale, grad_norm, self.tracer.count(force=trace))
        self.counters.step += 1
        if self.numerics is not None:
            self.numerics.step_done()
            self.numerics.armed = self.numerics.armed or trace  # a known backoff: sample the next step too
            self.numerics.prepare(self.counters.step + 1, scale)
        if self.hygiene is not None:
            self.hygiene.step_done()
            self.hygiene.prepare(self.counters.step + 1, scale)
        if self.plan is not None:
            with self.paused("plan"):  # a sampled step's probe is kept out of the step clock
                layers = self.plan.step_done()
            if layers:
                self.write(PlanSample(step=self.counters.step, layers=layers))
            self._plan_prepare()
        if samples is not None:
            self.feed.add_samples(samples)

    @contextlib.contextmanager
    def paused(self, what: str = "eval", since: float | None = None) -> Iterator[None]:
        """Keep `what` ("eval", "checkpoint" or anything else) out of the step window's clock; its
        time goes to the epoch record's eval_time_s / checkpoint_time_s. A forward or backward in
        it (an evaluation, the trace_nonfinite replay) stays out of the next step's range sample.
        `since`: it began then (a perf_counter time; the script hooks learn only later that no-grad
        work was evaluation)."""
        quiet = self.numerics.suspended() if self.numerics is not None else contextlib.nullcontext()
        clock = self.meter.clock.paused(since) if self.meter is not None else contextlib.nullcontext()
        with quiet, clock as took:
            yield
        if took is None:  # no meter yet: nothing to time
            return
        if what == "eval":
            self.times.eval_time_s += took[0]
        elif what == "checkpoint":
            self.times.checkpoint_time_s += took[0]

    # --- records ------------------------------------------------------------------------------------

    def _load(self) -> dict[str, float | None]:
        """The machine's load over the window just ended (telemetry/machineload.py)."""
        load, others = self.machine_load.window()
        return {"load": load, "others_cpu": others}

    def write_step(self, reduce: bool = True) -> Step | None:
        """Read the window back (one sync) and write its step record; None when it was empty."""
        meter, c = self.meter, self.counters
        if meter is None or not meter.steps:
            return None
        ranges = self.numerics.riders() if self.numerics is not None else []
        window = meter.flush(self.reduce if reduce else None,
                             riders=ranges + (self.hygiene.riders() if self.hygiene is not None else []))
        window.riders, hygiene = window.riders[:len(ranges)], window.riders[len(ranges):]
        with self.paused("record"):
            first = c.step - window.steps + 1
            events, self.last_scale = scaler_events(first, self.last_scale, window.scales,
                                                    self.tracer.named(first, window.overflow_counts))
            samples = self._numerics_records(window.riders)
            if samples and self.triage_left:
                say_cause(self, samples)
            firsts = {r.step: r.first_nonfinite for r in samples if r.first_nonfinite}
            for event in events:
                if event["event"] == "backoff" and firsts.get(event["step"]):
                    event["first_nonfinite"] = firsts[event["step"]]
            skipped = sum(e["event"] == "backoff" for e in events)
            self.tracer.window_done(had_backoff=skipped > 0)
            for event in events:
                self.write(Scaler(**event))
            c.skipped_total += skipped
            self.trouble_step = trouble_step(window, first, skipped, self.last_scale)
            if self.nonfinite_step is None and window.loss is not None and not math.isfinite(window.loss):
                self.nonfinite_step = first_bad_step(window, first) or first
            self.last_loss = window.loss
            if window.loss is not None:
                c.epoch_loss_sum += window.loss * window.micro_batches
                c.epoch_batches += window.micro_batches
            self.times.epoch_time_s += window.seconds
            record = Step(
                step=c.step, epoch=c.epoch + 1 if self.epochs_known else None, loss=window.loss, lr=self.lr(),
                scale=self.last_scale if self.scaler_enabled else None, skipped=skipped,
                skipped_total=c.skipped_total, samples_per_s=self.feed.samples_per_s(window.seconds, self.world_size),
                step_time_ms=1000 * window.seconds / window.steps, data_wait_ms=self.feed.data_wait_ms(window.steps),
                mem=step_memory(meter.device), grad_norm=window.grad_norm,
                tflops=self.step_flops * window.steps / window.seconds / 1e12
                if self.step_flops and window.seconds > 0 else None, **self._load())
            for sink in self.sinks:
                sink.step(record)
            for sample in samples:
                self.write(sample)
            alarms = self.alarms.observe(events, c.step, self.last_scale, window.loss,
                                         loss_at=nonfinite_at(window, first),
                                         loss_source=loss_source(window, first, firsts),
                                         skipped_total=c.skipped_total) if self.alarms else []
            if self.headroom_alarms is not None:
                alarms += self.headroom_alarms.observe(samples)
            for alarm in alarms:
                self.warn(alarm.message, code=alarm.code)
            for code, message in self.hygiene.records(hygiene) if self.hygiene is not None else []:
                self.warn(message, code=code)
            if self.sampler.due():
                self.write(Mem(**self.sampler.sample(with_gpus=meter.device.type == "cuda" and self.rank == 0)))
        return record

    def _numerics_records(self, riders: list[list[float]]) -> list[Numerics]:
        samples = self.numerics.records(riders) if self.numerics is not None else []
        found, self.traced = with_replays(samples, self.traced), {}
        return found

    def lr(self) -> float | None:
        if self.optimizer is None or not getattr(self.optimizer, "param_groups", None):
            return None
        lr = self.optimizer.param_groups[0].get("lr")
        return float(lr) if lr is not None else None

    def epoch_train_loss(self) -> float | None:
        """The epoch's mean train loss from the step records' window means (no extra sync)."""
        c = self.counters
        return c.epoch_loss_sum / c.epoch_batches if c.epoch_batches else None

    def write_epoch(self, number: int, *, keep_totals: bool = False, **fields: Any) -> Epoch:
        """The epoch record: train_loss (default: the epoch's mean), val_loss, val_acc, the epoch's
        training-step, evaluation and checkpoint seconds, and any other number given."""
        fields.setdefault(EPOCH.train_loss, self.epoch_train_loss())
        if fields.get(EPOCH.val_acc) is not None:
            self.val_acc = fields[EPOCH.val_acc]
        known = {f.name for f in dataclass_fields(Epoch)}
        record = Epoch(epoch=number, **{k: v for k, v in fields.items() if k in known}, **vars(self.times),
                       extra={k: v for k, v in fields.items() if k not in known})
        for sink in self.sinks:
            sink.epoch(record, self.counters.step)
        self.times = EpochTimes()
        if not keep_totals:
            self.counters.epoch_loss_sum, self.counters.epoch_batches = 0.0, 0
        return record

    def end(self, status: str, error: BaseException | ErrorInfo | None = None, **fields: Any) -> None:
        """The end record (with the error's type, message and traceback tail when failed); closes."""
        c = self.counters
        if self.alarms is not None:  # a run too short for the live alarm that never trained still hears it
            for alarm in self.alarms.no_step_trained(c.step, c.skipped_total, self.last_scale, ended=True):
                self.warn(alarm.message, code=alarm.code)
        if status == "completed" and 0 < c.skipped_total < c.step and c.step - c.skipped_total < c.step / 2:
            self.warn(f"trained only {c.step - c.skipped_total} of its {c.step} optimizer steps: the GradScaler "
                      f"skipped {c.skipped_total}, so this run's loss and speed describe few real updates",
                      code="few_steps_trained")
        self.write(End(status=status, total_time_s=time.time() - self.t_start, steps=c.step,
                       final_loss=self.last_loss, val_acc=self.val_acc, skipped_total=c.skipped_total,
                       peak_mem=peak_memory(self.device) if self.device is not None else None,
                       error=asdict(error if isinstance(error, ErrorInfo) else ErrorInfo.of(error, self.rank))
                       if error is not None else None, nonfinite_step=self.nonfinite_step, **fields))
        self.close()

    def close(self) -> None:
        if self.numerics is not None:
            self.numerics.cancel()  # a step prepared for sampling that never came: no hooks stay on the model
        if self.plan is not None:
            self.plan.cancel()
        if self.hygiene is not None:
            self.hygiene.cancel()
        if self.writer is not None:
            self.writer.close()
        mirrors = [(sink.outbox, sink.close_wait_s) for sink in self.sinks if isinstance(sink, Mirror)]
        for sink in self.sinks:
            if isinstance(sink, Mirror):
                sink.last_jobs()
            else:
                sink.close()
        close_together(mirrors)  # every mirror at once, under one deadline (outbound.CLOSE_S)
        self.sinks = []
