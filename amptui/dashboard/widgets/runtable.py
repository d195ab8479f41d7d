"""The run history: a DataTable of runs, refreshed in place, with runs marked for compare."""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.widgets import DataTable

from amptui.core.distribution import precision_labels
from amptui.core.fmt import fmt_duration, shown
from amptui.core.run import trust
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
    """The filter: every word is found in the preset, status, precision (with "fsdp"/"ddp"), A/B group or id."""
    hay = " ".join((r.preset, trust.mark(r.code, r.code_given_here), r.status_shown, r.precision_label, group,
                    r.run_id)).lower()
    return all(w in hay for w in words)


# (key, header) of each column, left to right. The preset column gives way when the table is too
# wide for the screen (long tune-trial names), so the progress and duration stay in sight.
COLUMNS = (("mark", ""), ("id", "run"), ("group", "A/B"), ("status", "status"), ("preset", "preset"),
           ("precision", "precision"), ("progress", "progress"), ("duration", "duration"))
ELASTIC = "preset"
ELASTIC_MIN = 10
# Then the precision gives way, to shorter forms ("bf16+reduce FSDP x2" -> "bf16+reduce FSDP" ->
# "bf16+reduce", then cut in the middle): an FSDP A/B's labels are long.
THEN_ELASTIC, THEN_MIN = "precision", 12


def fit(text: Text, width: int) -> Text:
    """`text` cut to `width` cells with an ellipsis in the middle, so both ends stay readable:
    `quickstart-tune-8f3a-12` -> `quicks…8f3a-12` (a trial's number is at its end)."""
    if text.cell_len <= width:
        return text
    if width < 3:
        return text[:width]
    head = (width - 1) // 2
    tail = width - 1 - head
    plain = text.plain
    out = text[:head]
    out.append("…", style="dim")
    out.append_text(text[len(plain) - tail:])
    return out


def cell_width(cell: str | Text) -> int:
    return cell.cell_len if isinstance(cell, Text) else cell_len(cell)


def progress_text(r: RunInfo) -> str:
    if r.total_steps:
        return f"{r.step}/{r.total_steps} {100 * min(1.0, r.step / r.total_steps):3.0f}%"
    return str(r.step) if r.step else "-"


def precision_cell(r: RunInfo, width: int | None = None) -> Text:
    """The precision and how the run was spread ("bf16 FSDP x2"), in its longest form that fits `width`."""
    forms = precision_labels(r.precision, r.dist)
    return Text(shown(next((f for f in forms if width is None or cell_len(f) <= width), forms[-1])))


def preset_cell(r: RunInfo) -> Text:
    """The preset (a script run: its file and arguments), marked when the run's config names code (core/run/trust.py): [code] given here,
    [foreign code] not (a resume asks first)."""
    mark = trust.mark(r.code, r.code_given_here)
    text = Text(shown(r.script_line or r.preset or "-"))  # a script run by its file and arguments: two told apart
    if mark:
        text.append(" " + mark, style="bold yellow" if r.code_given_here else "bold red")
    return text


