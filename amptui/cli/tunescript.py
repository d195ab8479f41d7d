"""`amptui tune --script FILE [--budget MIN] [-- ARGS]`: the tune's search over the precisions
amptui applies to an unmodified fp32 script (tune/scriptsearch.py); the winner is named as the
command that runs it (`amptui run --script FILE --set run.apply_amp=bf16 -- ARGS`).

Everything it cannot take is refused in one line before anything is written: a preset beside the
script, a `--set` key a script run ignores, `--keys` other than the precision.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from amptui.core.errors import UserError


def handle_script(args, t0: float) -> int:
    from amptui.cli.prose import say as words
    from amptui.cli.tune import _detach, print_report
    from amptui.core import preflight
    from amptui.core.config import values as config
    from amptui.core.config.scriptsets import check_script_sets
    from amptui.core.run import runids, runs
    from amptui.jobs import launch
    from amptui.tune import plan as T
    from amptui.tune.scriptsearch import ScriptSearch, script_keys

    script = args.script
    if args.preset:
        raise UserError(f"tune {args.preset} --script: give a preset or a script, not both")
    overrides = config.parse_set(args.sets)
    check_script_sets(overrides)
    if "run.apply_amp" in overrides:
        raise UserError("--set run.apply_amp: tune --script searches it (each trial sets its own)")
    script_keys(args.keys)
    launch.check_script(script)
    name = Path(script).stem
    if args.detach:
        return _detach(args, name)
    device_type = preflight.device_type("auto")  # the script picks its device; this is where it would
    root = runs.runs_root(args.runs_dir)
    tid = runids.check_run_id(args.tune_id) if args.tune_id else T.tune_id(name)

    say = (lambda line: words(line, sys.stderr)) if args.format == "json" else (lambda line: words(line))
    said_args = f" with {' '.join(args.script_args)}" if args.script_args else ""
    say(f"tune {tid}: {script}{said_args} on {device_type}, budget {args.budget:g} min; trials appear in "
        f"`amptui runs` as {name}-tune-{tid.rsplit('-', 1)[-1]}-N")
    say(f"each trial is the script's whole run with AMP applied by amptui (its own length: fewer steps, fewer "
        f"seconds); at most {args.budget:g} min, its budget; Ctrl-C stops it")
    search = ScriptSearch(script, list(args.script_args), overrides, args.budget * 60.0, root, tid, device_type,
                          say, t0=t0)
    result = search.run()
    if args.format == "json":
        print(json.dumps(result, indent=2, default=str))
    else:
        print_report(result)
    return 130 if search.interrupted else 0
