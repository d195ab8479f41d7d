"""`amptui runs`: list runs (this folder's, or every folder used); `amptui runs delete RUN_ID...`:
delete finished runs, everything given checked before anything changes, so a mistake is one
line, exit 2, and nothing touched. A run is deleted the way the dashboard deletes one
(core.run.runops.delete_run, under the run's lock). An id given other than whole (a prefix, the
short tail, `last`) is confirmed first: asked on a terminal, refused in a pipe unless --yes, since
a typo there deletes a run the user did not mean.

Standard library and amptui's core only at import time: main.py imports every command to build
the parser, so what a command needs loads in its handler (`amptui --help` answers at once).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from amptui.cli.parser import runs_dir_option
from amptui.core.errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("runs", help="list runs, or delete some (runs delete RUN_ID...)")
    p.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or json")
    p.add_argument("--all-folders", action="store_true",
                   help="also the other runs folders this user has used (each run records its folder)")
    runs_dir_option(p)
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.add_parser("list", help="list runs (the default)")
    p = actions.add_parser("delete", help="delete finished runs (their folders); running ones are refused")
    p.add_argument("run_ids", nargs="+", metavar="RUN_ID",
                   help="the runs to delete: full ids as `amptui runs` lists them; a prefix, short tail or "
                        "`last` is asked about first on a terminal, refused elsewhere without --yes")
    p.add_argument("--yes", "-y", action="store_true",
                   help="delete runs named by a prefix, short tail or `last` without asking")
    runs_dir_option(p)


def handle(args) -> int:
    from amptui.cli.tables import print_runs
    from amptui.core.run import runs

    if getattr(args, "action", None) == "delete":
        return delete(args)
    root = runs.runs_root(args.runs_dir)
    if getattr(args, "all_folders", False):
        return _runs_all_folders(root, args.format)
    found = runs.list_runs(root)
    if args.format == "json":
        print(json.dumps([r.as_json() for r in found], indent=2))
    elif not found:
        from amptui.core.run.folders import others_hint

        hint = others_hint(root)
        print(f"no runs in {root} (start one with `amptui run quickstart`)" + (f"\n{hint}" if hint else ""))
    else:
        print_runs(found)
    return 0


def _runs_all_folders(root, fmt: str) -> int:
    """`amptui runs --all-folders`: this runs folder, then every other one recorded as used."""
    import os

    from amptui.cli.tables import print_runs
    from amptui.core.run import folders, runs

    here = os.path.realpath(root)
    places = [Path(here)] + [f for f in folders.used_folders() if os.path.realpath(f) != here]
    listed = []
    for place in places:
        try:
            found = runs.list_runs(place)
        except UserError:
            continue  # a folder gone unreadable since: the others still list
        listed.append((place, found))
    if fmt == "json":
        print(json.dumps([{**r.as_json(), "runs_dir": str(place)} for place, found in listed for r in found], indent=2))
        return 0
    for i, (place, found) in enumerate(listed):
        print(("\n" if i else "") + f"runs in {place}:" + ("" if found else " none"))
        if found:
            print_runs(found)
    return 0


def delete(args) -> int:
    from amptui.core.run import runops, runs
    from amptui.jobs import forcestop

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
    held = [(d.name, holders) for d in dirs if d.name in running and runs.load_run(d).status != "running"
            and (holders := forcestop.held_by(d))]
    if held:  # ended, but a process it started keeps its lock: say exactly which
        name, holders = held[0]
        raise UserError(f"not deleting anything: run {name} has ended, but {_holders(holders)} still "
                        f"{'holds' if len(holders) == 1 else 'hold'} its lock; end it "
                        f"(kill {' '.join(str(p.pid) for p in holders)}), then delete again")
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


def _holders(procs) -> str:
    from amptui.jobs import signals

    return ", ".join(f"pid {p.pid} ({signals.command_of(p)})" for p in procs)


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
