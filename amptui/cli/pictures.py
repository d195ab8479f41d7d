"""Pictures from the command line: `amptui compare ... --format svg` and `amptui watch RUN --svg FILE`
draw a dashboard screen headless (no terminal needed) at `--size` and write it as SVG
(amptui.dashboard.picture)."""

from __future__ import annotations

import sys
from pathlib import Path

from amptui.core.errors import UserError


def size_of(text: str) -> tuple[int, int]:
    from amptui.dashboard.picture import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise UserError(f"--size: {exc}") from None


def watch_svg(args, run_dir) -> int:
    """The run screen drawn headless at --size, written to --svg (nothing else changes on disk)."""
    from amptui.core.run import runs
    from amptui.dashboard.app import headless_svg
    from amptui.dashboard.screens.run.screen import RunScreen

    size = size_of(args.size)
    out = Path(args.svg)
    if out.is_dir() or not out.parent.is_dir():
        raise UserError(f"--svg {args.svg}: not a file in an existing folder")
    svg = headless_svg(lambda: RunScreen(run_dir, standalone=True), runs.runs_root(args.runs_dir), size)
    out.write_text(svg, encoding="utf-8")
    print(f"wrote {out} ({size[0]}x{size[1]})")
    return 0


def compare_svg(args, root: Path, dirs: list[Path]) -> int:
    """The compare screen (table, loss overlay, loss difference) as SVG on stdout."""
    from amptui.dashboard.app import headless_svg
    from amptui.dashboard.screens.compare.screen import CompareScreen

    size = size_of(args.size)
    sys.stdout.write(headless_svg(lambda: CompareScreen(dirs), root, size))
    return 0
