"""`amptui tune --script FILE [--budget MIN] [-- ARGS]`: the tune's search over the precisions
amptui applies to an unmodified fp32 script (tune/scriptsearch.py); the winner is named as the
command that runs it (`amptui run --script FILE --set run.apply_amp=bf16 -- ARGS`).

Everything it cannot take is refused in one line before anything is written: a preset beside the
script, a `--set` key a script run ignores, `--keys` other than the precision.
"""

from __future__ import annotations

import sys
from pathlib import Path

from amptui.core.errors import UserError


def check_script_tune(args) -> str:
    """The refusals, before anything is written; returns the name its trials are listed under."""
    from amptui.core.config import values as config
    from amptui.core.config.scriptsets import check_script_sets
    from amptui.jobs import launch
    from amptui.tune.scriptsearch import script_keys

    script = args.script
    if args.preset:
        raise UserError(f"tune {args.preset} --script: give a preset or a script, not both")
    overrides = config.parse_set(args.sets)
    check_script_sets(overrides)
    if "run.apply_amp" in overrides:
        raise UserError("--set run.apply_amp: tune --script searches it (each trial sets its own)")
    script_keys(args.keys)
    launch.check_script(script)
    return Path(script).stem


def script_search(args, t0: float):
    """The search (tune/scriptsearch.py), announced, ready to run."""
    from amptui.cli.prose import say as words
    from amptui.core.config import values as config
    from amptui.core.prepare import preflight
    from amptui.core.run import runids, runs
    from amptui.tune import plan as T
    from amptui.tune.scriptsearch import ScriptSearch

    script, name = args.script, Path(args.script).stem
    overrides = config.parse_set(args.sets)
    device_type = preflight.device_type("auto")  # until the fp32 run shows the device the script chose
    root = runs.runs_root(args.runs_dir)
    tid = runids.check_run_id(args.tune_id) if args.tune_id else T.tune_id(name)

    say = (lambda line: words(line, sys.stderr)) if args.format == "json" else (lambda line: words(line))
    said_args = f" with {' '.join(args.script_args)}" if args.script_args else ""
    say(f"tune {tid}: {script}{said_args} on {device_type}, budget {args.budget:g} min; trials appear in "
        f"`amptui runs` as {name}-tune-{tid.rsplit('-', 1)[-1]}-N")
    say(f"each trial is the script's whole run with AMP applied by amptui (its own length: fewer steps, fewer "
        f"seconds); at most {args.budget:g} min, its budget; Ctrl-C stops it")
    return ScriptSearch(script, list(args.script_args), overrides, args.budget * 60.0, root, tid, device_type,
                        say, t0=t0)