class RunTable(DataTable):
    BINDINGS = [Binding("space", "toggle_mark", "Mark", show=True),
                Binding("home", "first_run", "First run", show=False),  # DataTable's own scroll sideways
                Binding("end", "last_run", "Last run", show=False)]

    def action_first_run(self) -> None:
        if self.row_count:
            self.move_cursor(row=0)

    def action_last_run(self) -> None:
        if self.row_count:
            self.move_cursor(row=self.row_count - 1)

    def __init__(self, **kwargs):
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.marked: list[str] = []  # run ids, in the order they were marked (the first is the baseline)
        self.runs: dict[str, RunInfo] = {}
        self.groups: dict[str, str] = {}   # run id -> A/B group label (ab1, ab2, ...)
        self.filter_words: list[str] = []
        self.total = 0                      # runs before the filter
        self._order: list[str] = []
        self._short: dict[str, str] = {}
        self._widths: dict[str, int] = {}
        self._all: list[RunInfo] | None = None  # the last runs given, before the filter
        self._laid_out_at = 0                   # the width the columns were last fitted to

    def on_mount(self) -> None:
        self._add_columns({key: max(1, cell_len(header)) for key, header in COLUMNS})

    def _add_columns(self, widths: dict[str, int]) -> None:
        for key, header in COLUMNS:
            self.add_column(header, key=key, width=2 if key == "mark" else widths[key])
        self._widths = widths

    def _mark_cell(self, run_id: str) -> Text:
        if run_id in self.marked:
            return Text(str(self.marked.index(run_id) + 1), style="bold reverse magenta")
        return Text(" ")

    def _cells(self, r: RunInfo) -> list:
        group = self.groups.get(r.run_id, "")
        return [self._mark_cell(r.run_id), Text(self._short.get(r.run_id, r.run_id), style="bold"),
                Text(group, style="magenta"), Text(r.status_shown, style="bold red" if r.nonfinite else STATUS_STYLE.get(r.status, "")),
                preset_cell(r), precision_cell(r), progress_text(r),
                fmt_duration(r.duration_s)]

    def _room(self) -> int:
        """Cells the columns' contents may take: the table's width less each column's padding and
        a vertical scrollbar's width (kept free, so a growing list does not reflow the columns)."""
        width = self.size.width or self.app.size.width
        return width - 2 * self.cell_padding * len(COLUMNS) - self.styles.scrollbar_size_vertical

    def _widths_for(self, rows: list[list]) -> dict[str, int]:
        """Each column as wide as its widest cell or header (set here, when the rows come: widths the
        table measures itself as cells change only ever grow from the first rows' and race the first
        draw, as the compare table's did); the preset column shrinks, down to ELASTIC_MIN, to fit."""
        widths = {key: max([cell_len(header), *(cell_width(row[i]) for row in rows)])
                  for i, (key, header) in enumerate(COLUMNS)}
        widths["mark"] = 2
        over = sum(widths.values()) - self._room()
        if over > 0:
            widths[ELASTIC] = max(ELASTIC_MIN, widths[ELASTIC] - over)
            over = sum(widths.values()) - self._room()
        if over > 0:
            widths[THEN_ELASTIC] = max(min(THEN_MIN, widths[THEN_ELASTIC]), widths[THEN_ELASTIC] - over)
        return widths

    def set_runs(self, runs: list[RunInfo], groups: dict[str, str] | None = None) -> None:
        if groups is not None:
            self.groups = groups
        self._all = runs
        self.total = len(runs)
        short = short_ids([r.run_id for r in runs])
        runs = [r for r in runs if matches(r, self.filter_words, self.groups.get(r.run_id, ""))]
        order = [r.run_id for r in runs]
        self.runs = {r.run_id: r for r in runs}
        self.marked = [m for m in self.marked if m in short]
        self._short = short
        rows = [self._cells(r) for r in runs]
        widths = self._widths_for(rows)
        for elastic, (key, _) in enumerate(COLUMNS):
            if key in (ELASTIC, THEN_ELASTIC):
                for r, row in zip(runs, rows, strict=True):
                    row[elastic] = fit(row[elastic] if key == ELASTIC else precision_cell(r, widths[key]), widths[key])
        if order != self._order or widths != self._widths:
            current = self.highlighted_run()
            self.clear(columns=widths != self._widths)
            if not self.columns:
                self._add_columns(widths)
            for r, row in zip(runs, rows, strict=True):
                self.add_row(*row, key=r.run_id)
            self._order = order
            if current in self.runs:
                self.move_cursor(row=order.index(current), animate=False)
        else:
            changed = False
            for r, cells in zip(runs, rows, strict=True):
                row = self.get_row(r.run_id)
                for (key, _), old, value in zip(COLUMNS, row, cells, strict=False):
                    if old != value:
                        self.update_cell(r.run_id, key, value)
                        changed = True
            if changed:
                # Each update makes every cached cell and line of the table stale (their keys hold
                # an update count), yet they stay in its LRU caches (10,000 cells, 1,000 lines, rows)
                # until pushed out: tens of MB for a list redrawn every 2 s. Drop them now.
                self.notify_style_update()

    def refilter(self, words: list[str]) -> bool:
        """Show the runs last given through the filter `words` (False: none given yet)."""
        self.filter_words = words
        if self._all is None:
            return False
        self.set_runs(self._all)
        return True

    def on_resize(self, event: events.Resize) -> None:
        """A wider or narrower screen: the preset column gets the room there is."""
        if self._all is not None and event.size.width != self._laid_out_at:
            self._laid_out_at = event.size.width
            self.set_runs(self._all)

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
