"""The run history: a DataTable of runs, refreshed in place, with runs marked for compare."""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from ...core.fmt import fmt_duration
from ...core.runs import RunInfo

STATUS_STYLE = {"running": "bold green", "completed": "cyan", "stopped": "yellow", "failed": "bold red",
                "killed": "red", "starting": "green"}


def progress_text(r: RunInfo) -> str:
    if r.total_steps:
        return f"{r.step}/{r.total_steps} {100 * min(1.0, r.step / r.total_steps):3.0f}%"
    return str(r.step) if r.step else "-"


class RunTable(DataTable):
    BINDINGS = [Binding("space", "toggle_mark", "Mark", show=True)]

    def __init__(self, **kwargs):
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.marked: list[str] = []  # run ids, in the order they were marked (the first is the baseline)
        self.runs: dict[str, RunInfo] = {}
        self._order: list[str] = []

    def on_mount(self) -> None:
        self.add_column("", key="mark", width=2)
        self.add_column("status", key="status")
        self.add_column("preset", key="preset")
        self.add_column("precision", key="precision")
        self.add_column("progress", key="progress")
        self.add_column("duration", key="duration")
        self.add_column("run id", key="id")

    def _mark_cell(self, run_id: str) -> Text:
        if run_id in self.marked:
            return Text(str(self.marked.index(run_id) + 1), style="bold reverse magenta")
        return Text(" ")

    def _cells(self, r: RunInfo) -> list:
        return [self._mark_cell(r.run_id), Text(r.status, style=STATUS_STYLE.get(r.status, "")), r.preset or "-",
                r.precision or "-", progress_text(r), fmt_duration(r.duration_s), r.run_id]

    def set_runs(self, runs: list[RunInfo]) -> None:
        order = [r.run_id for r in runs]
        self.runs = {r.run_id: r for r in runs}
        self.marked = [m for m in self.marked if m in self.runs]
        if order != self._order:
            current = self.highlighted_run()
            self.clear()
            for r in runs:
                self.add_row(*self._cells(r), key=r.run_id)
            self._order = order
            if current in self.runs:
                self.move_cursor(row=order.index(current), animate=False)
        else:
            keys = ("mark", "status", "preset", "precision", "progress", "duration", "id")
            for r in runs:
                for key, value in zip(keys, self._cells(r)):
                    if key == "id":
                        continue
                    self.update_cell(r.run_id, key, value)

    def highlighted_run(self) -> str | None:
        if not self._order or self.cursor_row is None or not (0 <= self.cursor_row < len(self._order)):
            return None
        return self._order[self.cursor_row]

    def action_toggle_mark(self) -> None:
        run_id = self.highlighted_run()
        if run_id is None:
            return
        if run_id in self.marked:
            self.marked.remove(run_id)
        else:
            self.marked.append(run_id)
        for rid in self._order:
            self.update_cell(rid, "mark", self._mark_cell(rid))
