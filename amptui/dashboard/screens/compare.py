"""Compare: the tutorials' table for the chosen runs, and their loss curves overlaid."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Footer, Static

from ...core import compare as cmp
from ...core import runops
from ...core.errors import UserError
from ..widgets.plot import COLORS, Figure, Line, MetricPlot
from .base import DashboardScreen, in_background
from .keys import KeysMixin


class CompareScreen(KeysMixin, DashboardScreen):
    # One line per key; the footer and the help screen (? / F1) read this list.
    BINDINGS = [
        Binding("q", "back", "Back"),
        Binding("m", "export('markdown')", "Export .md"),
        Binding("v", "export('csv')", "Export .csv"),
        Binding("escape", "back", "Back", show=False),
    ]

    def __init__(self, run_dirs: list[Path]):
        super().__init__()
        self.run_dirs = [Path(p) for p in run_dirs]
        self.rows: list[cmp.CompareRow] = []
        self.differ: list[str] = []

    def compose(self) -> ComposeResult:
        yield Static(f"comparing {len(self.run_dirs)} runs · speed-up and memory saving against run 1 "
                     "(the baseline)", id="compare-title")
        yield Static(id="compare-warning")
        with Vertical(id="compare-table-box"):
            yield DataTable(id="compare-table", cursor_type="row", zebra_stripes=True)
        with Vertical(id="compare-plot-box"):
            yield MetricPlot(id="compare-plot")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.query_one("#compare-warning").display = False
        self.query_one("#compare-table-box").border_title = "Runs"
        self.query_one("#compare-plot-box").border_title = "Loss (overlaid)"
        table = self.query_one("#compare-table", DataTable)
        table.add_column("#", key="n")
        for h in self._order():
            table.add_column(h, key=h)
        self.load()

    @staticmethod
    def _order() -> list[str]:
        """The headline numbers first, the long run id last, so what matters shows at 80 columns."""
        first = [h for h in ("precision", "preset", "speed-up", "mem saving", "final loss", "val acc")
                 if h in cmp.HEADERS]
        rest = [h for h in cmp.HEADERS if h not in first and h != "run"]
        return first + rest + ["run"]

    @staticmethod
    def row_cells(row: cmp.CompareRow) -> dict[str, str]:
        return dict(zip(cmp.HEADERS, cmp.cells(row)))

    @in_background("compare", "reading the runs to compare")
    def load(self) -> None:
        summaries = [cmp.summarize(d) for d in self.run_dirs]
        rows = cmp.compare_rows(summaries)
        differ = runops.config_differences(self.run_dirs)
        self.app.from_thread(self._show, summaries, rows, differ)

    def _show(self, summaries: list[cmp.RunSummary], rows: list[cmp.CompareRow], differ: list[str] = ()) -> None:
        self.rows = rows
        self.differ = list(differ)
        self.refresh_bindings()  # export applies from now on: the footer shows m / v
        warning = self.query_one("#compare-warning", Static)
        if differ:
            shown = ", ".join(differ[:8]) + (f" and {len(differ) - 8} more" if len(differ) > 8 else "")
            warning.update(Text.assemble(("⚠ runs differ in more than precision: ", "bold"), shown,
                                         (" — speed-up and memory saving compare more than AMP", "")))
        warning.display = bool(differ)
        table = self.query_one("#compare-table", DataTable)
        table.clear()
        for i, row in enumerate(rows):
            color = COLORS[i % len(COLORS)]
            by_header = self.row_cells(row)
            by_header["run"] = Text(by_header["run"], style=color)
            cells = [by_header[h] for h in self._order()]
            table.add_row(Text(str(i + 1), style=f"bold {color}"), *cells, key=row.run_id)
        lines = []
        for i, s in enumerate(summaries):
            xs, ys = s.loss_curve.points()
            label = f"{i + 1} {s.preset} {s.precision_words}".strip()
            lines.append(Line(xs, ys, label=label, color=COLORS[i % len(COLORS)]))
        self.query_one("#compare-plot", MetricPlot).update_figure(Figure(lines, empty="no loss records"))

    def refusal(self, action: str) -> str | None:
        if action == "export" and not self.rows:
            return "the table is still loading"
        return None

    def table_text(self, fmt: str) -> str:
        """core.compare's rendering (as `amptui compare --format` prints it); markdown with its notes."""
        text = cmp.render(self.rows, fmt)
        if fmt == "csv":
            return text
        notes = ([f"runs differ in more than precision: {', '.join(self.differ)}"] if self.differ else [])
        return "\n\n".join([text, *notes, cmp.TIMING_NOTE])

    def action_export(self, fmt: str) -> None:
        try:
            path = runops.export_compare(self.app.runs_root, self.table_text(fmt), fmt)
        except (UserError, OSError) as exc:
            self.notify(str(exc), title="Not exported", severity="error", timeout=8)
            return
        self.notify(f"table written to {path}", title=f"Exported {fmt}", timeout=10)

    def action_back(self) -> None:
        self.app.pop_screen()
