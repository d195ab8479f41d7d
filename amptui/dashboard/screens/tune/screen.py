"""Tune: the table and the explanation of an `amptui tune`, live while it searches.

`t` on the home screen starts `amptui tune PRESET --detach` (home/launch.py; like `a` for an A/B:
quitting the dashboard does not stop it) and opens this screen on its result file,
runs/<ID>.tune.json, which the tune rewrites after every trial. Keys: s saves the winner as
<preset>-tuned (a search that ran to its end; one stopped early names no winner), enter opens the
highlighted trial's run, q stops a running search (the result still shows what was measured) and
goes back once it has ended, escape goes back at once. The table and the words under it are
tune/report.py's, as `amptui tune` prints them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import DataTable, Static

from amptui.core import safefile
from amptui.core.errors import UserError
from amptui.core.fmt import shown
from amptui.dashboard.screens.base import DashboardScreen, in_background
from amptui.dashboard.screens.keys import with_reasons
from amptui.dashboard.widgets.keysfooter import KeysFooter
from amptui.dashboard.widgets.scrollhint import show_columns_hint, show_rows_hint
from amptui.jobs import signals
from amptui.tune import plan as T
from amptui.tune import report

REFRESH_S = 1.0
STARTING = ("Starting: the search checks the preset and the toggles, then runs its first trial, fp32 "
            "(the reference every other setup is judged against).")


def refusal_words(log: Path | None) -> str:
    """The Why panel of a tune that refused to start: what happened and what to do."""
    return ("The tune did not start, so nothing was measured. The error above says why and how to fix it: "
            "change the toggles or the preset (escape goes back home) and press t again."
            + (f"\nIts whole output: {log}" if log else ""))


def progress_words(result: dict[str, Any], stopping: bool) -> list[str]:
    """The Why panel while the search runs: what was measured, what runs now, how to stop it."""
    trials = result.get("trials", [])
    measured = [f"{t['candidate']} {t['ms_per_step']:.1f} ms/step" for t in trials if t.get("ms_per_step")]
    running = [t["candidate"] for t in trials if t.get("status") == "running"]
    lines = ["Stopping: the running trial ends at its next record, then the table shows what was measured."
             if stopping else "The search is running; the verdict comes when it ends (q stops it early)."]
    if measured:
        lines.append("Measured so far: " + ", ".join(measured) + ".")
    if running:
        lines.append(f"Now running: {running[-1]}.")
    return lines


class TuneScreen(DashboardScreen):
    BINDINGS = with_reasons([
        Binding("s", "save_winner", "Save winner"),
        Binding("q", "stop_or_back", "Stop / Back"),
        Binding("S", "cancel_tune", "Cancel tune", show=False),  # as S cancels an A/B: the whole search
        Binding("escape", "back", "Back", show=False),
        Binding("q", "back", "Back", show=False),  # q where stop_or_back is off (a read-only dashboard)
    ], ("save_winner",), "tune")

    def __init__(self, result_path: Path, log: Path | None = None, preset: str = "", announce: bool = False):
        super().__init__(id="tune")
        self.announce = announce  # say "tuning … for up to N min" once the search is under way
        self.result_path = Path(result_path)
        self.log_path = log
        self.preset = preset  # for the title before the result file names it
        self.result: dict[str, Any] | None = None
        self.stop_sent = False
        self.error = ""  # why the tune refused to start (its log's one line)

    def compose(self) -> ComposeResult:
        yield Static(self._title("starting…"), id="tune-title")
        yield Static(id="tune-error")  # wraps: the fix at the end of an error stays in sight
        with Vertical(id="tune-table-box"):
            yield DataTable(id="tune-table", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="tune-explain-box"):  # a partial search says more than 80x24 shows
            yield Static(id="tune-explain")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#tune-table-box").border_title = "Trials"
        self.query_one("#tune-explain-box").border_title = "Why"
        self.query_one("#tune-error").display = False
        self.query_one("#tune-explain", Static).update(STARTING)
        table = self.query_one("#tune-table", DataTable)
        for h in T.HEADERS:
            table.add_column(h, key=h)
        show_columns_hint(self, table, self.query_one("#tune-table-box"))
        show_rows_hint(self, self.query_one("#tune-explain-box"))
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

    def _title(self, words: str, result: dict[str, Any] | None = None) -> Text:
        """The title line: always the tune's preset and where the search stands (before the device
        and budget, which a narrow screen may cut)."""
        result = result or {}
        preset = result.get("preset") or self.preset
        parts = [f" · {words}", f" · {result['device_name']}" if result.get("device_name") else "",
                 f" · budget {result['budget_s'] / 60:g} min" if result.get("budget_s") else ""]
        return Text.assemble(("tune", "bold"), (shown(f" {preset}") if preset else "", "bold"),  # a tune file's words
                             *(shown(part) for part in parts))

    def _show(self, result: dict[str, Any] | None) -> None:
        title = self.query_one("#tune-title", Static)
        if result is None:
            error = self._log_error()
            if error and error != self.error:
                self.error = error
                title.update(self._title("did not start"))
                box = self.query_one("#tune-error", Static)
                box.update(Text(shown(error), style="bold red"))
                box.display = True
                self.query_one("#tune-explain", Static).update(refusal_words(self.log_path))
                self.refresh_bindings()
            return
        if result == self.result:
            return
        self.result = result
        self.refresh_bindings()  # s shows once there is a winner to save
        self.query_one("#tune-error").display = False
        if self.announce:  # the search has started (its result file exists): not before, it may refuse
            self.announce = False
            budget = f" for up to {result['budget_s'] / 60:g} min" if result.get("budget_s") else ""
            self.notify(f"tuning {result.get('preset') or self.preset}{budget}: its trials appear in Runs as "
                        f"{result.get('preset') or self.preset}-tune-…", timeout=6)
        title.update(self._title(report.status_words(result, self.stop_sent), result))
        table = self.query_one("#tune-table", DataTable)
        row = table.cursor_row
        table.clear()
        for i, (cells, style) in enumerate(report.rows(result)):
            table.add_row(*(Text(shown(c), style=style) for c in cells), key=f"{i}")
        if row is not None and 0 <= row < table.row_count:
            table.move_cursor(row=row)
        self._explain(result)

    def refusal(self, action: str) -> str | None:
        """s applies once the search has ended with a winner (the footer shows it only then)."""
        if action != "save_winner":
            return None
        if self.error and self.result is None:
            return "the tune did not start: there is nothing to save"
        if self.running:
            return "the search is still running; save the winner when it has ended"
        if not T.winner_of(self.result or {}):
            return f"this tune has no winner to save ({T.no_winner_words(self.result or {})})"
        if (self.result or {}).get("script"):
            return "a script's tune saves no preset: the Why panel names the command that runs its winner"
        return None

    def _explain(self, result: dict[str, Any]) -> None:
        status = result.get("status", "running")
        if status == "running":
            lines = progress_words(result, self.stop_sent)
        else:
            lines = report.lines(result)
            hint = report.save_hint(result, "s")
            lines += [hint] if hint else []
        self.query_one("#tune-explain", Static).update(Text(shown("\n".join(lines), newlines=True)))  # data, not markup

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
        self.app.presets_changed()

    def action_stop_or_back(self) -> None:
        if not self.running or self.result is None:
            self.action_back()
            return
        if self.stop_sent:
            self.notify("stopping: the running trial ends at its next record")
            return
        try:  # what Ctrl-C does to `amptui tune`; only to the process the tune's file proves is it
            signals.prove(self.result, f"tune {self.result.get('tune_id', '')}").interrupt()
        except signals.NotOurs as exc:
            self.notify(str(exc), title="Tune not stopped", severity="error", timeout=8)
            return
        self.stop_sent = True
        self.notify("stopping… the running trial ends at its next record; the table keeps what was measured")
        self.query_one("#tune-title", Static).update(self._title(report.status_words(self.result, True), self.result))
        self._explain(self.result)

    def action_cancel_tune(self) -> None:
        if not self.running or self.result is None:
            self.notify("the tune is not running", severity="warning")
            return
        self.action_stop_or_back()

    def action_back(self) -> None:
        self.app.pop_screen()
