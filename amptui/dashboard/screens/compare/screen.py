"""Compare: the tutorials' table for the chosen runs, and their loss curves overlaid."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.color import Color
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Static

from amptui.core.comparison import compare as cmp
from amptui.core.comparison import comparenotes, comparestep, runsummary
from amptui.core.comparison.lossgaps import agreement_words, loss_gaps, still_falling
from amptui.core.config.precision import precision_or_unseen
from amptui.core.errors import UserError
from amptui.core.fmt import shown
from amptui.core.narrow import columns_that_fit
from amptui.core.run import runops
from amptui.dashboard.picture import save_screen
from amptui.dashboard.screens.base import DashboardScreen, in_background
from amptui.dashboard.screens.keys import named
from amptui.dashboard.widgets.keysfooter import KeysFooter
from amptui.dashboard.widgets.plot import COLORS, Figure, Line, MetricPlot
from amptui.dashboard.widgets.scrollhint import show_columns_hint

MARKERS = ("•", "+", "×", "▪", "◆")  # runs after the baseline, whose line shows between them
BAND = (90, 90, 90)  # the baseline's noise band: dim grey


def numerics_notes(summaries: Sequence[runsummary.RunSummary]) -> Text:
    """Under the table, in core.comparison.compare's words (as `amptui compare` says them): which step the
    loss column compares runs at when they stopped at different steps, whether the fp32
    baseline used TF32, what memory per rank measured (runs on several processes), and each run's narrowest range headroom when any run sampled it, one line
    per run by its number; empty when there is nothing to say."""
    text = Text()
    steps = comparenotes.steps_note(list(summaries))
    if steps:
        text.append(shown(steps))
    tf32 = comparenotes.tf32_baseline_note(list(summaries), "run 1")
    if tf32:
        text.append(("\n" if text else "") + shown(tf32))
    memory = comparenotes.memory_note(list(summaries), brief=True)
    if memory:
        text.append(("\n" if text else "") + shown(memory))
    noisy = comparestep.noisy_note(list(summaries))  # the table's "too noisy to tell": why, and what to do
    if noisy:
        text.append(("\n" if text else "") + shown(noisy))
    if any(s.numerics.records for s in summaries):
        head = "narrowest range headroom "
        for i, s in enumerate(summaries):
            text.append("\n" if text else "")
            text.append(head if i == 0 else " " * len(head), style="bold")
            # the table's colour for this run (a CSS name: rich's own names lack some, e.g. orange)
            text.append(f"{i + 1}: ", style=f"bold {Color.parse(COLORS[i % len(COLORS)]).hex}")
            text.append(shown(comparenotes.headroom_words(s)))
    return text


class CompareScreen(DashboardScreen):
    # One line per key; the footer and the help screen (? / F1) read this list.
    BINDINGS = named("compare", [
        Binding("q", "back", "Back"),
        Binding("m", "export('markdown')", "Export .md"),
        Binding("v", "export('csv')", "Export .csv"),
        Binding("p", "picture", "SVG"),
        Binding("escape", "back", "Back", show=False),
    ])

    def __init__(self, run_dirs: list[Path]):
        super().__init__()
        self.run_dirs = [Path(p) for p in run_dirs]
        self.rows: list[cmp.CompareRow] = []
        self.summaries: list[runsummary.RunSummary] = []
        self.differ: list[str] = []
        self._curves_drawn = False
        self._fitted_width = 0

    def compose(self) -> ComposeResult:
        yield Static(f"comparing {len(self.run_dirs)} runs · speed-up and memory saving against run 1 "
                     "(the baseline)", id="compare-title")
        yield Static(id="compare-warning")
        with Vertical(id="compare-table-box"):
            yield DataTable(id="compare-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="compare-notes")
        with Horizontal(id="compare-plots"):
            with Vertical(id="compare-plot-box"):
                yield MetricPlot(id="compare-plot")
            with Vertical(id="compare-gap-box"):
                yield MetricPlot(id="compare-gap")
        yield KeysFooter(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.query_one("#compare-warning").display = False
        self.query_one("#compare-notes").display = False
        self.query_one("#compare-table-box").border_title = "Runs"
        self.query_one("#compare-plot-box").border_title = "Loss (overlaid)"
        self.query_one("#compare-gap-box").border_title = "Loss − run 1's, same step"
        table = self.query_one("#compare-table", DataTable)
        table.add_column("#", key="n")
        labels = self._labels()
        for h in self._order():
            table.add_column(labels.get(h, h), key=h)
        show_columns_hint(self, table, self.query_one("#compare-table-box"))
        self.load()

    @staticmethod
    def _order(rows: Sequence[cmp.CompareRow] = ()) -> list[str]:
        """The columns' keys: the headline numbers first (loss and the verdict, speed-up), the long
        run id last; the per-rank columns (dist, state saving) only when a run ran on several
        processes, the final loss only when the runs stopped at different steps."""
        shown = [c.key for c in cmp.shown_columns(list(rows))]
        first = [h for h in ("precision", "dist", "loss", "speed-up", "val acc", "mem saving", "state saving",
                             "preset", "steps", "status", "final loss") if h in shown]
        rest = [h for h in shown if h not in first and h != "run"]
        return first + rest + ["run"]

    def _fitted(self, rows: Sequence[cmp.CompareRow], width: int) -> tuple[list[str], list[dict[str, str]]]:
        """The columns shown in `width` cells and each row's cells: every column in full when they
        fit, else the terminal's short forms ("fp16+scaler", "can't tell") and whole columns left out
        by priority (core/narrow.py, as `amptui compare` does on a narrow terminal; the run id
        first: the legend names each run), never a cell cut."""
        order, labels = self._order(rows), self._labels(rows)
        full = [self.row_cells(row) for row in rows]
        columns = {c.key: c for c in cmp.shown_columns(list(rows))}

        def widths(texts: list[dict[str, str]]) -> dict[str, int]:
            return {"n": len(str(len(rows))),
                    **{h: max([cell_len(labels.get(h, h)), *(cell_len(t[h]) for t in texts)]) for h in order}}

        gap = 2  # a DataTable cell's padding, both sides
        if sum(widths(full).values()) + gap * len(order) + gap <= width:
            return order, full
        short = [{c.key: c.terminal(row) for c in columns.values()} for row in rows]
        later_first = [columns[h] for h in reversed(order)]
        drop = ["run", *(c.key for c in cmp.drop_order(later_first))]
        kept = columns_that_fit(widths(short), drop, width - gap, gap)
        return [h for h in order if h in kept], short

    @staticmethod
    def _labels(rows: Sequence[cmp.CompareRow] = ()) -> dict[str, str]:
        """Each column's header by its key ("loss @ step 10" for the loss column)."""
        return {c.key: c.header for c in cmp.shown_columns(list(rows))}

    @staticmethod
    def row_cells(row: cmp.CompareRow) -> dict[str, str]:
        return dict(zip(cmp.HEADERS, cmp.cells(row), strict=False))

    @in_background("compare", "reading the runs to compare")
    def load(self) -> None:
        summaries = [runsummary.summarize(d) for d in self.run_dirs]
        rows = cmp.compare_rows(summaries)
        differ = list(comparenotes.differing_keys(summaries))  # as `amptui compare` warns: measuring keys are no difference
        self.app.from_thread(self._show, summaries, rows, differ)

    def _show(self, summaries: list[runsummary.RunSummary], rows: list[cmp.CompareRow], differ: Sequence[str] = ()) -> None:
        self.rows = rows
        self.summaries = summaries
        self.differ = list(differ)
        self.refresh_bindings()  # export applies from now on: the footer shows m / v
        warning = self.query_one("#compare-warning", Static)
        if differ:
            listed = shown(", ".join(differ[:8]) + (f" and {len(differ) - 8} more" if len(differ) > 8 else ""))
            warning.update(Text.assemble(("⚠ runs differ in more than precision: ", "bold"), listed,
                                         (" — speed-up and memory saving compare more than AMP", "")))
        warning.display = bool(differ)
        self._fill_table()
        notes = self.query_one("#compare-notes", Static)
        notes_text = numerics_notes(summaries)
        notes.update(notes_text)
        notes.display = bool(notes_text)
        self._curves(summaries)

    def _fill_table(self) -> None:
        rows = self.rows
        table = self.query_one("#compare-table", DataTable)
        box = self.query_one("#compare-table-box")
        width = box.content_size.width or self.app.size.width - 2
        order, texts = self._fitted(rows, width)
        labels = self._labels(rows)
        # Columns as wide as their widest cell, set here: widths the table measured itself as rows
        # arrived raced its first draw (at 80 columns a row stayed drawn at the headers' widths).
        table.clear(columns=True)
        table.add_column("#", key="n", width=len(str(len(rows))))
        for h in order:
            label = labels.get(h, h)
            table.add_column(label, key=h, width=max([cell_len(label), *(cell_len(t[h]) for t in texts)]))
        for i, (row, cells_of) in enumerate(zip(rows, texts, strict=True)):
            color = COLORS[i % len(COLORS)]
            # Text, not str: a DataTable reads a str cell as markup (a preset named "[/]" ended the app)
            by_header = {**{h: Text(cell) for h, cell in cells_of.items()}, "run": Text(cells_of["run"], style=color)}
            table.add_row(Text(str(i + 1), style=f"bold {color}"), *(by_header[h] for h in order), key=row.run_id)
        self._fitted_width = width

    def on_resize(self) -> None:
        """A wider or narrower screen: the columns chosen again for it, once it is laid out."""
        self.call_after_refresh(self._refit)

    def _refit(self) -> None:
        if self.rows and self.query_one("#compare-table-box").content_size.width != self._fitted_width:
            self._fill_table()

    def _curves(self, summaries: list[runsummary.RunSummary]) -> None:
        """The overlay on one step axis for all runs (the baseline a line, the others markers on
        every third column, so curves that coincide both show), and beside it each run's loss
        minus the baseline's at the same step, against the baseline's own noise band."""
        curves = [s.loss_curve.points() for s in summaries]
        xs_all = [x for xs, _ in curves for x in xs]
        x_range = (min(xs_all), max(xs_all)) if xs_all else None
        lines = []
        for i, (s, (xs, ys)) in enumerate(zip(summaries, curves, strict=False)):
            label = f"{i + 1} {shown(s.preset)} {precision_or_unseen(s.precision_words)}".strip()
            marker = "braille" if i == 0 else MARKERS[(i - 1) % len(MARKERS)]
            lines.append(Line(xs, ys, label=label, color=COLORS[i % len(COLORS)],
                              marker=marker, scatter=i > 0, sparse=i > 0))
        marks = tuple(sorted({float(rec["step"]) for s in summaries for rec in s.switches}))  # autopilot switches
        self.query_one("#compare-plot", MetricPlot).update_figure(
            Figure(lines, empty="no loss records", x_range=x_range, marks=marks))
        band, gaps = loss_gaps(summaries)
        gap_lines: list[Line] = []
        if x_range is not None and gaps:
            edge = [x_range[0], x_range[1]]
            gap_lines += [Line(edge, [band, band], color=BAND), Line(edge, [-band, -band], color=BAND),
                          Line(edge, [0.0, 0.0], color=COLORS[0])]
        for i, gap in enumerate(gaps, start=1):
            gap_lines.append(Line(gap.steps, gap.gaps, label=str(i + 1), color=COLORS[i % len(COLORS)]))
        top = max([band, *(abs(g) for gap in gaps for g in gap.gaps)], default=band) or 1.0
        self.query_one("#compare-gap", MetricPlot).update_figure(
            Figure(gap_lines, empty="one run: nothing to set against", x_range=x_range, legend=False,
                   y_range=(-top, top), marks=marks))
        box = self.query_one("#compare-gap-box")
        # each run's share of steps inside the band, then the band: "2: 100%, 3: 87% in ±0.0912";
        # a band too wide for the loss says why instead of a true, useless 100%: a short run's still
        # falling loss, or a noisy one
        box.border_subtitle = agreement_words(band, gaps, summaries[0].final_loss if summaries else None,
                                              still_falling(summaries[0].loss_curve) if summaries else True)
        self._curves_drawn = True

    def drawn(self) -> bool:
        """The table and the curves are on the screen (a picture taken now is complete)."""
        return bool(self.rows) and self._curves_drawn

    def action_picture(self) -> None:
        """The screen as drawn now, as SVG, into the runs folder."""
        try:
            path = save_screen(self.app, self.app.runs_root, "compare-screen")
        except OSError as exc:
            self.notify(str(exc), title="No picture saved", severity="error", timeout=8)
            return
        self.notify(f"screen saved to {path}", title="Saved SVG", timeout=10)

    def refusal(self, action: str) -> str | None:
        if action == "export" and not self.rows:
            return "the table is still loading"
        return None

    def table_text(self, fmt: str) -> str:
        """core.comparison.compare's rendering (as `amptui compare --format` prints it); markdown with its notes."""
        text = cmp.render(self.rows, fmt)
        if fmt == "csv":
            return text
        notes = ([f"runs differ in more than precision: {', '.join(self.differ)}"] if self.differ else [])
        notes += [n for n in (comparenotes.steps_note(self.summaries), comparenotes.tf32_baseline_note(self.summaries), comparenotes.headroom_note(self.summaries),
                              comparenotes.memory_note(self.summaries), comparestep.noisy_note(self.summaries)) if n]
        return "\n\n".join([text, *notes, comparenotes.TIMING_NOTE])

    def action_export(self, fmt: str) -> None:
        try:
            path = runops.export_compare(self.app.runs_root, self.table_text(fmt), fmt)
        except (UserError, OSError) as exc:
            self.notify(str(exc), title="Not exported", severity="error", timeout=8)
            return
        self.notify(f"table written to {path}", title=f"Exported {fmt}", timeout=10)

    def action_back(self) -> None:
        self.app.pop_screen()
