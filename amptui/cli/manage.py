"""Housekeeping from the command line: `amptui runs delete ID...`, `amptui presets delete NAME`
and `amptui export RUN`. Each checks everything it was given before it changes anything, so a
mistake is one line, exit 2, and nothing touched.

Run ids are looked up the way `watch` and `compare` look them up (core.run.runs), and a run is
deleted the way the dashboard deletes one (core.run.runops.delete_run, under the run's lock). An id
given other than whole (a prefix, the short tail, `last`) is confirmed first: asked on a terminal,
refused in a pipe unless --yes, since a typo there deletes a run the user did not mean.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from amptui.core.errors import UserError


def add_parsers(sub, runs_dir_option) -> None:
    """`amptui export` (the `runs delete` and `presets delete` actions are added by `add_actions`)."""
    p = sub.add_parser("export", help="a run's step series (loss, lr, loss scale, speed, memory, eval) "
                                      "as csv or json")
    p.add_argument("run_id", metavar="RUN_ID", help="the run to export; an id as `amptui runs` lists it")
    p.add_argument("--format", choices=("csv", "json"), default="csv", help="csv (default) or json")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE (default: standard output)")
    runs_dir_option(p)


def add_runs_actions(runs_parser: argparse.ArgumentParser, runs_dir_option) -> None:
    actions = runs_parser.add_subparsers(dest="action", metavar="ACTION")
    actions.add_parser("list", help="list runs (the default)")
    p = actions.add_parser("delete", help="delete finished runs (their folders); running ones are refused")
    p.add_argument("run_ids", nargs="+", metavar="RUN_ID",
                   help="the runs to delete: full ids as `amptui runs` lists them; a prefix, short tail or "
                        "`last` is asked about first on a terminal, refused elsewhere without --yes")
    p.add_argument("--yes", "-y", action="store_true",
                   help="delete runs named by a prefix, short tail or `last` without asking")
    runs_dir_option(p)


def add_presets_delete(preset_actions) -> None:
    p = preset_actions.add_parser("delete", help="delete a saved preset (built-ins stay)")
    p.add_argument("name", metavar="NAME", help="a saved preset's name (amptui presets list)")


def cmd_runs_delete(args) -> int:
    from amptui.core.run import runops, runs

    root = runs.runs_root(args.runs_dir, writable=True)
    dirs: list[Path] = []
    shortened: list[tuple[str, str]] = []  # (as typed, the full id it names): asked about before deleting
    for run_id in args.run_ids:  # every id first: a bad one deletes nothing
        path = runs.run_dir(root, run_id)
        if run_id != path.name:
            shortened.append((run_id, path.name))
        if path not in dirs:
            dirs.append(path)
    # running as the list shows it, or a writer holding the lock (a resume just starting): what
    # delete_run refuses, asked of every run before the first goes
    running = [d.name for d in dirs if runs.load_run(d).status == "running" or runs.writer_alive(d)[0]]
    if running:
        raise UserError(f"not deleting anything: {', '.join(running)} "
                        f"{'is' if len(running) == 1 else 'are'} running; stop it first (amptui stop RUN_ID)")
    if shortened and not args.yes:
        _confirm_shortened(shortened, [d.name for d in dirs])
    deleted: list[str] = []
    for path in dirs:
        try:
            runops.delete_run(path)  # under the run's lock: a run that started since is refused
        except (UserError, OSError) as exc:
            why = str(exc) if isinstance(exc, UserError) else f"run {path.name}: cannot delete: {exc.strerror or exc}"
            raise UserError(why + (f" (deleted before it: {', '.join(deleted)})" if deleted else "")) from None
        deleted.append(path.name)
        print(f"deleted run {path.name}")
    return 0


def _confirm_shortened(shortened: list[tuple[str, str]], full_ids: list[str]) -> None:
    """A prefix, tail or `last` may name another run than the one meant (a typo deletes for good): on
    a terminal ask, naming the full ids (no: nothing deleted, exit 2); in a pipe or script, refuse."""
    typed, full = shortened[0]
    named = ", ".join(f"{t!r} names {f}" for t, f in shortened)
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        more = f" (and {len(shortened) - 1} more)" if len(shortened) > 1 else ""
        raise UserError(f"not deleting anything: {typed!r} is not a full run id (it names {full}){more}; "
                        "pass the full id, or --yes to delete what it names")
    runs_word = "run" if len(full_ids) == 1 else f"{len(full_ids)} runs:"
    print(f"delete {runs_word} {', '.join(full_ids)}? ({named}) [y/N] ", end="", file=sys.stderr, flush=True)
    if sys.stdin.readline(16).strip().lower() not in ("y", "yes"):
        raise UserError("nothing deleted (not confirmed)")


def cmd_presets_delete(args) -> int:
    from amptui.core.config import presets

    path = presets.delete_preset(args.name)
    print(f"deleted preset {args.name!r} ({path})")
    return 0


def cmd_export(args) -> int:
    from amptui.core import export
    from amptui.core.run import runs
    from amptui.core.safefile import atomic_writer

    run_dir = runs.run_dir(runs.runs_root(args.runs_dir), args.run_id)
    if not args.output:
        export.write(run_dir, args.format, sys.stdout)
        return 0
    out = Path(args.output).expanduser()
    if out.is_dir() or not out.parent.is_dir():
        raise UserError(f"-o {args.output}: not a file in an existing folder")
    if out.parent.resolve() == run_dir.resolve() or run_dir.resolve() in out.parent.resolve().parents:
        raise UserError(f"-o {args.output}: inside the run folder {run_dir.name}; write the export elsewhere "
                        "(the run's own files are not replaced)")
    try:
        with atomic_writer(out, binary=False) as fh:  # whole or not at all
            rows = export.write(run_dir, args.format, fh)
    except OSError as exc:
        raise UserError(f"-o {args.output}: cannot write: {exc.strerror or exc}") from None
    print(f"wrote {rows} steps of {run_dir.name} to {out}", file=sys.stderr)
    return 0
