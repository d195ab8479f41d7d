"""`amptui tune PRESET`: find the fastest precision setup that keeps fp32's accuracy, on this machine.

Standard library and amptui's core only at import time (torch loads in the command itself).
"""

from __future__ import annotations

import argparse
import json
import sys

from amptui.cli.parser import runs_dir_option
from amptui.core.errors import UserError


def add_parser(sub) -> None:
    from amptui.core.config.precision import Precision
    from amptui.tune.plan import DEFAULT_BUDGET_MIN, DEFAULT_KEYS, FLOAT8_CANDIDATE, PRECISIONS

    last = Precision.from_variant(FLOAT8_CANDIDATE).mode  # the mode tune tries last, in a trial of its own

    p = sub.add_parser("tune", help="search precision, compile and batch size for the fastest setup that keeps "
                       "fp32's accuracy; save the winner as PRESET-tuned",
                       usage="amptui tune PRESET [--budget MIN] [--set K=V]...\n"
                             "       amptui tune --script FILE [--budget MIN] [-- ARGS]")
    p.add_argument("preset", nargs="?", metavar="PRESET")
    p.add_argument("--script", metavar="FILE", help="tune your own fp32 training script: the precisions amptui "
                   "applies to it, each trial the script's whole run with ARGS (docs/tune.md)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a preset key for every trial (e.g. --set run.device=cpu)")
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET_MIN, metavar="MINUTES",
                   help=f"time for the whole search (default {DEFAULT_BUDGET_MIN:g}); trials stop when it is spent")
    p.add_argument("--keys", metavar="K,K,...", default=None,
                   help=f"what may vary (default {DEFAULT_KEYS}; amp.autocast/amp.dtype/amp.grad_scaler all "
                        f"mean the precision setup, whose variants tried are fp32 (the reference), "
                        f"{', '.join(PRECISIONS)}, then {FLOAT8_CANDIDATE} (the {last.name} mode"
                        + (f", the {last.extra} extra" if last.extra else "") + "); "
                        "with --script the precision only)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--no-save", action="store_true", help="do not save the winner as PRESET-tuned")
    p.add_argument("--detach", action="store_true", help="search in the background (its output in "
                   "RUNS/TUNE_ID.tune.log) and print one JSON line with the tune id and its result file")
    p.add_argument("--tune-id", help=argparse.SUPPRESS)  # the tune a --detach start names
    runs_dir_option(p)


def handle(args) -> int:
    import time

    t0 = time.monotonic()
    from amptui.core.config import presets
    from amptui.core.config import values as config
    from amptui.core.config.scriptsets import check_no_script
    from amptui.core.prepare import preflight
    from amptui.core.run import runids, runs
    from amptui.jobs import launch
    from amptui.tune import plan as T

    if not args.budget > 0:
        raise UserError(f"--budget {args.budget:g}: give the minutes the search may take (> 0)")
    if args.script:  # your own script: the precisions amptui applies to it (cli/tunescript.py)
        from amptui.cli.tunescript import check_script_tune, script_search

        name = check_script_tune(args)
        if args.detach:
            return _detach(args, name)
        search = script_search(args, t0)
        return _report(args, search, search.run())
    if not args.preset:
        raise UserError("tune: name a preset (see `amptui presets list`) or your own script with --script FILE")
    preset = presets.find_preset(args.preset)
    overrides = config.parse_set(args.sets)
    dims = T.parse_keys(args.keys)
    T.check_overrides(overrides, dims)
    check_no_script("tune", preset.config(overrides).run.script)
    if not args.no_save:  # the winner's name, refused now rather than after the search
        _check_winner_name(preset.name)
    launch.resolve_config(preset, overrides)  # a bad preset or --set fails now, before any trial (or detaching)
    if args.detach:
        return _detach(args, preset.name)
    from amptui.tune.runner import Search
    device_type = preflight.device_type(preset.config(overrides).run.device)
    root = runs.runs_root(args.runs_dir)
    tid = runids.check_run_id(args.tune_id) if args.tune_id else T.tune_id(preset.name)
    from amptui.cli.prose import say as words  # wrapped at word boundaries on a terminal

    say = (lambda line: words(line, sys.stderr)) if args.format == "json" else (lambda line: words(line))
    say(f"tune {tid}: {preset.name} on {device_type}, budget {args.budget:g} min; trials appear in "
        f"`amptui runs` as {preset.name}-tune-{tid.rsplit('-', 1)[-1]}-N")
    say(f"estimate: at most {args.budget:g} min, its budget (trials of {T.TRIAL_STEPS} steps, as many as fit); "
        "Ctrl-C stops it (a shorter one: --budget MINUTES)")
    search = Search(preset, overrides, dims, args.budget * 60.0, root, tid, device_type, say, t0=t0)
    result = search.run()
    if T.winner_of(result) and not args.no_save:
        result["saved_preset"] = str(T.save_winner(result))
        T.write_result(T.result_path(root, tid), result)
    return _report(args, search, result)


