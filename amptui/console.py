"""The terminal view of a run for `amptui run` / `amptui resume`: a progress line, live numbers,
notable events, and a summary at the end. Reads only the event stream, like the dashboard."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from .core.fmt import fmt_bytes, fmt_duration
from .core.runs import RunInfo


def fmt_num(x: float | None, spec: str = ".4f") -> str:
    return "-" if x is None else format(x, spec)


def step_memory_words(mem: dict[str, Any] | None) -> str:
    mem = mem or {}
    if "allocated" in mem:
        return f"mem {fmt_bytes(mem['allocated'])} (peak {fmt_bytes(mem.get('peak_allocated'))})"
    if "rss" in mem:
        return f"rss {fmt_bytes(mem['rss'])}"
    return ""


class ProgressPrinter:
    """Turns event records into terminal output. On a TTY one line is redrawn in place; elsewhere
    (logs, CI) a line per step record, at most one a second."""

    def __init__(self, out: TextIO = sys.stdout, label: str = ""):
        self.out = out
        self.label = label  # set: compact output, one progress line and a summary (amptui ab)
        self.tty = out.isatty()
        self.total_steps: int | None = None
        self.epochs: int | None = None
        self.preset = ""
        self.precision = ""
        self.last_step: dict[str, Any] | None = None
        self.started = time.monotonic()
        self.start_step = 0
        self._last_plain = 0.0
        self._line_open = False

    def feed(self, records: list[dict[str, Any]]) -> None:
        for rec in records:
            kind = rec.get("kind")
            if self.label and kind not in ("start", "step", "end"):
                continue
            handler = getattr(self, f"_on_{kind}", None)
            if handler:
                handler(rec)

    def _say(self, text: str) -> None:
        if self._line_open:
            self.out.write("\r\x1b[2K")
            self._line_open = False
        self.out.write(text + "\n")
        self.out.flush()

    def _on_start(self, rec):
        self.total_steps = rec.get("total_steps")
        self.epochs = rec.get("epochs")
        self.preset = rec.get("preset", "")
        self.precision = rec.get("precision", "")
        self.start_step = rec.get("resumed_from") or 0
        self.started = time.monotonic()
        if self.label:
            return
        device = rec.get("device") or {}
        resumed = f", resumed from step {self.start_step}" if self.start_step else ""
        self._say(f"{rec.get('run_id')}: {self.preset}, {self.precision} on {device.get('name', '?')} "
                  f"(world size {rec.get('world_size', 1)}), {self.total_steps} steps{resumed}")

    def _on_warning(self, rec):
        self._say(f"warning: {rec.get('message')}")

    def _on_scaler(self, rec):
        if rec.get("event") == "backoff":
            names = rec.get("overflow") or []
            where = ", ".join(names[:3]) + (f" +{len(names) - 3} more" if len(names) > 3 else "")
            self._say(f"step {rec['step']}: inf/NaN gradients, step skipped, scale {rec['old_scale']:g} -> "
                      f"{rec['new_scale']:g}" + (f" (overflow in {where})" if where else ""))
        else:
            self._say(f"step {rec['step']}: scale grew {rec['old_scale']:g} -> {rec['new_scale']:g}")

    def _on_epoch(self, rec):
        val = ""
        if rec.get("val_loss") is not None:
            val = f", val loss {rec['val_loss']:.4f}"
        if rec.get("val_acc") is not None:
            val += f", val acc {100 * rec['val_acc']:.2f}%"
        self._say(f"epoch {rec['epoch']}/{self.epochs}: train loss {fmt_num(rec.get('train_loss'))}{val} "
                  f"({rec.get('epoch_time_s', 0):.1f} s)")

    def _on_checkpoint(self, rec):
        if not self.tty:
            self._say(f"checkpoint at step {rec['step']}: {rec['path']}")

    def _on_step(self, rec):
        self.last_step = rec
        line = self.label + self.status_line(rec)
        if self.tty:
            self.out.write("\r\x1b[2K" + line)
            self.out.flush()
            self._line_open = True
        elif time.monotonic() - self._last_plain >= (5.0 if self.label else 1.0) or rec.get("step") == self.total_steps:
            self._last_plain = time.monotonic()
            self._say(line)

    def status_line(self, rec: dict[str, Any]) -> str:
        step, total = rec.get("step", 0), self.total_steps
        bar = ""
        eta = ""
        if total:
            frac = min(1.0, step / total)
            width = 20
            bar = "[" + "#" * int(frac * width) + "-" * (width - int(frac * width)) + f"] {100 * frac:3.0f}% "
            done = step - self.start_step
            if done > 0 and step < total:
                eta = f" ETA {fmt_duration((time.monotonic() - self.started) / done * (total - step))}"
        scale = rec.get("scale")
        parts = [f"{bar}step {step}/{total or '?'}", f"ep {rec.get('epoch')}/{self.epochs}",
                 f"loss {fmt_num(rec.get('loss'))}", f"lr {fmt_num(rec.get('lr'), '.2e')}"]
        if scale is not None:
            parts.append(f"scale {scale:g} skipped {rec.get('skipped_total', 0)}")
        if rec.get("samples_per_s"):
            parts.append(f"{rec['samples_per_s']:.0f} samples/s")
        parts.append(step_memory_words(rec.get("mem")))
        return "  ".join(p for p in parts if p) + eta

    def _on_end(self, rec):
        status = rec.get("status")
        peak = fmt_bytes(rec.get("peak_mem"))
        acc = rec.get("val_acc")
        skipped = self.last_step.get("skipped_total", 0) if self.last_step else 0
        self._say(f"{self.label}{status}: {rec.get('steps')} steps in {fmt_duration(rec.get('total_time_s'))}, "
                  f"final loss {fmt_num(rec.get('final_loss'))}"
                  + (f", val acc {100 * acc:.2f}%" if acc is not None else "")
                  + f", peak memory {peak}, skipped steps {skipped}")

    def close(self) -> None:
        if self._line_open:
            self.out.write("\n")
            self.out.flush()
            self._line_open = False


def runs_table(runs: list[RunInfo]) -> str:
    rows = [("RUN ID", "PRESET", "PRECISION", "STATUS", "PROGRESS", "STARTED", "DURATION")]
    for r in runs:
        progress = f"{r.step}/{r.total_steps}" if r.total_steps else str(r.step)
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.started)) if r.started else "-"
        rows.append((r.run_id, r.preset, r.precision, r.status, progress, started, fmt_duration(r.duration_s)))
    return table(rows)


def table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)
