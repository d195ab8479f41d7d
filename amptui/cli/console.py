"""The terminal view of a run for `amptui run` / `resume` / `ab`. Reads only the event stream,
like the dashboard. The tables of `runs`, `compare` and `presets` are cli/tables.py's.

On a terminal, a run is one rich progress line that redraws in place, fitted to the terminal's
width, with notable events printed above it. When stdout is not a terminal (a log, CI, a pipe),
plain lines: a step line at most once a second.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Sequence, TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, TaskID, TextColumn, TimeRemainingColumn
from rich.table import Column
from rich.text import Text

from amptui.core.autopilot import switch_line
from amptui.core.config.precision import UNSEEN, Precision
from amptui.core.fmt import (
    fmt_accuracy,
    fmt_bytes,
    fmt_duration,
    fmt_loss,
    fmt_lr,
    fmt_of,
    fmt_progress,
    fmt_rate,
    fmt_scale,
    fmt_total,
    shown,
)
from amptui.core.inputbound import notice
from amptui.core.run.runstate import RunState
from amptui.core.stream.records import END, EPOCH, SCALER, START, STEP, End, Record, Start, Step, as_record


def terminal(out: TextIO | None = None) -> Console | None:
    """A rich console when `out` is a terminal, else None (plain text)."""
    out = out if out is not None else sys.stdout
    try:
        is_tty = out.isatty()
    except (AttributeError, ValueError):
        is_tty = False
    return Console(file=out, highlight=False) if is_tty else None


def step_memory_words(mem: dict[str, Any] | None) -> str:
    """A step record's `mem`: CUDA allocated (and peak), or the CPU process's rss."""
    mem = mem or {}
    if "allocated" in mem:
        return f"mem {fmt_bytes(mem['allocated'])} (peak {fmt_bytes(mem.get('peak_allocated'))})"
    if "rss" in mem:
        return f"rss {fmt_bytes(mem['rss'])}"
    return ""


def steady_words(run: RunState) -> str:
    """", 1,234 samples/s, 5.2 ms/step (steady)": after warm-up (core.figures), as compare shows them."""
    rate, ms = run.steady_samples_per_s, run.steady_step_ms
    if not ms:
        return ""
    return (f", {fmt_rate(rate)} samples/s" if rate else "") + f", {ms:,.1f} ms/step (steady)"


def step_fields(rec: dict[str, Any], epochs: int | None) -> list[str]:
    """A step record's figures, most wanted first (a narrow terminal shows the first few)."""
    # a loop that iterates no DataLoader has no epochs: its step records leave the field out
    epoch = f"ep {fmt_of(rec[STEP.epoch], epochs)}" if rec.get(STEP.epoch) is not None else ""
    fields = [epoch, f"loss {fmt_loss(rec.get(STEP.loss))}"]
    if rec.get(STEP.scale) is not None:
        fields += [f"scale {fmt_scale(rec[STEP.scale])}", f"skipped {rec.get(STEP.skipped_total, 0)}"]
    fields.append(f"lr {fmt_lr(rec.get(STEP.lr))}")
    if rec.get(STEP.samples_per_s):
        fields.append(f"{fmt_rate(rec[STEP.samples_per_s])} samples/s")
    fields.append(step_memory_words(rec.get(STEP.mem)))
    return [f for f in fields if f]


def emulated_notice(start: dict[str, Any] | None) -> str | None:
    """The emulated-dtype warning for a run whose `start` record says it autocasts to bfloat16 on
    this machine's CPU (a run from another host is not judged by this CPU)."""
    import socket

    from amptui.machine.hardware import emulated_dtype_notice

    start = start or {}
    if start.get(START.host) not in (None, socket.gethostname()):
        return None
    precision = Precision.from_record(start.get(START.precision))
    if precision is None:
        return None
    device_type = (start.get(START.device) or {}).get("type", "")
    return emulated_dtype_notice(device_type, precision.autocast, precision.dtype)


