"""The run screen, attached to a run folder, live or finished: the header lines (header.py), the
status panel and the keys that follow the status (controls.py), then the panels of the registry
(amptui/dashboard/panels/: loss, lr, loss scale, memory, throughput, the output log, and for runs
with range samples the heat map), drawn from a RunModel that a worker keeps reading. The panels'
number keys, tabs, titles and help follow the registry."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal
from textual.message import Message
from textual.widgets import ProgressBar, Static
from textual.worker import get_current_worker

from amptui.core.fmt import shown
from amptui.core.inputbound import notice
from amptui.core.planning.plan import plan_for_run
from amptui.dashboard.panels import PanelView, RunPanel, plots, registry
from amptui.dashboard.panels.base import shared_x_range
from amptui.dashboard.picture import save_screen
from amptui.dashboard.runmodel import RunModel
from amptui.dashboard.runtail import RunTail
from amptui.dashboard.screens.base import DashboardScreen, in_background
from amptui.dashboard.screens.keys import with_reasons
from amptui.dashboard.screens.plan.screen import show_plan
from amptui.dashboard.screens.run.controls import RunStatusPanel
from amptui.dashboard.screens.run.header import first_look, header_line, progress_fraction, progress_line, stats_line
from amptui.dashboard.widgets.keysfooter import KeysFooter
from amptui.dashboard.widgets.wordline import WordLine

FLUSH_HZ = 4
TAIL_LOOK_S, TAIL_IDLE_LOOK_S = 0.1, 1.0  # between the tail's looks at the files: a live run, a finished one
PLOT_HZ = 2
NUMBERED = registry()  # by number key: the always-shown panels (1-6), then the optional ones (7)
PANELS = [cls for cls in NUMBERED if not cls.OPTIONAL]  # the tabs, and what `n` cycles through
IN_PLACE = sorted(NUMBERED, key=lambda cls: cls.PLACE)  # the grid's order
COMPACT_W, COMPACT_H = 100, 30


class PanelTabs(Static):
    """The compact layout's tab line: a click picks a panel, like its number key."""

    class Picked(Message):
        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def on_click(self, event) -> None:
        x = 1  # left padding
        for i, cls in enumerate(PANELS):
            width = len(f" {i + 1} {cls.NAME} ") + 1
            if x <= event.x < x + width:
                self.post_message(self.Picked(i))
                return
            x += width


def _panel_binding(index: int, cls: type[RunPanel]) -> Binding:
    return Binding(str(index + 1), f"panel({index})", f"panel: {cls.NAME}", show=False,
                   id=f"run.panel_{cls.NAME.replace(' ', '_')}")


class RunRead(Message):
    """The one message the tail's worker posts: the model has changed since its last one (records,
    log lines, the writer's liveness). At most one waits at a time; the screen draws on it, and
    FLUSH_HZ times a second besides (the clock, and a redraw the plot rate held back)."""


