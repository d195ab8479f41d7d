"""`amptui`'s command line: the top-level parser (description, examples, --version, --runs-dir)
and the options several commands share. Each command adds its own subparser (its module's
`add_parser`); main.py lists the commands and dispatches.

Standard library only at import time, so `amptui --help` answers at once.
"""

from __future__ import annotations

import argparse
import shutil
import textwrap
from types import ModuleType
from typing import Iterable

from amptui.cli.helpformat import AmptuiParser, WholeWordsRawDescription
from amptui.version import __version__

DESCRIPTION = "A terminal dashboard for PyTorch automatic mixed precision (AMP) training."
EXAMPLES = (
    ("amptui", "open the dashboard"),
    ("amptui run quickstart", "train the default preset, with live numbers"),
    ("amptui run mlp-recipe --set run.max_steps=20", "a preset with a key changed (any --set KEY=VALUE)"),
    ("amptui run scaler-lab --detach", "start in the background; prints JSON"),
    ("amptui runs", "list runs and their status"),
    ("amptui stop RUN_ID", "stop a run with a checkpoint"),
    ("amptui resume RUN_ID", "continue it from that checkpoint"),
    ("amptui export RUN_ID > run.csv", "a run's step series as CSV"),
)


def examples(width: int | None = None) -> str:
    """The examples under `amptui --help`, fitted to the terminal: command and words side by side
    where both fit, else the words on the next lines (wrapped at word boundaries, never mid-word)."""
    width = min(width or shutil.get_terminal_size().columns, 100) - 2  # argparse's own margin
    column = 2 + max(len(c) for c, _ in EXAMPLES if len(c) <= 36) + 2
    short = [(c, w) for c, w in EXAMPLES if len(c) + 4 <= column]
    side_by_side = all(column + len(w) <= width for _, w in short)  # one layout for all where it fits
    lines = ["examples:"]
    for command, what in EXAMPLES:
        if side_by_side and (command, what) in short:
            lines.append(f"  {command:<{column - 2}}{what}")
        else:
            lines.append(f"  {command}")
            lines += textwrap.wrap(what, width, initial_indent="      ", subsequent_indent="      ",
                                   break_long_words=False, break_on_hyphens=False)
    return "\n".join(lines) + "\n"


PRESET_HELP = "a built-in or saved preset name (amptui presets list), or a path to a .toml file"


def run_id_argument(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("run_id", metavar="RUN_ID", help=f"{help}; an id as `amptui runs` lists it, any unique "
                                                         "prefix, the short tail the dashboard shows, or `last`")


def runs_dir_option(p: argparse.ArgumentParser) -> None:
    """--runs-dir after the command too (`amptui runs --runs-dir DIR`), as before it."""
    p.add_argument("--runs-dir", metavar="DIR", default=argparse.SUPPRESS,
                   help="where runs live (default $AMPTUI_RUNS_DIR or ./runs)")


def build_parser(commands: Iterable[ModuleType]) -> argparse.ArgumentParser:
    """The whole parser: the top level, then each command's subparser, in the order given."""
    width = min(shutil.get_terminal_size().columns, 100) - 2  # the description and examples are raw text
    parser = AmptuiParser(
        prog="amptui", description=textwrap.fill(DESCRIPTION, width, break_on_hyphens=False),
        epilog=examples(width + 2), formatter_class=WholeWordsRawDescription)
    parser.add_argument("--version", action="version", version=f"amptui {__version__}")
    parser.add_argument("--runs-dir", metavar="DIR", help="where runs live (default $AMPTUI_RUNS_DIR or ./runs)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in commands:
        command.add_parser(sub)
    return parser
