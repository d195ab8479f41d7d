"""The run screen, attached to a run folder, live or finished: the header lines (run_header.py), the
status panel and the keys that follow the status (run_controls.py), then the loss / lr / loss-scale /
memory / throughput panels and the output log, drawn from a RunModel that a worker keeps reading."""

from __future__ import annotations

import time
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical
from textual.widgets import Footer, ProgressBar, RichLog, Static
from textual.worker import get_current_worker

from ...core.fmt import fmt_accuracy as fmt_acc
from ...core.fmt import fmt_bytes, fmt_loss, fmt_scale
from ...core.inputbound import notice
from ...core.precision import DTYPES, Precision
from ..runmodel import RunModel
from ..runtail import RunTail
from ..widgets.plot import COLORS, Figure, Line, MetricPlot
from .base import DashboardScreen, in_background
from .keys import KeysMixin, with_reasons
from .run_controls import RunControls
from .run_header import header_line, progress_line, stats_line

FLUSH_HZ = 4
PLOT_HZ = 2
PANELS = (("loss", "loss"), ("lr", "lr"), ("scale", "loss scale"), ("mem", "memory"),
          ("speed", "throughput"), ("log", "log"))
TITLES = {"loss": "loss", "lr": "learning rate", "scale": "loss scale (log2)", "mem": "memory",
          "speed": "throughput", "log": "output.log"}
COMPACT_W, COMPACT_H = 100, 30
SCALER_EVENT_LINES = 4  # the latest backoffs / growths listed under the loss-scale plot


def no_scaler_why(precision: Precision | None) -> str:
    """Whether a run without a GradScaler needs one, from the dtype it autocasts to."""
    if precision is None or not precision.autocast:
        return "float32 gradients need no loss scaling."
    dtype = DTYPES.get(precision.dtype)
    if dtype is not None and not dtype.needs_scaler:
        return (f"{precision.dtype} keeps float32's exponent range, so small gradients do not underflow: "
                "no loss scaling needed.")
    return (f"{precision.dtype} without a GradScaler: small gradients can underflow to zero. Turn the "
            "GradScaler on (amp.grad_scaler).")


class Panel(Vertical):
    ALLOW_MAXIMIZE = True


class PanelTabs(Static):
    """The compact layout's tab line: a click picks a panel, like its number key."""

    def on_click(self, event) -> None:
        x = 1  # left padding
        for i, (_, name) in enumerate(PANELS):
            width = len(f" {i + 1} {name} ") + 1
            if x <= event.x < x + width:
                self.screen.action_panel(i)
                return
            x += width


