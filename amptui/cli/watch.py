"""`amptui watch RUN_ID`: the dashboard's run screen on a run, live or finished; `--svg FILE` draws
it headless instead (cli/pictures.py).

Standard library and amptui's core only at import time: main.py imports every command to build
the parser, so what a command needs loads in its handler (`amptui --help` answers at once).
"""

from __future__ import annotations

from amptui.cli import pictures as cli_pictures
from amptui.cli.dashboard import dashboard_settings, need_terminal
from amptui.cli.parser import run_id_argument, runs_dir_option


def add_parser(sub) -> None:
    p = sub.add_parser("watch", help="open the dashboard's run screen on a run, live or finished")
    run_id_argument(p, "the run to watch")
    p.add_argument("--svg", metavar="FILE", help="draw the run screen headless and write it to FILE as SVG, "
                                                 "then exit (no terminal needed)")
    p.add_argument("--size", default="120x40", metavar="COLSxROWS",
                   help="the screen size for --svg (default: 120x40)")
    runs_dir_option(p)


def handle(args) -> int:
    from amptui.core.run import runs

    run_dir = runs.run_dir(runs.runs_root(args.runs_dir), args.run_id)  # a bad id: one line, exit 2
    if args.svg:  # the run screen, drawn headless
        return cli_pictures.watch_svg(args, run_dir)
    settings = dashboard_settings()
    need_terminal()
    from amptui.dashboard.app import make_app

    make_app(runs.runs_root(args.runs_dir), watch=run_dir, settings=settings).run()
    return 0