class StepsColumn(ProgressColumn):
    """"96/200" with a total, "96 steps" without one (a script that never said how many)."""

    @staticmethod
    def words(completed: float, total: float | None) -> str:
        if total:
            return f"{int(completed):>{len(str(int(total)))}}/{int(total)}"
        return f"{int(completed)} steps"

    def render(self, task) -> Text:
        return Text(self.words(task.completed, task.total), style="progress.download")


def fit(fields: Sequence[str], width: int, sep: str = "  ") -> str:
    """As many whole fields as fit in `width` columns, in order."""
    out = ""
    for f in fields:
        candidate = f"{out}{sep}{f}" if out else f
        if len(candidate) > width:
            break
        out = candidate
    return out


class ProgressPrinter:
    """Turns event records into terminal output. `label` set (one run of an A/B): only a progress
    line and a summary. `console`: where to draw (default: stdout when it is a terminal)."""

    BAR_WIDTH = 12

    def __init__(self, out: TextIO | None = None, label: str = "", console: Console | None = None,
                 plain: bool = False):
        out = out if out is not None else sys.stdout
        self.out = out
        self.label = label
        # plain: lines only, also on a terminal (several runs followed at once share it)
        self.console = None if plain else console if console is not None else terminal(out)
        self.run = RunState()
        self.started = time.monotonic()  # this session's start record arrived (the ETA's clock)
        self._last_plain = 0.0
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def feed(self, records: Sequence[Record | dict[str, Any]]) -> None:
        for rec in map(as_record, records):
            self.run.add(rec)
            if self.label and not isinstance(rec, (Start, Step, End)):
                continue
            handler = getattr(self, f"_on_{rec.kind}", None)
            if handler:
                handler(rec)

    def say(self, text: str) -> None:
        """A line of amptui's own: above the live line on a terminal, else a plain line on `out`."""
        self._say(text)

    def _say(self, text: str) -> None:
        if self.console is not None:  # above the live progress line, which then redraws below
            self.console.print(Text(shown(text, newlines=True)))  # wrapped at the terminal's width
        else:
            self.out.write(shown(text, newlines=True) + "\n")
            self.out.flush()

    # --- the live line --------------------------------------------------------------------------
    def _start_progress(self) -> tuple[Console, Progress, TaskID] | None:
        """The live line, started on first use; None when the output is not a terminal."""
        if self.console is None:
            return None
        if self._progress is not None and self._task is not None:
            return self.console, self._progress, self._task
        label = [TextColumn("{task.description}", table_column=Column(no_wrap=True))] if self.label else []
        self._progress = Progress(
            *label,
            BarColumn(bar_width=self.BAR_WIDTH),
            StepsColumn(table_column=Column(no_wrap=True)),
            TimeRemainingColumn(compact=True, table_column=Column(no_wrap=True)),
            TextColumn("{task.fields[stats]}", table_column=Column(no_wrap=True, overflow="ellipsis")),
            console=self.console, transient=True, refresh_per_second=4)
        self._task = self._progress.add_task(self.label.rstrip().ljust(len(self.label) - 1),
                                             total=self.run.total_steps, completed=self.run.session_step, stats="")
        self._progress.start()
        return self.console, self._progress, self._task

    def _stats_width(self, console: Console) -> int:
        """Columns left for the figures after the label, bar, step count and ETA (one space
        between columns)."""
        steps = len(StepsColumn.words(self.run.step, self.run.total_steps)) + 1
        label = len(self.label) if self.label else 0  # padded, plus the column's space
        return max(0, console.width - label - (self.BAR_WIDTH + 1) - steps - (8 + 1) - 1)

    def redraw(self) -> None:
        """Draw the live line now, as its timer would (a test or a caller that just fed records)."""
        if self._progress is not None:
            self._progress.refresh()

    def _stop_progress(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    # --- records --------------------------------------------------------------------------------
    def _on_start(self, rec):
        run = self.run
        self.started = time.monotonic()
        if not self.label:
            resumed = f", resumed from step {run.session_step}" if run.session_step else ""
            device = run.device.get("name") or run.device.get("type") or "an unnamed device"
            self._say(f"{run.run_id or 'run'}: {run.preset or 'no preset'}, {run.precision_words or 'precision ' + UNSEEN} "
                      f"on {device} (world size {run.world_size}), {fmt_total(run.total_steps)}{resumed}")
            notice = emulated_notice(rec)
            if notice:
                self._say(f"note: {notice}")
        self._start_progress()

    def _on_warning(self, rec):
        self._say(f"warning: {rec.get('message') or '(no message)'}")

    def _on_scaler(self, rec):
        step = fmt_of(rec.get(SCALER.step), None)  # a damaged record's missing figure reads "-", never None
        old, new = fmt_scale(rec.get(SCALER.old_scale)), fmt_scale(rec.get(SCALER.new_scale))
        if rec.get(SCALER.event) == "backoff":
            names = rec.get(SCALER.overflow) or []
            where = ", ".join(names[:3]) + (f" +{len(names) - 3} more" if len(names) > 3 else "")
            self._say(f"step {step}: inf/NaN gradients, step skipped, scale {old} -> {new}"
                      + (f" (overflow in {where})" if where else ""))
        else:
            self._say(f"step {step}: scale grew {old} -> {new}")

    def _on_epoch(self, rec):
        val = ""
        if rec.get(EPOCH.val_loss) is not None:
            val = f", val loss {fmt_loss(rec[EPOCH.val_loss])}"
        if rec.get(EPOCH.val_acc) is not None:
            val += f", val acc {fmt_accuracy(rec[EPOCH.val_acc])}"
        self._say(f"epoch {fmt_of(rec.get(EPOCH.epoch), self.run.epochs)}: train loss {fmt_loss(rec.get(EPOCH.train_loss))}{val} "
                  f"({fmt_duration(rec.get(EPOCH.epoch_time_s), precise=True)})")

    def _on_checkpoint(self, rec):
        if self.console is None:
            self._say(f"checkpoint at step {fmt_of(rec.get('step'), None)}: {rec.get('path') or '(no path)'}")

    def _on_precision_switch(self, rec):  # the autopilot (docs/autopilot.md): which rule, and why
        self._say(switch_line(rec))

    def _on_step(self, rec):
        total = self.run.total_steps
        live = self._start_progress()
        if live is not None:
            console, progress, task = live
            stats = fit(step_fields(rec, self.run.epochs), self._stats_width(console))
            progress.update(task, completed=rec.get(STEP.step, 0), total=total, stats=stats)
        elif time.monotonic() - self._last_plain >= (5.0 if self.label else 1.0) or rec.get(STEP.step) == total:
            self._last_plain = time.monotonic()
            self._say(self.label + self.status_line(rec))

    def status_line(self, rec: dict[str, Any]) -> str:
        """The plain (not a terminal) progress line."""
        step, total = rec.get(STEP.step, 0), self.run.total_steps
        eta_s = self.run.eta(time.monotonic(), session_t=self.started)
        eta = f"  ETA {fmt_duration(eta_s)}" if eta_s is not None else ""
        percent = f" ({100 * min(1.0, step / total):.0f}%)" if total else ""
        return "  ".join([f"{fmt_progress(step, total)}{percent}", *step_fields(rec, self.run.epochs)]) + eta

    def _on_end(self, rec):
        self._stop_progress()

    def finish(self, duration_s: float | None) -> None:
        """The summary line, with the run's duration as `runs` and `compare` show it (runstate.RunClock)."""
        self.close()
        run, rec = self.run, self.run.end
        if rec is None:
            return
        acc = rec.get(END.val_acc)
        skipped = run.skipped_total if run.last_step else rec.get(END.skipped_total, 0)
        self._say(f"{self.label}{run.status}: {run.step} steps in {fmt_duration(duration_s)}, "
                  f"final loss {fmt_loss(run.final_loss)}"
                  + (f", val acc {fmt_accuracy(acc)}" if acc is not None else "")
                  + f", peak memory {fmt_bytes(rec.get(END.peak_mem))}, skipped steps {skipped or 0}"
                  + steady_words(run))
        bound = notice(run.data_wait.share, run.device.get("type"))
        if bound:
            self._say(f"{self.label}{bound} (a speed-up measured here is the input pipeline's, not AMP's)")

    def close(self) -> None:
        self._stop_progress()
