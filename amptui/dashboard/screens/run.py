"""The run screen, attached to a run folder, live or finished: the header lines (run_header.py), the
status panel and the keys that follow the status (run_controls.py), then the loss / lr / loss-scale /
memory / throughput panels and the output log, drawn from a RunModel that a worker keeps reading."""

from __future__ import annotations

import time
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical, VerticalScroll
from textual.widgets import Footer, ProgressBar, Static
from textual.worker import get_current_worker

from amptui.core.fmt import shown
from amptui.core.inputbound import notice
from amptui.core.run.runfiles import OUTPUT_LOG
from amptui.dashboard.picture import save_screen
from amptui.dashboard.runmodel import RunModel
from amptui.dashboard.runtail import RunTail
from amptui.dashboard.screens.base import DashboardScreen, in_background
from amptui.dashboard.screens.keys import KeysMixin, with_reasons
from amptui.dashboard.screens.run_controls import RunControls
from amptui.dashboard.screens.run_header import header_line, progress_fraction, progress_line, stats_line
from amptui.dashboard.screens.run_numerics import NUMERICS_KEY, RunNumerics
from amptui.dashboard.screens.run_panels import RunPanels
from amptui.dashboard.widgets.heatmap import HeatMapView
from amptui.dashboard.widgets.plot import MetricPlot
from amptui.dashboard.widgets.runlog import RunLog

FLUSH_HZ = 4
PLOT_HZ = 2
PANELS = (("loss", "loss"), ("lr", "lr"), ("scale", "loss scale"), ("mem", "memory"),
          ("speed", "throughput"), ("log", "log"))
TITLES = {"loss": "loss", "lr": "learning rate", "scale": "loss scale (log2)", "mem": "memory",
          "speed": "throughput", "log": OUTPUT_LOG}
COMPACT_W, COMPACT_H = 100, 30


class Panel(Vertical):
    ALLOW_MAXIMIZE = True


class PanelTabs(Static):
    """The compact layout's tab line: a click picks a panel, like its number key."""

    def on_click(self, event) -> None:
        x = 1  # left padding
        for i, (_, name) in enumerate(PANELS):
            width = len(f" {i + 1} {name} ") + 1
            if x <= event.x < x + width and isinstance(self.screen, RunScreen):
                self.screen.action_panel(i)
                return
            x += width


