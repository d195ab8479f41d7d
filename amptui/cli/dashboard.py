"""`amptui` alone: the dashboard's home screen in this terminal (no subcommand of its own; main.py
runs it when none is given). `dashboard_settings` and `need_terminal` serve `watch` too.

Standard library and amptui's core only at import time: main.py imports every command to build
the parser, so what a command needs loads in its handler (`amptui --help` answers at once).
"""

from __future__ import annotations

import sys

from amptui.cli import serve as cli_serve
from amptui.core.errors import UserError


def add_parser(sub) -> None:
    """None: the dashboard is what `amptui` runs without a command."""


def need_terminal() -> None:
    if cli_serve.served_by_textual_serve():  # a browser tab of `amptui serve`: its screen is the page
        return
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UserError("the dashboard needs an interactive terminal (for scripts: amptui run / runs / compare)")


def dashboard_settings():
    """amptui's config file, its keymap checked (a bad one: one line, exit 2, before any terminal check)."""
    from amptui.core import userconfig
    from amptui.dashboard.app import keymap_scopes
    from amptui.dashboard.keymap import check_keymap

    settings = userconfig.load()
    if settings.keymap:
        check_keymap(settings.keymap, str(settings.path), keymap_scopes())
    return settings


def handle(args) -> int:
    from amptui.core.run import runs

    settings = dashboard_settings()
    need_terminal()
    from amptui.dashboard.app import make_app

    make_app(runs.runs_root(args.runs_dir), settings=settings).run()
    return 0
