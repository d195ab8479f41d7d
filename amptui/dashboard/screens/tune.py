"""Tune: the table and the explanation of an `amptui tune`, live while it searches.

`t` on the home screen starts `amptui tune PRESET --detach` (home_launch.py; like `a` for an A/B:
quitting the dashboard does not stop it) and opens this screen on its result file,
runs/<ID>.tune.json, which the tune rewrites after every trial. Keys: s saves the winner as
<preset>-tuned, enter opens the highlighted trial's run, q stops a running search (the result
still shows what was measured) and goes back once it has ended, escape goes back at once.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Footer, Static

from amptui.core import safefile
from amptui.core.errors import UserError
from amptui.dashboard.screens.base import DashboardScreen, in_background
from amptui.dashboard.screens.keys import named
from amptui.tune import plan as T

REFRESH_S = 1.0


class TuneScreen(DashboardScreen):
    BINDINGS = named("tune", [
        Binding("s", "save_winner", "Save winner"),
        Binding("q", "stop_or_back", "Stop / Back"),
        Binding("escape", "back", "Back", show=False),
    ])

    def __init__(self, result_path: Path, log: Path | None = None):
        super().__init__(id="tune")
        self.result_path = Path(result_path)
        self.log_path = log
        self.result: dict[str, Any] | None = None
        self.stop_sent = False

    def compose(self) -> ComposeResult:
        yield Static("tune: starting…", id="tune-title")
        with Vertical(id="tune-table-box"):
            yield DataTable(id="tune-table", cursor_type="row", zebra_stripes=True)
        with Vertical(id="tune-explain-box"):
            yield Static(id="tune-explain")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#tune-table-box").border_title = "Trials"
        self.query_one("#tune-explain-box").border_title = "Why"
        table = self.query_one("#tune-table", DataTable)
        for h in T.HEADERS:
            table.add_column(h, key=h)
        self.load()
        self.set_interval(REFRESH_S, self.load)

    @property
    def running(self) -> bool:
        return self.result is None or self.result.get("status") == "running"

    @in_background("tune-load", "reading the tune's result")
    def load(self) -> None:
        try:
            result = T.read_result(self.result_path)
        except UserError:  # not written yet (the tune is starting) or mid-replace
            result = None
        self.app.from_thread(self._show, result)

    def _show(self, result: dict[str, Any] | None) -> None:
        title = self.query_one("#tune-title", Static)
        if result is None:
            error = self._log_error()
            title.update(Text(error, style="red") if error else "tune: starting…")
            return
        if result == self.result:
            return
        self.result = result
        status = result.get("status", "running")
        words = {"running": "searching…", "done": "done", "interrupted": "stopped (partial result)"}.get(status, status)
        title.update(Text.assemble(("tune ", "bold"), (result["preset"], "bold"), f" · {result.get('device_name', '')}"
                                   f" · budget {result.get('budget_s', 0) / 60:g} min · {words}"))
        table = self.query_one("#tune-table", DataTable)
        row = table.cursor_row
        table.clear()
        for i, t in enumerate(result.get("trials", [])):
            verdict = t.get("verdict") or ""
            style = "bold green" if verdict.startswith("WINNER") else \
                ("red" if verdict.startswith(("rejected", "out of memory")) else
                 ("dim" if t.get("status") == "skipped" else ""))
            table.add_row(*(Text(c, style=style) for c in T.cells(t)), key=f"{i}")
        if row is not None and 0 <= row < table.row_count:
            table.move_cursor(row=row)
        lines = list(result.get("explanation") or []) + T.notes(result)
        if status == "running":
            lines = ["The search is running; the verdict comes when it ends (q stops it early)."]
        elif result.get("winner"):
            lines.append("s saves the winner as preset " + result["preset"] + "-tuned.")
        self.query_one("#tune-explain", Static).update("\n".join(lines))

    def _log_error(self) -> str:
        """The one-line error of a tune that refused to start (bad toggles, no data, ...)."""
        try:
            tail = safefile.read_tail(self.log_path, 64 * 1024) if self.log_path else b""
            lines = tail.decode("utf-8", "replace").splitlines()
        except OSError:
            return ""
        return next((line.removeprefix("amptui: ") for line in lines if line.startswith("amptui: error:")), "")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        key = event.row_key.value  # the trial's index (rows are added with key=f"{i}")
        if not self.result or key is None:
            return
        trial = self.result["trials"][int(key)]
        if trial.get("run_id"):
            self.app.open_run(Path(self.result_path.parent) / trial["run_id"])

    def action_save_winner(self) -> None:
        result = self.result
        if self.running or result is None:  # no result yet: the search is starting
            self.notify("the search is still running; save the winner when it has ended", severity="warning")
            return
        try:
            path = T.save_winner(result)
        except UserError as exc:
            self.notify(str(exc), title="Not saved", severity="error", timeout=8)
            return
        self.notify(f"saved preset {result['preset']}-tuned to {path}", timeout=8)
        home = self.app.home()
        if home is not None:
            home.load_presets()

    def action_stop_or_back(self) -> None:
        if not self.running or self.result is None:
            self.action_back()
            return
        if self.stop_sent:
            self.notify("stopping: the running trial ends at its next record")
            return
        try:
            os.kill(int(self.result["pid"]), signal.SIGINT)  # what Ctrl-C does to `amptui tune`
        except (OSError, KeyError, ValueError):
            self.action_back()
            return
        self.stop_sent = True
        self.notify("stopping the search; the table keeps what was measured")

    def action_back(self) -> None:
        self.app.pop_screen()
