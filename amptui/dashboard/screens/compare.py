"""Compare: the tutorials' table for the chosen runs, and their loss curves overlaid."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from ...core import compare as cmp
from ..widgets.plot import COLORS, Figure, Line, MetricPlot


class CompareScreen(Screen):
    BINDINGS = [Binding("q", "back", "Back"), Binding("escape", "back", "Back", show=False)]

    def __init__(self, run_dirs: list[Path]):
        super().__init__()
        self.run_dirs = [Path(p) for p in run_dirs]
        self.rows: list[cmp.CompareRow] = []

    def compose(self) -> ComposeResult:
        yield Static(f"comparing {len(self.run_dirs)} runs · speed-up and memory saving against run 1 "
                     "(the baseline)", id="compare-title")
        with Vertical(id="compare-table-box"):
            yield DataTable(id="compare-table", cursor_type="row", zebra_stripes=True)
        with Vertical(id="compare-plot-box"):
            yield MetricPlot(id="compare-plot")
        yield Footer()

    def on_mount(self) -> None:
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
        first = [h for h in ("precision", "speed-up", "mem saving", "final loss", "val acc") if h in cmp.HEADERS]
        rest = [h for h in cmp.HEADERS if h not in first and h != "run"]
        return first + rest + ["run"]

    @work(thread=True, exclusive=True, group="compare")
    def load(self) -> None:
        summaries = [cmp.summarize(d) for d in self.run_dirs]
        rows = cmp.compare_rows(summaries)
        self.app.from_thread(self._show, summaries, rows)

    def _show(self, summaries: list[cmp.RunSummary], rows: list[cmp.CompareRow]) -> None:
        self.rows = rows
        table = self.query_one("#compare-table", DataTable)
        table.clear()
        for i, row in enumerate(rows):
            color = COLORS[i % len(COLORS)]
            by_header = dict(zip(cmp.HEADERS, cmp.cells(row)))
            by_header["run"] = Text(by_header["run"], style=color)
            cells = [by_header[h] for h in self._order()]
            table.add_row(Text(str(i + 1), style=f"bold {color}"), *cells, key=row.run_id)
        lines = []
        for i, s in enumerate(summaries):
            xs, ys = s.loss_curve.points()
            label = f"{i + 1} {s.preset} {s.precision}".strip()
            lines.append(Line(xs, ys, label=label, color=COLORS[i % len(COLORS)]))
        self.query_one("#compare-plot", MetricPlot).update_figure(Figure(lines, empty="no loss records"))

    def action_back(self) -> None:
        self.app.pop_screen()
