"""The tables of `runs`, `compare`, `ab` and `presets`: rich tables fitted to the terminal's width
on a terminal, aligned plain text elsewhere (a log, CI, a pipe)."""

from __future__ import annotations

import sys
from typing import Sequence, TextIO

from rich.cells import cell_len
from rich.table import Table
from rich.text import Text

from amptui.cli.console import terminal
from amptui.core.distribution import precision_labels
from amptui.core.fmt import fmt_duration, fmt_time, shown
from amptui.core.narrow import columns_that_fit
from amptui.core.run import trust
from amptui.core.run.runs import RunInfo


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str | Text]], out: TextIO | None = None,
                *, no_wrap: Sequence[str] = (), right: Sequence[str] = (), drop: Sequence[str] = ()) -> None:
    """A rich table on a terminal, aligned plain text elsewhere. On a terminal narrower than the
    table, whole columns in `drop` are left out (in that order) until it fits; cells of columns
    not in `no_wrap` wrap at word boundaries, the others (ids, counts, statuses) are never cut: a
    table that cannot fit even so is drawn wider than the terminal, which wraps its lines.
    `right`: right-aligned (numeric) columns."""
    out = out if out is not None else sys.stdout
    console = terminal(out)
    if console is None:
        cells = [tuple(shown(c) for c in row) for row in rows]  # strings from files: no raw escapes
        out.write(plain_table([tuple(h.replace("\n", " ") for h in headers), *cells]) + "\n")
        return
    texts = [[Text(shown(cell)) if isinstance(cell, str) else cell for cell in row] for row in rows]
    least = {h: _least_width(h, [row[i] for row in texts], h in no_wrap) for i, h in enumerate(headers)}
    columns = columns_that_fit(least, drop, console.width)
    needed = sum(least[h] for h in columns) + 2 * (len(columns) - 1)
    table = Table(box=None, header_style="bold", pad_edge=False, padding=(0, 1))
    for h in columns:
        table.add_column(h, no_wrap=h in no_wrap, overflow="fold", justify="right" if h in right else "left",
                         min_width=least[h] if h in no_wrap else None)
    for row in texts:
        table.add_row(*(cell for h, cell in zip(headers, row, strict=False) if h in columns))
    console.print(table, width=max(console.width, needed), crop=False)


def _least_width(header: str, cells: Sequence[Text], whole: bool) -> int:
    """The narrowest a column can be: its widest line (`whole`: never cut) or its longest word."""
    lines = [*header.split("\n"), *(line for cell in cells for line in cell.plain.split("\n"))]
    if not whole:
        lines = [word for line in lines for word in line.split()]
    return max((cell_len(line) for line in lines), default=0)


def print_lines(lines: Sequence[str], out: TextIO | None = None) -> None:
    """Notes under a table: wrapped at word boundaries on a terminal."""
    out = out if out is not None else sys.stdout
    console = terminal(out)
    for line in lines:
        line = shown(line)
        console.print(Text(line)) if console is not None else out.write(line + "\n")


def plain_table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)).rstrip() for row in rows)


def print_runs(runs: list[RunInfo], out: TextIO | None = None) -> None:
    """`amptui runs`. A narrow terminal leaves out whole columns: the start time and preset first
    (the run id says both: 20261122-165501-quickstart-ab12), then the duration and precision; the
    run id, status and progress are never cut."""
    out = out if out is not None else sys.stdout
    headers = ("RUN ID", "PRESET", "PRECISION", "STATUS", "PROGRESS", "STARTED", "DURATION")
    rows = []
    for r in runs:
        progress = f"{r.step}/{r.total_steps}" if r.total_steps else str(r.step)
        preset = " ".join(w for w in (r.preset, trust.mark(r.code, r.code_given_here)) if w)
        rows.append([r.run_id, preset, r.precision_label, r.status_shown, progress, fmt_time(r.started),
                     fmt_duration(r.duration_s)])
    console = terminal(out)
    if console is not None:  # a narrow terminal: shorter precision forms before the columns squeeze
        _fit_precision(runs, rows, console.width)
    print_table(headers, rows, out, no_wrap=("RUN ID", "PRECISION", "STATUS", "PROGRESS", "DURATION"),
                right=("PROGRESS", "DURATION"), drop=("STARTED", "PRESET", "DURATION", "PRECISION"))


def _fit_precision(runs: list[RunInfo], rows: list[list[str]], width: int) -> None:
    """The precision cells in the longest of their forms ("bf16+reduce FSDP x2", "bf16+reduce FSDP",
    "bf16+reduce": core.distribution) that lets the table, STARTED and PRESET left out, fit `width`."""
    kept = (0, 3, 4, 6)  # RUN ID, STATUS, PROGRESS, DURATION
    others = sum(max([len(("RUN ID", "", "", "STATUS", "PROGRESS", "", "DURATION")[i]),
                      *(len(row[i]) for row in rows)]) for i in kept) + 2 * len(kept)  # a gap of two each
    forms = [precision_labels(r.precision, r.dist) for r in runs]
    for level in range(3):
        chosen = [f[min(level, len(f) - 1)] for f in forms]
        if others + max([len("PRECISION"), *map(len, chosen)]) <= width or level == 2:
            for row, cell in zip(rows, chosen, strict=True):
                row[2] = cell
            return


def print_compare(rows, out: TextIO | None = None) -> None:
    """The compare table. On a terminal: runs numbered, their ids listed above (an id is longer
    than a narrow terminal can spare), short headers, and the least wanted columns left out until
    it fits. Elsewhere every column as plain text (compare.render)."""
    out = out if out is not None else sys.stdout
    from amptui.core.comparison import compare

    console = terminal(out)
    if console is None:
        out.write(shown(compare.render(rows, "table"), newlines=True) + "\n")
        return
    for i, r in enumerate(rows, 1):
        console.print(Text(f"{i}  {r.run_id}" + ("  (baseline)" if i == 1 and len(rows) > 1 else "")))
    columns = [c for c in compare.shown_columns(rows) if c.key != "run"]
    headers = ["#", *(c.short for c in columns)]
    cells = [[str(i), *(c.terminal(r) for c in columns)] for i, r in enumerate(rows, 1)]
    print_table(headers, cells, out, no_wrap=[h for h in headers if h not in ("preset",)],
                right=["#", *(c.short for c in columns if c.key not in ("preset", "precision", "dist", "status"))],
                drop=[c.short for c in compare.drop_order(columns)])


def print_comparison(run_dirs, fmt: str, out: TextIO | None = None) -> None:
    """`amptui compare` / `ab`: the table, then its notes (warnings when the runs differ in more
    than precision, how it is measured). csv and json stay machine-readable: warnings go to stderr.
    An `ab --script --variant NAME` run is named by its NAME in the preset column (core/comparison/compare.py)."""
    out = out if out is not None else sys.stdout
    from amptui.core.comparison import compare, comparenotes, runsummary

    summaries = [runsummary.summarize(d) for d in run_dirs]
    rows = compare.compare_rows(summaries)
    if fmt == "table":
        print_compare(rows, out)
    else:
        text = compare.render(rows, fmt)
        out.write((shown(text, newlines=True) if fmt == "markdown" else text) + "\n")
    notes = comparenotes.notes(summaries)
    if fmt in ("table", "markdown"):
        out.write("\n")
        print_lines(notes, out)
    else:
        for line in notes[:-1]:
            print(f"amptui: {shown(line)}", file=sys.stderr)
