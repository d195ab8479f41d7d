"""What a run is, folded from its event records: the one reading of the stream that `runs`,
`compare`, the terminal printer and the dashboard share.

    state = fold(read_events(path))        # or state.add(record) as records arrive

Records arrive as their classes (core.stream.records.from_wire); `add` hands each to the one handler of
its class (HANDLERS), so a new kind is a handler and one line in the table.

A later `start` record begins a new session of the same run (a resume): it clears the previous
session's `end`, so a resumed run is running again until its own `end`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from amptui.core.config.precision import Precision
from amptui.core.figures import StepWindows, final_loss
from amptui.core.inputbound import DataWait
from amptui.core.stream.records import (
    END,
    Checkpoint,
    End,
    Epoch,
    PrecisionSwitch,
    Record,
    Scaler,
    Start,
    Step,
    WarningRecord,
    as_record,
)

WARNINGS_KEPT = 10


def _number(value: Any) -> float | int | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class RunClock:
    """A run's duration, the one definition every view uses (`runs`, `compare`, the summary of
    `amptui run`, the dashboard): the time its training sessions ran, summed.

    A session runs from its `start` record to its `end` record; one that ended without an `end`
    (killed) to its last record; the session still running, to now. So the time a stopped run
    lay waiting for its resume does not count, nor the start-up before a session's first record
    (importing torch, building the model). Feed it a run's records in file order.
    """

    def __init__(self) -> None:
        self.closed_s = 0.0
        self.open_t: float | None = None  # the running session's start
        self.last_t: float | None = None
        self.sessions = 0

    def feed(self, rec: Record) -> None:
        t = rec.t
        if t is None:
            return
        if isinstance(rec, Start):
            self._close(self.last_t)  # the previous session ended without an end record
            self.open_t = t
            self.sessions += 1
        elif isinstance(rec, End):
            self._close(t)
        self.last_t = t

    def _close(self, t: float | None) -> None:
        if self.open_t is not None and t is not None:
            self.closed_s += max(0.0, t - self.open_t)
        self.open_t = None

    def seconds(self, now: float | None = None) -> float | None:
        """The duration; `now` for a run still running (its open session counts up to now)."""
        if not self.sessions:
            return None
        if self.open_t is None:
            return self.closed_s
        until = now if now is not None else self.last_t
        return self.closed_s + max(0.0, (until or self.open_t) - self.open_t)


def eta_s(elapsed_s: float, done_steps: int, step: int, total_steps: int | None) -> float | None:
    """Seconds left at the pace of `done_steps` in `elapsed_s`; None when it cannot be told."""
    if not total_steps or done_steps <= 0 or step >= total_steps:
        return None
    return elapsed_s / done_steps * (total_steps - step)


ETA_WINDOW_S = 60.0  # the ETA's pace: the step records of the last minute


@dataclass
class RunState:
    """A run folded from its records. `primary_rank`: the rank whose records speak for the run
    (None: every record does); other ranks count only with a failed `end`."""

    primary_rank: int | None = None
    run_id: str = ""
    preset: str = ""
    precision: Precision | None = None
    precision_said: str = ""          # the start record's words, also when they name no Precision
    config: dict[str, Any] = field(default_factory=dict)
    device: dict[str, Any] = field(default_factory=dict)
    world_size: int = 1
    total_steps: int | None = None
    steps_per_epoch: int | None = None
    epochs: int | None = None
    peak_tflops: float | None = None
    start: dict[str, Any] | None = None  # the first start record
    started: float | None = None         # its time
    session_t: float | None = None       # the latest session's start
    session_step: int = 0                # the step that session resumed from
    # the record just folded makes the steps after this one redone (a resume, an autopilot rewind to its last
    # checkpoint): the views forget what they drew past it, so each step is drawn once (None: nothing redone)
    redone_after: int | None = None
    checkpoint_step: int = 0             # the last checkpoint record's step (a rewind goes back to it)
    step_seen: int = 0                   # the last step record's step, this session (a lower one: a rewind)
    last_t: float | None = None
    step: int = 0
    epoch: int = 0
    epochs_done: int = 0
    loss: float | None = None            # the latest step record's (window mean)
    lr: float | None = None
    scale: float | None = None
    skipped_total: int = 0
    samples_per_s: float | None = None
    step_time_ms: float | None = None
    grad_norm: float | None = None
    tflops: float | None = None
    val_acc: float | None = None
    last_step: dict[str, Any] | None = None
    end: dict[str, Any] | None = None
    scaler_seen: bool = False
    warnings: deque[str] = field(default_factory=lambda: deque(maxlen=WARNINGS_KEPT))
    warning_codes: set[str] = field(default_factory=set)  # every code said (a run's counts warned unreliable)
    cause: dict[str, Any] | None = None  # the first nonfinite_cause warning's cause (its replay's finding)
    data_wait: DataWait = field(default_factory=DataWait)
    clock: RunClock = field(default_factory=RunClock)
    recent: deque[tuple[float, int]] = field(default_factory=deque)  # (t, step) of the last ETA_WINDOW_S
    timed: StepWindows = field(default_factory=StepWindows)  # the step records' windows (core.figures)
    switches: list[dict[str, Any]] = field(default_factory=list)  # the autopilot's precision_switch records

    # --- what it says -------------------------------------------------------------------------

    @property
    def status(self) -> str:
        """The end record's status, else "running" (a reader that can tell a dead writer says "killed").
        A status outside End.STATUSES (a damaged or foreign file) is "damaged", never shown as written."""
        if self.end is not None:
            status = self.end.get(END.status) or "failed"
            return status if status in End.STATUSES else "damaged"
        return "running"

    @property
    def ended(self) -> bool:
        return self.end is not None

    @property
    def segments(self) -> str:
        """The run's precision as its segments ("fp16+scaler -> bf16 at step 1200"); "" without a switch."""
        return segments(self.switches)

    @property
    def precision_words(self) -> str:
        """In words; a run the autopilot switched: its segments ("fp16+scaler -> bf16 at step 1200")."""
        return self.segments or (self.precision.words if self.precision is not None else self.precision_said)

    @property
    def final_loss(self) -> float | None:
        """See core.figures: the one definition every view shows."""
        return final_loss(self.end, self.loss)

    @property
    def nonfinite(self) -> str:
        """Why an ended run's loss cannot be trusted, in a few words ("" when it can): its loss went
        inf/NaN (the end record's nonfinite_step), or the GradScaler skipped every step it took."""
        end = self.end or {}
        step = end.get(END.nonfinite_step)
        skipped, steps = end.get(END.skipped_total), end.get(END.steps)
        if isinstance(skipped, int) and isinstance(steps, int) and 0 < steps <= skipped:
            return "every step skipped (inf/NaN)"
        if isinstance(step, int) and not isinstance(step, bool):
            return f"loss inf/NaN from step {step}"
        return ""

    @property
    def compiled(self) -> bool:
        """Ran under torch.compile (its start record's config says so): one more warm-up window."""
        run = self.config.get("run")
        return isinstance(run, dict) and bool(run.get("compile"))

    @property
    def steady_samples_per_s(self) -> float | None:
        """Samples/s after warm-up (core.figures): the header, the throughput panel, the summary, compare."""
        return self.timed.steady(self.total_steps, self.compiled).samples_per_s

    @property
    def steady_step_ms(self) -> float | None:
        return self.timed.steady(self.total_steps, self.compiled).step_ms

    @property
    def error(self) -> dict[str, Any] | None:
        return (self.end or {}).get(END.error) or None

    def error_text(self) -> str:
        """"rank 1: RuntimeError: ..." (the rank only in a multi-process run), or ""."""
        error = self.error
        if not error:
            return ""
        where = f"rank {error['rank']}: " if self.world_size > 1 and error.get("rank") is not None else ""
        return f"{where}{error.get('type', 'Error')}: {error.get('message', '')}"

    @property
    def has_scaler(self) -> bool:
        amp = self.config.get("amp")
        return bool(self.scaler_seen or (self.precision is not None and self.precision.scaler)
                    or (isinstance(amp, dict) and amp.get("grad_scaler") is True))

    @property
    def progress(self) -> float:
        return min(1.0, self.step / self.total_steps) if self.total_steps else 0.0

    def eta(self, now: float, session_t: float | None = None) -> float | None:
        """Seconds left at the pace of the last minute's step records (a run that slows down as the
        machine gets busier, or speeds up after its start, is told at its pace now); before two
        records, at this session's pace (`session_t`: when it began on `now`'s clock)."""
        if len(self.recent) >= 2 and self.total_steps:
            (t0, s0), (t1, s1) = self.recent[0], self.recent[-1]
            if t1 > t0 and s1 > s0:
                return None if self.step >= self.total_steps else (self.total_steps - self.step) * (t1 - t0) / (s1 - s0)
        since = self.session_t if session_t is None else session_t
        if since is None:
            return None
        return eta_s(now - since, self.step - self.session_step, self.step, self.total_steps)

    # --- folding ------------------------------------------------------------------------------

    def speaks(self, rec: Record) -> bool:
        """Is this record the run's own (its primary rank's)?"""
        return self.primary_rank is None or rec.rank == self.primary_rank

    def add(self, rec: Record | dict[str, Any]) -> None:
        """Fold one record in (a valid line's dict, core.stream.events.valid_record, is read as its class)."""
        rec = as_record(rec)
        self.redone_after = None
        t = rec.t
        if t is not None:
            self.last_t = t if self.last_t is None else max(self.last_t, t)
        own = self.speaks(rec)
        if own:
            self.clock.feed(rec)
        handler = HANDLERS.get(type(rec))
        if handler is not None and (own or isinstance(rec, End)):  # another rank's failed end counts too
            handler(self, rec)

    def _on_start(self, rec: Start) -> None:
        self.run_id = self.run_id or rec.run_id or ""  # a reader that knows the folder keeps its name
        self.preset = rec.preset or self.preset
        said = rec.precision
        if said:
            self.precision = Precision.from_record(said)
            self.precision_said = said.get("words", "") if isinstance(said, dict) else str(said)
        self.config = rec.config or self.config
        self.device = rec.device or self.device
        self.world_size = rec.world_size or self.world_size
        self.total_steps = rec.total_steps or self.total_steps
        self.steps_per_epoch = rec.steps_per_epoch or self.steps_per_epoch
        self.epochs = rec.epochs or self.epochs
        self.peak_tflops = rec.peak_tflops or self.peak_tflops
        if self.start is None:
            self.start, self.started = rec.wire, rec.t
        self.session_t = rec.t
        self.session_step = self.step_seen = int(rec.resumed_from or 0)
        self.redone_after = self.session_step if rec.resumed_from is not None else None
        self.recent.clear()  # a new session's pace is its own
        self.timed.session(self.session_step)
        self.end = None  # a resumed session: the run goes on

    def _on_step(self, rec: Step) -> None:
        step = _number(rec.step)
        if step is None:
            return  # not a step record we can place
        if self.last_step is not None and step <= self.step_seen:  # an autopilot rewind: trained again from its last checkpoint (or the start)
            self.redone_after = self.checkpoint_step if self.checkpoint_step < step else int(step) - 1
        self.step_seen = int(step)
        self.last_step = rec.wire
        self.step = int(step)
        self.timed.take(rec)
        t = rec.t
        if t is not None:
            self.recent.append((t, self.step))
            while len(self.recent) > 2 and self.recent[0][0] < t - ETA_WINDOW_S:
                self.recent.popleft()
        self.epoch = int(rec.epoch or self.epoch)
        self.loss = rec.loss
        self.lr = rec.lr
        self.scale = rec.scale
        self.skipped_total = int(rec.skipped_total or 0)
        self.samples_per_s = rec.samples_per_s
        self.step_time_ms = rec.step_time_ms
        if rec.grad_norm is not None:
            self.grad_norm = rec.grad_norm
        if rec.tflops is not None:
            self.tflops = rec.tflops
        if self.scale is not None and self.scale > 0:
            self.scaler_seen = True
        self.data_wait.add(rec)

    def _on_epoch(self, rec: Epoch) -> None:
        epoch = _number(rec.epoch)
        if epoch is not None:
            self.epoch = int(epoch)
            self.epochs_done = max(self.epochs_done, int(epoch))
        if rec.val_acc is not None:
            self.val_acc = rec.val_acc

    def _on_checkpoint(self, rec: Checkpoint) -> None:
        if isinstance(rec.step, int):
            self.checkpoint_step = rec.step

    def _on_scaler(self, rec: Scaler) -> None:
        self.scaler_seen = True

    def _on_switch(self, rec: PrecisionSwitch) -> None:
        if isinstance(rec.step, int):
            self.switches.append(rec.wire)

    def _on_warning(self, rec: WarningRecord) -> None:
        self.warnings.append(str(rec.message or ""))
        self.warning_codes.add(str(rec.code or ""))
        if rec.code == "nonfinite_cause" and self.cause is None and isinstance(rec.cause, dict):
            self.cause = rec.cause  # the first one: its replay's finding

    def _on_end(self, rec: End) -> None:
        own = self.speaks(rec)
        if not own and (rec.status != "failed" or self.end is not None):
            return  # another rank's end says something only when it failed first
        self.end = rec.wire
        if own:
            steps = _number(rec.steps)
            if steps is not None:  # never below what the step records showed (a failed session says 0)
                self.step = max(self.step, int(steps))
            if rec.val_acc is not None:
                self.val_acc = rec.val_acc


