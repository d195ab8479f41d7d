"""`amptui compare RUN_ID...` (or `--last-ab`): the tutorials' table for some runs, the first the
baseline, as a table, markdown, csv, json or the compare screen drawn as SVG.

Standard library and amptui's core only at import time: main.py imports every command to build
the parser, so what a command needs loads in its handler (`amptui --help` answers at once).
"""

from __future__ import annotations

from amptui.cli import pictures as cli_pictures
from amptui.cli.parser import runs_dir_option
from amptui.core.errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("compare", help="the tutorials' table for some runs (speed-up and saving against the first)")
    p.add_argument("run_ids", nargs="*", metavar="RUN_ID",
                   help="runs to compare; the first is the baseline (ids as `amptui runs` lists them, any unique "
                        "prefix, the short tail the dashboard shows, or `last`)")
    p.add_argument("--last-ab", action="store_true",
                   help="compare the runs of the newest A/B (from `amptui ab` or the dashboard)")
    p.add_argument("--format", choices=("table", "markdown", "csv", "json", "svg"), default="table", metavar="FORMAT",
                   help="table (default), markdown, csv (raw numbers), json, or svg (the dashboard's compare "
                        "screen, drawn headless: table, loss overlay and loss difference)")
    p.add_argument("--size", default="120x40", metavar="COLSxROWS",
                   help="the screen size for --format svg (default: 120x40)")
    runs_dir_option(p)


def handle(args) -> int:
    from amptui.cli.tables import print_comparison
    from amptui.core.run import runs

    root = runs.runs_root(args.runs_dir)
    dirs = [runs.run_dir(root, run_id) for run_id in args.run_ids]
    if getattr(args, "last_ab", False):
        if dirs:
            raise UserError("compare: give run ids or --last-ab, not both")
        from amptui.jobs.groups import newest_group_runs

        dirs = newest_group_runs(root)
    if not dirs:
        raise UserError("compare: name the runs to compare (ids from `amptui runs`, or --last-ab)")
    if args.format == "svg":  # the compare screen, drawn headless
        return cli_pictures.compare_svg(args, root, dirs)
    print_comparison(dirs, args.format)
    if args.format in ("table", "markdown"):
        from amptui.core.comparison import runsummary

        print_emulation_notes([runsummary.summarize(d) for d in dirs])
    return 0


def print_emulation_notes(summaries) -> None:
    """Under the table: which runs autocast to a dtype this CPU only emulates (so slow is expected)."""
    from amptui.cli.console import emulated_notice
    from amptui.cli.prose import say

    emulated = [(s.run_id, emulated_notice(s.start)) for s in summaries]
    emulated = [(run_id, notice) for run_id, notice in emulated if notice]
    if emulated:
        say(f"note: {', '.join(run_id for run_id, _ in emulated)}: {emulated[0][1]}")