class RunScreen(RunPanels, RunNumerics, RunControls, KeysMixin, DashboardScreen):
    # One line per key; the footer, the help screen (? / F1) and check_action all read this list.
    BINDINGS = with_reasons([
        Binding("s", "stop", "Stop"),
        Binding("R", "resume", "Resume"),
        Binding("d", "detach", "Detach"),
        Binding("q", "back", "Back"),
        Binding("c", "compare", "Compare"),
        Binding("i", "info", "Info"),
        Binding("n", "next_panel", "Next panel"),
        Binding("t", "x_axis", "Time axis"),
        Binding("p", "picture", "SVG"),
        Binding("escape", "restore", "Restore", show=False),
    ], ("stop", "resume"), "run") + [
        Binding(str(i + 1), f"panel({i})", f"panel: {name}", show=False, id=f"run.panel_{name.replace(' ', '_')}")
        for i, (_, name) in enumerate(PANELS)] + [
        Binding(NUMERICS_KEY, "numerics_panel", "panel: range headroom", show=False, id="run.panel_range_headroom")]
    KEY_HELP = {"1-6": "show that panel (at 80x24) / maximize it (larger terminals); again restores"}

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
                with VerticalScroll(id="scale-events"):
                    yield Static(id="scale-list")
            with Panel(id="p-numerics", classes="panel"):  # shown for runs with range samples
                yield HeatMapView(id="heatmap")
                yield Static(id="numerics-info", classes="info")
            with Panel(id="p-mem", classes="panel"):
                yield MetricPlot(id="plot-mem")
                yield Static(id="mem-info", classes="info")
            with Panel(id="p-speed", classes="panel"):
                yield MetricPlot(id="plot-speed")
                yield Static(id="speed-info", classes="info")
            with Panel(id="p-log", classes="panel"):
                yield RunLog(max_lines=400, id="log")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        for i, (key, _name) in enumerate(PANELS):
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
            self.query_one(f"#p-{key}").set_class(i == self.active and not self.numerics_active, "-active")
        self.query_one("#p-numerics").set_class(self.numerics_active, "-active")
        self._tabs()

    def _tabs(self) -> None:
        parts: list[str | tuple[str, str]] = []
        for i, (_key, name) in enumerate(PANELS):
            style = "bold reverse" if i == self.active and not self.numerics_active else "dim"
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
                self._draw()
            new_lines = m.log_seq - self._log_seq
            lines = list(m.log_lines)[-new_lines:] if new_lines > 0 else []
            self._log_seq = m.log_seq
        if lines:
            log = self.query_one("#log", RunLog)
            for line in lines:
                log.add(Text(shown(line)))

    def _header(self, now: float) -> None:
        m = self.model
        self._set("#run-header", header_line(m, now))
        self._set("#progress-text", progress_line(m))
        self._set("#stats", stats_line(m))
        bar = self.query_one("#progress", ProgressBar)
        fraction = progress_fraction(m)
        untold = fraction is None and m.start is not None  # the run said no total: no bar, no "0%"
        if bar.display == untold:
            bar.display = not untold
        if bar.progress != (fraction or 0.0):
            bar.update(progress=fraction or 0.0)

    def _set(self, selector: str, text: Text) -> None:
        """Update a line only when it changed: an idle screen draws nothing."""
        if self._shown.get(selector) != text:
            self._shown[selector] = text
            self.query_one(selector, Static).update(text)

    def _draw(self) -> None:
        m = self.model
        self._plots()
        self._numerics_panel()
        # an input-bound run, then warnings (odd AMP combinations, loss-scale alarms): the newest, and how many
        bar = self.query_one("#warning-bar", Static)
        bound = notice(m.data_wait.share, m.device.get("type"))
        parts: list = [("⚠ ", "bold yellow"), (bound, "yellow")] if bound else []
        if m.warnings:
            count = f"  (+{len(m.warnings) - 1} earlier, in output.log)" if len(m.warnings) > 1 else ""
            parts += [("  ·  " if bound else "⚠ ", "bold yellow"), shown(m.warnings[-1]), (count, "dim")]
        if parts:
            bar.update(Text.assemble(*parts))
        bar.display = bool(parts)

    # --- actions -----------------------------------------------------------------------------------
    def action_panel(self, index: int) -> None:
        self.active = index
        self.numerics_active = False
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

    def action_x_axis(self) -> None:
        """Steps or training time along every panel's x axis."""
        self.x_unit = "seconds" if self.x_unit == "step" else "step"
        with self.model.lock:
            self._draw()
        self.notify(f"x axis: {'training time' if self.x_unit == 'seconds' else 'optimizer steps'}", timeout=3)

    def action_picture(self) -> None:
        """The screen as drawn now, as SVG, into the runs folder."""
        try:
            path = save_screen(self.app, self.app.runs_root, f"{self.run_dir.name}-screen")
        except OSError as exc:
            self.notify(str(exc), title="No picture saved", severity="error", timeout=8)
            return
        self.notify(f"screen saved to {path}", title="Saved SVG", timeout=10)

    def drawn(self) -> bool:
        """Everything read so far is on the screen (a picture taken now shows the run as read)."""
        m = self.model
        with m.lock:
            written = (not m.loading and (m.records > 0 or bool(m.damaged)) and self._rendered == m.version
                       and self._log_seq == m.log_seq)  # damaged: nothing more will come to read
        # a written log line shows once the log has scrolled to it (after the next refresh)
        return written and self.query_one("#log", RunLog).is_vertical_scroll_end

    def action_detach(self) -> None:
        self.app.go_home()

    def action_back(self) -> None:
        if self.standalone:
            self.app.exit()
        else:
            self.app.go_home()

    def action_compare(self) -> None:
        self.app.compare_with(self.run_dir)