class RunScreen(RunControls, KeysMixin, DashboardScreen):
    # One line per key; the footer, the help screen (? / F1) and check_action all read this list.
    BINDINGS = with_reasons([
        Binding("s", "stop", "Stop"),
        Binding("R", "resume", "Resume"),
        Binding("d", "detach", "Detach"),
        Binding("q", "back", "Back"),
        Binding("c", "compare", "Compare"),
        Binding("i", "info", "Info"),
        Binding("n", "next_panel", "Next panel"),
        Binding("escape", "restore", "Restore", show=False),
    ], ("stop", "resume")) + [Binding(str(i + 1), f"panel({i})", f"panel: {name}", show=False)
                              for i, (_, name) in enumerate(PANELS)]
    HELP = {"1-6": "show that panel (at 80x24) / maximize it (larger terminals); again restores"}

    def __init__(self, run_dir: Path, *, standalone: bool = False):
        super().__init__(id=None)
        self.run_dir = Path(run_dir)
        self.standalone = standalone  # opened by `amptui watch`: q quits, d goes home
        self.model = RunModel(self.run_dir.name)
        self._rendered = -1
        self._bad_lines_reported = False
        self._plotted = 0.0
        self._log_seq = 0
        self.active = 0
        self._stopping = False
        self._shown: dict[str, Text] = {}
        self._resume_refusal: str | None = "the run has not been read yet"
        self._status_seen: tuple | None = None
        self._resuming = False

    # --- layout -----------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(id="run-header")
        with Horizontal(id="progress-row"):
            yield ProgressBar(total=1.0, show_eta=False, id="progress")
            yield Static(id="progress-text")
        yield Static(id="stats")
        yield Static(id="warning-bar")
        yield Static(id="error-panel")
        yield PanelTabs(id="panel-tabs")
        with Grid(id="panels"):
            with Panel(id="p-loss", classes="panel"):
                yield MetricPlot(id="plot-loss")
            with Panel(id="p-lr", classes="panel"):
                yield MetricPlot(id="plot-lr")
            with Panel(id="p-scale", classes="panel"):
                yield MetricPlot(id="plot-scale")
                yield Static(id="scale-info", classes="info")
            with Panel(id="p-mem", classes="panel"):
                yield MetricPlot(id="plot-mem")
                yield Static(id="mem-info", classes="info")
            with Panel(id="p-speed", classes="panel"):
                yield MetricPlot(id="plot-speed")
            with Panel(id="p-log", classes="panel"):
                yield RichLog(max_lines=400, id="log", auto_scroll=True, wrap=True, markup=False, highlight=False,
                              min_width=20)
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        for i, (key, name) in enumerate(PANELS):
            self.query_one(f"#p-{key}").border_title = f"{i + 1} {TITLES[key]}"
        self.query_one("#error-panel").display = False
        self.query_one("#warning-bar").display = False
        self._layout(self.size.width, self.size.height)
        self.flush()
        self.set_interval(1 / FLUSH_HZ, self.flush)
        self.tail()

    def on_resize(self, event) -> None:
        self._layout(event.size.width, event.size.height)

    def _layout(self, width: int, height: int) -> None:
        compact = width < COMPACT_W or height < COMPACT_H
        self.set_class(compact, "-compact")
        for i, (key, _) in enumerate(PANELS):
            self.query_one(f"#p-{key}").set_class(i == self.active, "-active")
        self._tabs()

    def _tabs(self) -> None:
        parts = []
        for i, (key, name) in enumerate(PANELS):
            style = "bold reverse" if i == self.active else "dim"
            parts.append((f" {i + 1} {name} ", style))
            parts.append(" ")
        self.query_one("#panel-tabs", Static).update(Text.assemble(*parts))

    # --- live data -------------------------------------------------------------------------------
    @in_background("run-tail", "reading the run's files")
    def tail(self) -> None:
        """Read the run's files into the model; the UI thread renders it FLUSH_HZ times a second."""
        worker = get_current_worker()
        tail = RunTail(self.run_dir, self.model, alive=self.app.process_alive)
        tail.prefill()
        idle = 0
        while not worker.is_cancelled:
            try:
                more = tail.poll()
            except OSError:
                more = False
            if more:
                continue
            finished = self.model.end is not None or self.model.status == "killed"
            idle = idle + 1 if finished else 0
            # A finished run can still be resumed (new records appended): keep looking, slowly.
            time.sleep(1.0 if idle > 10 else 0.1)

    @property
    def drawn(self) -> bool:
        """Everything the model holds is on screen: its plots and its log lines."""
        return self._rendered == self.model.version and self._log_seq == self.model.log_seq

    def flush(self) -> None:
        """Render the model if it changed (coalesces any number of records into one redraw)."""
        now = self.app.clock()
        m = self.model
        with m.lock:
            changed = m.version != self._rendered
            self._header(now)
            if not changed:
                return
            self._status_panel()
            if m.bad_lines and not self._bad_lines_reported:
                self._bad_lines_reported = True  # said once; the rest of the stream is read as usual
                self.notify(f"skipped {m.bad_lines} unreadable line(s) in the event files; everything else was "
                            "read", severity="warning", timeout=8)
            # plots cost a few ms each: redraw them at most PLOT_HZ times a second
            tick = time.monotonic()
            if tick - self._plotted >= 1 / PLOT_HZ or m.end is not None:
                self._plotted = tick
                self._rendered = m.version
                self._plots()
            new_lines = m.log_seq - self._log_seq
            lines = list(m.log_lines)[-new_lines:] if new_lines > 0 else []
            self._log_seq = m.log_seq
        if lines:
            log = self.query_one("#log", RichLog)
            for line in lines:
                log.write(Text(line))

    def _header(self, now: float) -> None:
        m = self.model
        self._set("#run-header", header_line(m, now))
        self._set("#progress-text", progress_line(m))
        self._set("#stats", stats_line(m))
        bar = self.query_one("#progress", ProgressBar)
        if bar.progress != m.progress:
            bar.update(progress=m.progress)

    def _set(self, selector: str, text: Text) -> None:
        """Update a line only when it changed: an idle screen draws nothing."""
        if self._shown.get(selector) != text:
            self._shown[selector] = text
            self.query_one(selector, Static).update(text)

    def _plots(self) -> None:
        m = self.model
        # loss
        xs, ys = m.loss_s.points()
        vx, vy = m.val_s.points()
        lines = [Line(xs, ys, label="train", color="cyan")]
        if vx:
            lines.append(Line(vx, vy, label="val", color="green", marker="●", scatter=True))
        self.query_one("#plot-loss", MetricPlot).update_figure(Figure(lines))
        last = fmt_loss(m.loss)
        ep = m.epochs_seen[-1] if m.epochs_seen else None
        extra = ""
        if ep and ep.get("val_acc") is not None:
            extra = f" · val acc {fmt_acc(ep['val_acc'])}"
        self.query_one("#p-loss").border_subtitle = f"{last}{extra}"
        # lr
        xs, ys = m.lr_s.points()
        self.query_one("#plot-lr", MetricPlot).update_figure(Figure([Line(xs, ys, color="green")]))
        self.query_one("#p-lr").border_subtitle = f"{m.lr:.3g}" if m.lr is not None else "-"
        # loss scale, log2 axis with backoffs and growths marked
        self._scale_panel()
        # memory
        self._mem_panel()
        # throughput
        xs, ys = m.sps_s.points()
        self.query_one("#plot-speed", MetricPlot).update_figure(
            Figure([Line(xs, ys, label="samples/s", color="orange")]))
        sps = f"{m.samples_per_s:,.0f} samples/s" if m.samples_per_s else "-"
        st = f"{m.step_time_ms:.1f} ms/step" if m.step_time_ms else ""
        tf = ""
        if m.tflops:
            rate = f"{m.tflops:.1f} TFLOP/s" if m.tflops >= 0.1 else f"{1000 * m.tflops:.1f} GFLOP/s"
            tf = rate + (f" ({100 * m.tflops / m.peak_tflops:.0f}% of peak)" if m.peak_tflops else "")
        self.query_one("#p-speed").border_subtitle = " · ".join(p for p in (sps, st, tf) if p)
        # an input-bound run, then warnings (odd AMP combinations, loss-scale alarms): the newest, and how many
        bar = self.query_one("#warning-bar", Static)
        bound = notice(m.data_wait.share, m.device.get("type"))
        parts: list = [("⚠ ", "bold yellow"), (bound, "yellow")] if bound else []
        if m.warnings:
            count = f"  (+{len(m.warnings) - 1} earlier, in output.log)" if len(m.warnings) > 1 else ""
            parts += [("  ·  " if bound else "⚠ ", "bold yellow"), m.warnings[-1], (count, "dim")]
        if parts:
            bar.update(Text.assemble(*parts))
        bar.display = bool(parts)

    def _scale_panel(self) -> None:
        m = self.model
        plot = self.query_one("#plot-scale", MetricPlot)
        info = self.query_one("#scale-info", Static)
        plot.display = m.has_scaler
        info.styles.text_wrap = "nowrap" if m.has_scaler else "wrap"
        info.styles.max_height = 5 if m.has_scaler else 12
        if not m.has_scaler:
            info.update(Text.assemble(("no GradScaler", "bold"), f" ({m.precision_words or '?'}) · skipped "
                                      f"{m.skipped_total}\n", (no_scaler_why(m.precision), "dim")))
            self.query_one("#p-scale").border_subtitle = ""
            return
        xs, ys = m.scale_s.points()
        bx, by = m.backoffs.points()
        gx, gy = m.growths.points()
        lines = [Line(xs, ys, label="log2 scale", color="magenta")]
        if bx:
            lines.append(Line(bx, by, label="backoff", color="red", marker="▼", scatter=True))
        if gx:
            lines.append(Line(gx, gy, label="growth", color="green", marker="▲", scatter=True))
        plot.update_figure(Figure(lines, log2_ticks=True, legend=False))  # the info below says ▼ / ▲
        self.query_one("#p-scale").border_subtitle = f"scale {fmt_scale(m.scale)}"
        parts: list = [("skipped ", ""), (str(m.skipped_total), "bold red" if m.skipped_total else "bold"),
                       " · ", (f"▼ {m.n_backoff}", "red"), " backoff · ", (f"▲ {m.n_growth}", "green"), " growth"]
        for ev in list(reversed(m.scaler_events))[:SCALER_EVENT_LINES]:
            mark, style = ("▼", "red") if ev["event"] == "backoff" else ("▲", "green")
            line = f"\n{mark} step {ev['step']}: {fmt_scale(ev['old'])}→{fmt_scale(ev['new'])}"
            parts.append((line, style))
            if ev["overflow"]:
                more = ev["n_overflow"] - len(ev["overflow"])
                parts.append(" inf in " + ", ".join(ev["overflow"][:3]) + (f" +{more}" if more > 0 else ""))
        info.update(Text.assemble(*parts, no_wrap=True, overflow="ellipsis"))

    def _mem_panel(self) -> None:
        m = self.model
        lines = []
        gib = 1024 ** 3
        unit, div = ("GiB", gib)
        peaks = [v for v in m.mem_peak.values()]
        if peaks and max(peaks) < gib:
            unit, div = ("MiB", 1024 ** 2)
        for i, (label, series) in enumerate(m.mem.items()):
            xs, ys = series.points()
            lines.append(Line(xs, [y / div for y in ys], label=label, color=COLORS[i % len(COLORS)]))
        self.query_one("#plot-mem", MetricPlot).update_figure(Figure(lines))
        self.query_one("#p-mem").border_subtitle = unit
        parts = []
        for label, (value, total) in m.mem_now.items():
            of = f"/{fmt_bytes(total)}" if total else ""
            peak = m.mem_peak.get(label)
            parts.append(f"{label} {fmt_bytes(value)}{of} (peak {fmt_bytes(peak)})")
        self.query_one("#mem-info", Static).update(Text("\n".join(parts[:4]), no_wrap=True, overflow="ellipsis"))

    # --- actions -----------------------------------------------------------------------------------
    def action_panel(self, index: int) -> None:
        self.active = index
        self._layout(self.size.width, self.size.height)
        if not self.has_class("-compact"):
            panel = self.query_one(f"#p-{PANELS[index][0]}")
            if self.maximized is panel:
                self.minimize()
            else:
                self.maximize(panel, container=False)

    def action_next_panel(self) -> None:
        self.active = (self.active + 1) % len(PANELS)
        self._layout(self.size.width, self.size.height)
        if self.maximized is not None:
            self.maximize(self.query_one(f"#p-{PANELS[self.active][0]}"), container=False)

    def action_restore(self) -> None:
        if self.maximized is not None:
            self.minimize()

    def action_detach(self) -> None:
        self.app.go_home()

    def action_back(self) -> None:
        if self.standalone:
            self.app.exit()
        else:
            self.app.go_home()

    def action_compare(self) -> None:
        self.app.compare_with(self.run_dir)