def _check_winner_name(preset: str) -> None:
    from amptui.core.config import presets

    try:
        presets.check_name(f"{preset}-tuned")
    except UserError as exc:
        raise UserError(f"{exc}: the winner is saved as {preset}-tuned; rename the preset, or add --no-save") from None


def _report(args, search, result: dict) -> int:
    if args.format == "json":
        print(json.dumps(result, indent=2, default=str))
    else:
        print_report(result)
    if search.interrupted:
        return 130
    from amptui.tune import plan as T

    failed = T.failed_search(result)
    if failed:  # nothing crowned, nothing saved: a search of failures is not a verdict
        from amptui.cli.prose import error

        error(f"tune {result.get('tune_id')}: no winner: {failed}")
        return 1
    return 0


def _detach(args, preset_name: str) -> int:
    """This tune, started in the background under a new id, after the refusals that depend on its
    arguments (a preset that does not resolve on this machine: said here, nothing started); what its
    trials find later (missing data) goes to its log, which the dashboard's tune screen shows."""
    from pathlib import Path

    from amptui.core.run import runs
    from amptui.jobs.detached import announce, relaunch
    from amptui.tune import plan as T

    root = runs.runs_root(args.runs_dir, writable=True)
    root.mkdir(parents=True, exist_ok=True)
    tid = T.tune_id(preset_name)
    log = root / f"{tid}.tune.log"
    tail = ["--", *args.script_args] if args.script and args.script_args else []  # a script's own arguments
    proc = relaunch(args.argv, ["--tune-id", tid, "--runs-dir", str(Path(root).resolve()), *tail], log)
    announce("tune", f"tune {tid} started in the background; output: {log}", tune_id=tid, pid=proc.pid,
             log=log.resolve(), result=T.result_path(root, tid).resolve())
    return 0


def print_report(result: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    from amptui.tune import plan as T
    from amptui.tune import report

    console = Console(highlight=False)
    what = f"--script {result['script']}" if result.get("script") else result["preset"]
    table = Table(title=f"amptui tune {what} · {result.get('device_name', '')} · "
                  f"{report.status_words(result)}", title_justify="left")
    for h in T.HEADERS:
        table.add_column(h, justify="right" if h in ("ms/step", "samples/s", "peak mem", "speed-up") else "left",
                         overflow="fold")
    for cells, style in report.rows(result):
        table.add_row(*cells, style=style)
    console.print(table)
    for line in report.notes(result):
        console.print(line, markup=False)
    for knob, how in result.get("always_on", {}).items():
        console.print(f"[dim]{knob}: {how}[/dim]")
    console.print(f"[dim]timing: steady step windows, time-weighted, as compare shows them (warm-up left out: "
                  f"the first 10% of steps, at least {T.WARMUP_WINDOWS} window"
                  + ("" if result.get("script") else f", {T.COMPILE_WARMUP_WINDOWS} with compilation")
                  + f"); speed-up in samples/s against the fp32 reference run; noise band ± {result.get('band') or 0:.4f} "
                  "loss" + (f": {result['band_unjudged']}" if result.get("band_unjudged") else "") + "[/dim]")
    console.print()
    for line in report.explanation(result):
        console.print(line, markup=False)
    if result.get("saved_preset"):
        console.print(f"\nsaved the winner as preset {result['preset']}-tuned ({result['saved_preset']}); "
                      f"run it with: amptui run {result['preset']}-tuned")
    if result.get("use"):
        console.print(f"\nuse the winner: {result['use']}", markup=False)
    if result.get("status") == "interrupted":
        console.print(f"\n[yellow]interrupted after {sum(1 for t in result['trials'] if t.get('run_id'))} "
                      "trial(s): the table shows what was measured[/yellow]")
    console.print(f"[dim]result: {result.get('tune_id')}.tune.json in the runs folder[/dim]")