# one handler per kind; a kind without one changes nothing here (mem, checkpoint, numerics: views' own)
HANDLERS: dict[type[Record], Callable[[Any, Any], None]] = {
    Start: RunState._on_start, Step: RunState._on_step, Epoch: RunState._on_epoch, Scaler: RunState._on_scaler,
    WarningRecord: RunState._on_warning, End: RunState._on_end, PrecisionSwitch: RunState._on_switch,
    Checkpoint: RunState._on_checkpoint,
}


def fold(records: Iterable[Record | dict[str, Any]], state: RunState | None = None) -> RunState:
    """Records folded, in order, into `state` (default: a new RunState)."""
    state = state if state is not None else RunState()
    for rec in records:
        state.add(rec)
    return state


def segments(switches: Sequence[Mapping[str, Any]]) -> str:
    """A run's precision as its segments, from its precision_switch records: "fp16+scaler -> bf16 at step
    1200" ("" without a switch)."""
    parts: list[str] = []
    for rec in switches:
        source, to = rec.get("from"), rec.get("to")
        before = source.get("short") if isinstance(source, Mapping) else None
        after = to.get("short") if isinstance(to, Mapping) else None
        if not parts:
            parts.append(str(before or "?"))
        parts.append(f"{after or '?'} at step {rec.get('step')}")
    return " -> ".join(parts)