class RunScreen(DashboardScreen):
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
        Binding("P", "plan", "Plan", show=False),  # this plan run's plan, else its preset's newest
        Binding("S", "cancel_ab", "Cancel A/B", show=False),  # the whole A/B this run is part of
        Binding("escape", "restore", "Restore", show=False),
    ], ("stop", "resume"), "run") + [_panel_binding(i, cls) for i, cls in enumerate(NUMBERED)]
    KEY_HELP = {f"1-{len(PANELS)}": "show that panel (at 80x24) / maximize it (larger terminals); again restores"}

    def __init__(self, run_dir: Path, *, standalone: bool = False):
        super().__init__(id=None)
        self.run_dir = Path(run_dir)
        self.standalone = standalone  # opened by `amptui watch`: q quits, d goes home
        self.model = RunModel(self.run_dir.name, plots())
        self.x_unit = "step"  # or "seconds" (the `t` key)
        self._rendered = -1
        self.flushes = 0  # flush() calls so far (tests wait for one more after drawn())
        self._bad_lines_reported = False
        self._plotted = 0.0
        self.active = 0  # the always-shown panel the compact layout shows (and `n` moves from)
        self.optional_active: RunPanel | None = None  # an optional panel (the heat map) picked by its key
        self._shown: dict[str, Text] = {}
        self._first_look: RunModel | None = None  # the header's until the tail has read the history
        self.panels = [cls(NUMBERED.index(cls) + 1) for cls in IN_PLACE]  # in the grid's order
        self._read_waiting = False  # a RunRead posted and not yet handled
        self._tail_stop = threading.Event()  # the screen is gone: the tail stops at once, not after its sleep

    def numbered(self, index: int) -> RunPanel:
        """The panel number key index+1 shows."""
        return next(p for p in self.panels if type(p) is NUMBERED[index])

    # --- layout -----------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield WordLine(id="run-header")
        with Horizontal(id="progress-row"):
            yield ProgressBar(total=1.0, show_eta=False, id="progress")
            yield WordLine(id="progress-text")
        yield WordLine(id="stats")
        yield Static(id="warning-bar")
        yield RunStatusPanel(self.run_dir, self.model)
        yield PanelTabs(id="panel-tabs")
        with Grid(id="panels"):
            for panel in self.panels:
                panel.set_class(panel.OPTIONAL, "-optional")
                yield panel
        yield KeysFooter(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        if self not in self.app.screen_stack:  # popped before its Mount came (Back right after the push):
            return                             # its widgets are being removed, nothing to show or read
        self.query_one("#error-panel").display = False
        self.query_one("#warning-bar").display = False
        self._layout(self.size.width, self.size.height)
        self._first_look = first_look(self.run_dir)
        self.flush()
        self.set_interval(1 / FLUSH_HZ, self.flush)
        self.tail()

    def on_unmount(self) -> None:
        # The tail sleeps up to a second between looks at a finished run; quitting waits for its thread.
        self._tail_stop.set()

    def on_resize(self, event) -> None:
        self._layout(event.size.width, event.size.height)

    def _layout(self, width: int, height: int) -> None:
        compact = width < COMPACT_W or height < COMPACT_H
        self.set_class(compact, "-compact")
        for i in range(len(PANELS)):
            self.numbered(i).set_class(i == self.active and self.optional_active is None, "-active")
        for panel in self.panels:
            if panel.OPTIONAL:
                panel.set_class(panel is self.optional_active, "-active")
        self._grid()
        self._tabs()

    def _grid(self) -> None:
        """Two rows of the panels shown (the last one spanning what is left), or one panel at a time
        in the compact layout."""
        compact = self.has_class("-compact")
        shown = [p for p in self.panels if not p.OPTIONAL or p.has_class("-shown")]
        columns = 1 if compact else -(-len(shown) // 2)
        grid = self.query_one("#panels", Grid)
        grid.styles.grid_size_columns = columns
        grid.styles.grid_size_rows = 1 if compact else 2
        for panel in shown:
            panel.styles.column_span = 1
        if shown and not compact:
            shown[-1].styles.column_span = 2 * columns - len(shown) + 1

    def _tabs(self) -> None:
        parts: list[str | tuple[str, str]] = []
        for i, cls in enumerate(PANELS):
            style = "bold reverse" if i == self.active and self.optional_active is None else "dim"
            parts.append((f" {i + 1} {cls.NAME} ", style))
            parts.append(" ")
        self.query_one("#panel-tabs", Static).update(Text.assemble(*parts))

    def on_panel_tabs_picked(self, message: PanelTabs.Picked) -> None:
        self.action_panel(message.index)

    # --- live data -------------------------------------------------------------------------------
    @in_background("run-tail", "reading the run's files")
    def tail(self) -> None:
        """Read the run's files into the model, and say so (RunRead) when it changed."""
        worker = get_current_worker()
        tail = RunTail(self.run_dir, self.model, alive=self.app.process_alive)
        tail.prefill()
        idle, told = 0, -1
        while not worker.is_cancelled and not self._tail_stop.is_set():
            try:
                more = tail.poll()
            except OSError:
                more = False
            if self.model.version != told and not self._read_waiting:
                told, self._read_waiting = self.model.version, True
                self.post_message(RunRead())  # thread-safe: handled on the UI thread
            if more:
                continue
            finished = self.model.run.end is not None or self.model.status == "killed"
            idle = idle + 1 if finished else 0
            # A finished run can still be resumed (new records appended): keep looking, slowly.
            self._tail_stop.wait(TAIL_IDLE_LOOK_S if idle > 10 else TAIL_LOOK_S)

    def on_run_read(self, message: RunRead) -> None:
        self._read_waiting = False
        self.flush()

    def flush(self) -> None:
        """Render the model if it changed (coalesces any number of records into one redraw)."""
        self.flushes += 1  # how many have run (a test's "drawn and flushed since")
        now = self.app.clock()
        m = self.model
        with m.lock:
            changed = m.version != self._rendered
            self._header(now)
            if not changed:
                return
            self.query_one(RunStatusPanel).show(self.has_class("-compact"), self.size.width)
            if m.bad_lines and not self._bad_lines_reported:
                self._bad_lines_reported = True  # said once; the rest of the stream is read as usual
                self.notify(f"skipped {m.bad_lines} unreadable line(s) in the event files; everything else was "
                            "read", severity="warning", timeout=8)
            # plots cost a few ms each: redraw them at most PLOT_HZ times a second
            tick = time.monotonic()
            if tick - self._plotted >= 1 / PLOT_HZ or m.run.end is not None:
                self._plotted = tick
                self._rendered = m.version
                self._draw()
            for panel in self.panels:
                panel.follow(m)  # what it shows as it arrives (the log's new lines)

    def _header(self, now: float) -> None:
        m = self.model
        if m.loading and self._first_look is not None:  # until the history is read: what its ends said
            m = self._first_look
        elif self._first_look is not None:
            self._first_look = None
        self._set("#run-header", header_line(m, now))
        self._set("#progress-text", progress_line(m))
        self._set("#stats", stats_line(m))
        bar = self.query_one("#progress", ProgressBar)
        fraction = progress_fraction(m)
        untold = fraction is None and m.run.start is not None  # the run said no total: no bar, no "0%"
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
        regrid = False
        for panel in self.panels:
            if panel.OPTIONAL and panel.has_data(m) != panel.has_class("-shown"):
                panel.set_class(not panel.has_class("-shown"), "-shown")
                self.set_class(panel.has_class("-shown"), f"-{panel.KEY}")
                regrid = True
        if regrid:
            self._grid()
        held = [series for panel in self.panels for series in panel.held(m)]
        view = PanelView(m, self.x_unit, shared_x_range(m, self.x_unit, held))
        for panel in self.panels:
            panel.draw(view)
        # an input-bound run, then warnings (odd AMP combinations, loss-scale alarms): the newest, and how many
        bar = self.query_one("#warning-bar", Static)
        bound = notice(m.run.data_wait.share, m.run.device.get("type"))
        parts: list = [("⚠ ", "bold yellow"), (bound, "yellow")] if bound else []
        if m.run.warnings:
            count = f"  (+{len(m.run.warnings) - 1} earlier, in output.log)" if len(m.run.warnings) > 1 else ""
            parts += [("  ·  " if bound else "⚠ ", "bold yellow"), shown(m.run.warnings[-1]), (count, "dim")]
        if parts:
            bar.update(Text.assemble(*parts))
        bar.display = bool(parts)

    # --- actions -----------------------------------------------------------------------------------
    def action_panel(self, index: int) -> None:
        panel = self.numbered(index)
        if panel.OPTIONAL:
            self._optional_panel(panel)
            return
        self.active = index
        self.optional_active = None
        self._layout(self.size.width, self.size.height)
        if not self.has_class("-compact"):
            if self.maximized is panel:
                self.minimize()
            else:
                self.maximize(panel, container=False)

    def _optional_panel(self, panel: RunPanel) -> None:
        """An optional panel's key (7: the heat map): it alone (compact layout) or maximized; again
        restores. A run without its data says so."""
        if not panel.has_class("-shown"):
            self.notify(panel.MISSING, timeout=5)
            return
        picked = self.optional_active is not panel or not panel.has_class("-active")
        self.optional_active = panel if picked else None
        panel.set_class(picked, "-active")
        for other in self.panels:
            if other is not panel and picked:
                other.set_class(False, "-active")
        if not self.has_class("-compact"):
            if self.maximized is panel:
                self.minimize()
            else:
                self.maximize(panel, container=False)

    def action_next_panel(self) -> None:
        self.active = (self.active + 1) % len(PANELS)
        self._layout(self.size.width, self.size.height)
        if self.maximized is not None:
            self.maximize(self.numbered(self.active), container=False)

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
            return (not m.loading and (m.records > 0 or bool(m.damaged)) and self._rendered == m.version
                    and all(panel.caught_up(m) for panel in self.panels))  # damaged: nothing more will come

    # --- the status's keys: the status panel decides whether they apply, and does them ---------------
    def refusal(self, action: str) -> str | None:
        # a child of the screen (compose): the footer asks for every key at each refresh, and a deep
        # query walked every plot and panel each time
        panels = self.query_children(RunStatusPanel)
        if not panels:  # asked before the screen is composed
            return "the run has not been read yet" if action in ("stop", "resume") else None
        return panels.first().refusal(action)

    def on_run_status_panel_keys_changed(self, message: RunStatusPanel.KeysChanged) -> None:
        self.refresh_bindings()

    def action_stop(self) -> None:
        self.query_one(RunStatusPanel).stop()

    def action_resume(self) -> None:
        self.query_one(RunStatusPanel).resume()

    def action_info(self) -> None:
        self.query_one(RunStatusPanel).info()

    def action_detach(self) -> None:
        self.app.go_home()

    def action_back(self) -> None:
        if self.standalone:
            self.app.exit()
        else:
            self.app.go_home()

    def action_compare(self) -> None:
        self.app.compare_with(self.run_dir)

    def action_plan(self) -> None:
        show_plan(self, self.model.run.preset, plan_for_run(self.app.runs_root, self.run_dir, self.model.run.preset))

    def action_cancel_ab(self) -> None:
        from amptui.dashboard.screens.ab.cancel import cancel_ab_of

        self.say(cancel_ab_of(self.app.runs_root, self.run_dir.name))
