"""`amptui`: the dashboard, and the commands that work without it.

Every command is a module of this folder with its `add_parser(sub)` (its subparser, options and
help) and its `handle(args)` (what it does, returning the exit code); COMMANDS lists them in the
order `amptui --help` shows them, and `main` dispatches to the one named (the dashboard when none
is). Adding a command: docs/development.md.

Only the standard library and amptui's core are imported here and by the command modules at
import time; torch and Textual load when a command needs them, so `amptui --help` answers at once.
"""

from __future__ import annotations

import sys

from amptui.cli import (
    ab,
    compare,
    dashboard,
    doctor,
    export,
    keys,
    numerics,
    plan,
    presets,
    resume,
    run,
    runs,
    serve,
    sky,
    slurm,
    stop,
    tune,
    watch,
)
from amptui.cli.parser import build_parser
from amptui.core.errors import UserError
from amptui.jobs.spawn import forget_working_folder, hear_interrupts

COMMANDS = (run, stop, resume, watch, ab, tune, numerics, plan, serve, slurm, sky, compare, runs, export, doctor,
            keys, presets)
BY_NAME = {command.__name__.rpartition(".")[2]: command for command in COMMANDS}  # the module is the command's name


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    forget_working_folder()  # before anything is started: whatever it starts inherits this environment
    hear_interrupts()  # Ctrl-C stops gracefully even when a shell's `&` started us with SIGINT ignored
    # Everything after a bare "--" belongs to the user's script (`amptui run --script x.py -- ARGS`).
    script_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    args = build_parser(COMMANDS).parse_args(argv)
    args.script_args = script_args
    args.argv = argv  # a --detach start runs this same command line again in the background
    command = BY_NAME[args.command] if args.command else dashboard  # argparse admits only these
    try:
        return command.handle(args) or 0
    except UserError as exc:
        from amptui.cli.prose import error  # rich: only when there is an error to say

        error(str(exc))  # wrapped at word boundaries on a terminal
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
