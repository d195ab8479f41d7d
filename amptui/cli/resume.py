"""`amptui resume RUN_ID`: continue a stopped, failed or killed run from its last checkpoint, asking
first on a terminal when its config names code not given on this machine.

Standard library and amptui's core only at import time: main.py imports every command to build
the parser, so what a command needs loads in its handler (`amptui --help` answers at once).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from amptui.cli.parser import run_id_argument, runs_dir_option
from amptui.cli.run_commands import attach, is_script_run
from amptui.core.errors import UserError
from amptui.core.run.runfiles import RunFolder

if TYPE_CHECKING:
    from amptui.core.config.values import Config


def add_parser(sub) -> None:
    p = sub.add_parser("resume", help="continue a stopped, failed or killed run from its last checkpoint")
    run_id_argument(p, "the run to continue (status stopped, failed or killed, with a checkpoint)")
    p.add_argument("--detach", action="store_true",
                   help="continue in the background and print one JSON line with the run id")
    p.add_argument("--trust-code", action="store_true",
                   help="run the code the run's config names (model.factory, data.factory, run.script) even "
                        "though it was not given on this machine (a copied run folder); without it a terminal "
                        "asks, anything else is refused")
    runs_dir_option(p)


def handle(args) -> int:
    from amptui.core.run import runs
    from amptui.jobs import launch

    run_dir = runs.run_dir(runs.runs_root(args.runs_dir, writable=True), args.run_id)
    trusted = args.trust_code or asked_on_terminal(run_dir)
    offset, output = _size(RunFolder(run_dir).events), _size(RunFolder(run_dir).output_log)
    # checks it can resume while holding the run's lock
    proc = launch.start(run_dir, resume=True, check_checkpoint=_check_checkpoint_file, trust_code=trusted)
    return attach(run_dir, proc, args.detach, offset=offset, kind="resume",
                  output_from=output if is_script_run(run_dir) else None)


def asked_on_terminal(run_dir: Path) -> bool:
    """`amptui resume` of a run naming code not given here: on a terminal, ask (no: one line, exit
    2); elsewhere, or when the resume is refused anyway, False (launch.start then says why)."""
    from amptui.core.run import runops, trust

    foreign = trust.foreign_code(run_dir)
    if not foreign or not (sys.stdin.isatty() and sys.stderr.isatty()):
        return False
    if runops.resume_refusal(run_dir, hints=runops.CLI_HINTS):
        return False  # refused anyway: no question first
    print(trust.question(Path(run_dir).name, foreign) + " [y/N] ", end="", file=sys.stderr, flush=True)
    if sys.stdin.readline(16).strip().lower() not in ("y", "yes"):
        raise UserError(f"run {Path(run_dir).name} not resumed: its code was not trusted")
    return True


def _check_checkpoint_file(run_dir: Path, cfg: Config) -> None:
    """A resume's check of last.pt itself (torch), for a checkpoint its last.json does not describe."""
    from amptui.trainer.checkpoint import check_resume

    check_resume(run_dir, cfg)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
