"""The run history: a DataTable of runs, refreshed in place, with runs marked for compare."""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from amptui.core import trust
from amptui.core.fmt import fmt_duration, shown
from amptui.core.run.runs import RunInfo

STATUS_STYLE = {"running": "bold green", "completed": "cyan", "stopped": "yellow", "failed": "bold red",
                "killed": "red", "damaged": "bold red", "starting": "green"}


def short_ids(run_ids: list[str]) -> dict[str, str]:
    """The shortest tail of each id (dash-separated parts, from the end) that tells it apart from
    the others: `8ab8` for `20261121-231544-quickstart-8ab8`, so rows differ even at 80 columns."""
    out = {}
    for run_id in run_ids:
        parts = run_id.split("-")
        for n in range(1, len(parts) + 1):
            tail = "-".join(parts[-n:])
            if not any(o != run_id and (o == tail or o.endswith("-" + tail)) for o in run_ids):
                break
        out[run_id] = tail
    return out


def matches(r: RunInfo, words: list[str], group: str = "") -> bool:
    """The filter: every word is found in the preset, status, precision, A/B group or id."""
    hay = " ".join((r.preset, trust.mark(r.code, r.code_given_here), r.status, r.precision, group, r.run_id)).lower()
    return all(w in hay for w in words)


def progress_text(r: RunInfo) -> str:
    if r.total_steps:
        return f"{r.step}/{r.total_steps} {100 * min(1.0, r.step / r.total_steps):3.0f}%"
    return str(r.step) if r.step else "-"


def preset_cell(r: RunInfo) -> Text:
    """The preset, marked when the run's config names code (core/trust.py): [code] given here,
    [foreign code] not (a resume asks first)."""
    mark = trust.mark(r.code, r.code_given_here)
    text = Text(r.preset or "-")
    if mark:
        text.append(" " + mark, style="bold yellow" if r.code_given_here else "bold red")
    return text


class RunTable(DataTable):
    BINDINGS = [Binding("space", "toggle_mark", "Mark", show=True)]

    def __init__(self, **kwargs):
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.marked: list[str] = []  # run ids, in the order they were marked (the first is the baseline)
        self.runs: dict[str, RunInfo] = {}
        self.groups: dict[str, str] = {}   # run id -> A/B group label (ab1, ab2, ...)
        self.filter_words: list[str] = []
        self.total = 0                      # runs before the filter
        self._order: list[str] = []
        self._short: dict[str, str] = {}

    def on_mount(self) -> None:
        self.add_column("", key="mark", width=2)
        self.add_column("run", key="id")
        self.add_column("A/B", key="group")
        self.add_column("status", key="status")
        self.add_column("preset", key="preset")
        self.add_column("precision", key="precision")
        self.add_column("progress", key="progress")
        self.add_column("duration", key="duration")

    def _mark_cell(self, run_id: str) -> Text:
        if run_id in self.marked:
            return Text(str(self.marked.index(run_id) + 1), style="bold reverse magenta")
        return Text(" ")

    def _cells(self, r: RunInfo) -> list:
        group = self.groups.get(r.run_id, "")
        return [self._mark_cell(r.run_id), Text(self._short.get(r.run_id, r.run_id), style="bold"),
                Text(group, style="magenta"), Text(r.status, style=STATUS_STYLE.get(r.status, "")),
                preset_cell(r), Text(shown(r.precision or "-")), progress_text(r),
                fmt_duration(r.duration_s)]

    def set_runs(self, runs: list[RunInfo], groups: dict[str, str] | None = None) -> None:
        if groups is not None:
            self.groups = groups
        self.total = len(runs)
        short = short_ids([r.run_id for r in runs])
        runs = [r for r in runs if matches(r, self.filter_words, self.groups.get(r.run_id, ""))]
        order = [r.run_id for r in runs]
        self.runs = {r.run_id: r for r in runs}
        self.marked = [m for m in self.marked if m in short]
        if order != self._order or short != self._short:
            self._short = short
            current = self.highlighted_run()
            self.clear()
            for r in runs:
                self.add_row(*self._cells(r), key=r.run_id)
            self._order = order
            if current in self.runs:
                self.move_cursor(row=order.index(current), animate=False)
        else:
            keys = ("mark", "id", "group", "status", "preset", "precision", "progress", "duration")
            changed = False
            for r in runs:
                row = self.get_row(r.run_id)
                for key, old, value in zip(keys, row, self._cells(r), strict=False):
                    if key != "id" and old != value:
                        self.update_cell(r.run_id, key, value)
                        changed = True
            if changed:
                # Each update makes every cached cell and line of the table stale (their keys hold
                # an update count), yet they stay in its LRU caches (10,000 cells, 1,000 lines, rows)
                # until pushed out: tens of MB for a list redrawn every 2 s. Drop them now.
                self.notify_style_update()

    @property
    def run_ids(self) -> list[str]:
        """The run ids the table shows (after the filter), top to bottom."""
        return list(self._order)

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
        self.screen.refresh_bindings()
