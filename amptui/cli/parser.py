"""`amptui`'s command line: the commands, their options and help (cli.py runs them).

Standard library only at import time, so `amptui --help` answers at once.
"""

from __future__ import annotations

import argparse

from amptui import __version__
from amptui.cli import manage as cli_manage
from amptui.cli import numerics as cli_numerics
from amptui.cli import serve as cli_serve
from amptui.cli import slurm as cli_slurm
from amptui.cli import tune as cli_tune

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
    import shutil
    import textwrap

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


STOP_GRACE_S = 30.0  # `amptui stop` waits this long for the run's next step record, then kills it

PRESET_HELP = "a built-in or saved preset name (amptui presets list), or a path to a .toml file"


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1e9:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value


def run_id_argument(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("run_id", metavar="RUN_ID", help=f"{help}; an id as `amptui runs` lists it, any unique "
                                                         "prefix, the short tail the dashboard shows, or `last`")


def build_parser() -> argparse.ArgumentParser:
    import shutil
    import textwrap

    width = min(shutil.get_terminal_size().columns, 100) - 2  # the description and examples are raw text
    from amptui.cli.helpformat import AmptuiParser, WholeWordsRawDescription

    parser = AmptuiParser(
        prog="amptui", description=textwrap.fill(DESCRIPTION, width, break_on_hyphens=False),
        epilog=examples(width + 2), formatter_class=WholeWordsRawDescription)
    parser.add_argument("--version", action="version", version=f"amptui {__version__}")
    parser.add_argument("--runs-dir", metavar="DIR", help="where runs live (default $AMPTUI_RUNS_DIR or ./runs)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def runs_dir_option(p):
        p.add_argument("--runs-dir", metavar="DIR", default=argparse.SUPPRESS,
                       help="where runs live (default $AMPTUI_RUNS_DIR or ./runs)")

    p = sub.add_parser("run", help="run a preset without the dashboard",
                       usage="amptui run PRESET [--set KEY=VALUE]... [--detach]\n"
                             "       amptui run --script FILE [--set K=V]... [-- ARGS...]\n"
                             "       amptui run -m MODULE [--set K=V]... [-- ARGS...]")
    p.add_argument("preset", nargs="?", metavar="PRESET", help=PRESET_HELP)
    p.add_argument("--script", metavar="FILE", help="run your own training script, unmodified: amptui's hooks record its "
                   "steps, loss, GradScaler and precision (or its amptui.Monitor does); arguments after -- go "
                   "to the script")
    p.add_argument("-m", "--module", metavar="MODULE", help="the same for a module run as a script "
                   "(python -m MODULE), from the current folder")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a preset key, e.g. --set amp.dtype=bfloat16 (repeatable); a script run takes "
                        "run.name, log.every, log.tensorboard, numerics.every/depth and torchrun's dist.* keys")
    p.add_argument("--detach", action="store_true",
                   help="start in the background and print one JSON line with the run id")
    p.add_argument("--print-launch", action="store_true",
                   help="print the command to run on every node of a multi-node DDP run, and start nothing")
    runs_dir_option(p)

    p = sub.add_parser("stop", help="stop a running run gracefully (checkpoint, then status stopped)")
    run_id_argument(p, "the run to stop")
    p.add_argument("--grace", type=positive_seconds, default=STOP_GRACE_S, metavar="SECONDS",
                   help=f"how long to wait for the run to stop at its next step before its processes are "
                        f"killed (SIGTERM, then SIGKILL; default {STOP_GRACE_S:g})")
    runs_dir_option(p)

    p = sub.add_parser("resume", help="continue a stopped, failed or killed run from its last checkpoint")
    run_id_argument(p, "the run to continue (status stopped, failed or killed, with a checkpoint)")
    p.add_argument("--detach", action="store_true",
                   help="continue in the background and print one JSON line with the run id")
    p.add_argument("--trust-code", action="store_true",
                   help="run the code the run's config names (model.factory, data.factory, run.script) even "
                        "though it was not given on this machine (a copied run folder); without it a terminal "
                        "asks, anything else is refused")
    runs_dir_option(p)

    p = sub.add_parser("watch", help="open the dashboard's run screen on a run, live or finished")
    run_id_argument(p, "the run to watch")
    p.add_argument("--svg", metavar="FILE", help="draw the run screen headless and write it to FILE as SVG, "
                                                 "then exit (no terminal needed)")
    p.add_argument("--size", default="120x40", metavar="COLSxROWS",
                   help="the screen size for --svg (default: 120x40)")
    runs_dir_option(p)

    p = sub.add_parser("ab", help="run a preset once per precision variant, then compare them")
    p.add_argument("preset", metavar="PRESET", help=PRESET_HELP)
    p.add_argument("--variants", metavar="V,V,...",
                   help="from fp32, tf32 (CUDA), fp16, fp16+scaler, bf16, bf16+scaler (default: fp32,fp16,fp16+scaler on "
                        "CUDA, fp32,bf16 on CPU)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a preset key in every variant, e.g. --set run.max_steps=200 (repeatable; "
                        "not the amp.* keys the variants set)")
    p.add_argument("--format", choices=("table", "markdown", "csv", "json"), default="table",
                   help="how to print the comparison at the end (default: table)")
    p.add_argument("--detach", action="store_true", help="run the A/B in the background (its output in "
                   "RUNS/.ab/GROUP.log) and print one JSON line with its group id")
    p.add_argument("--group", help=argparse.SUPPRESS)  # the group a detached A/B drives (made by --detach)
    runs_dir_option(p)

    cli_tune.add_parser(sub, runs_dir_option)
    cli_numerics.add_parser(sub, runs_dir_option)
    cli_serve.add_parser(sub, runs_dir_option)
    cli_slurm.add_parser(sub, runs_dir_option)

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

    p = sub.add_parser("runs", help="list runs, or delete some (runs delete RUN_ID...)")
    p.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or json")
    p.add_argument("--all-folders", action="store_true",
                   help="also the other runs folders this user has used (each run records its folder)")
    runs_dir_option(p)
    cli_manage.add_runs_actions(p, runs_dir_option)
    cli_manage.add_parsers(sub, runs_dir_option)

    p = sub.add_parser("doctor", help="what this machine offers for AMP, and which dtype to use")
    p.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or json")
    p.add_argument("--no-bench", action="store_true", help="skip the matmul measurements")

    p = sub.add_parser("keys", help="the dashboard's actions by name, with their keys (remap them in "
                       "~/.config/amptui/config.toml [keymap])")
    p.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or json")

    p = sub.add_parser("presets", help="list, show, save or delete presets")
    psub = p.add_subparsers(dest="action", metavar="ACTION")
    psub.add_parser("list", help="built-in and saved presets")
    show = psub.add_parser("show", help="print a preset with every key resolved")
    show.add_argument("name", metavar="NAME", help=PRESET_HELP)
    show.add_argument("--raw", action="store_true", help="print the file as written")
    save = psub.add_parser("save", help="save a preset (with overrides) under a new name")
    save.add_argument("name", metavar="NAME", help="the new preset's name")
    save.add_argument("--from", dest="source", required=True, metavar="PRESET", help="the preset to start from")
    save.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                      help="override a key, e.g. --set amp.dtype=bfloat16 (repeatable)")
    save.add_argument("--force", action="store_true", help="overwrite a saved preset of that name")
    cli_manage.add_presets_delete(psub)
    return parser
