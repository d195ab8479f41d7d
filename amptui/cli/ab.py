"""`amptui ab PRESET`: run a preset once per precision variant, then compare them (jobs/ab.py): here
in the terminal, or with --detach as a group driven in the background.

Standard library and amptui's core only at import time: main.py imports every command to build
the parser, so what a command needs loads in its handler (`amptui --help` answers at once).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from amptui.cli.abscript import INTERLEAVED, variant_labels
from amptui.cli.compare import print_emulation_notes
from amptui.cli.parser import PRESET_HELP, runs_dir_option
from amptui.cli.run_commands import attach, attach_all
from amptui.core.config.variants import variants_help
from amptui.core.errors import UserError
from amptui.jobs.detached import announce


def add_parser(sub) -> None:
    p = sub.add_parser("ab", help="run a preset (or your own script) once per precision variant, then compare them",
                       usage="amptui ab PRESET [--variants V,...] [--set K=V]...\n"
                             "       amptui ab PRESET --interleave [--variants V,...]\n"
                             "       amptui ab --script FILE --variants V,... [-- ARGS...]\n"
                             "       amptui ab --script FILE --variant N=ARGS... [-- ARGS]")
    p.add_argument("preset", nargs="?", metavar="PRESET", help=PRESET_HELP)
    p.add_argument("--variants", metavar="V,V,...",
                   help=f"from {variants_help()} (tf32: CUDA only; default: fp32,fp16,fp16+scaler on CUDA, "
                        "fp32,bf16 on CPU); with --script: fp32 runs the script as written, the others with AMP "
                        "applied by amptui to its unmodified fp32 loop")
    p.add_argument("--script", metavar="FILE", help="A/B your own training script (see docs/your-own-code.md)")
    p.add_argument("--variant", dest="script_variants", action="append", default=[], metavar="NAME='ARGS'",
                   help="with --script: a variant chosen by the script's own flags, ARGS appended to its "
                        "arguments (repeatable), e.g. --variant bf16='--dtype bfloat16'")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a preset key in every variant, e.g. --set run.max_steps=200 (repeatable; "
                        "not the amp.* keys the variants set)")
    p.add_argument("--interleave", action="store_true",
                   help="run the variants side by side, taking turns one step record (log.every steps) at a time, "
                        "so their timed windows alternate and a slow drift of the machine's speed falls on all "
                        "alike; the speed-up then comes from windows measured alternately. Both models are in "
                        "memory at once; one process per variant (not dist.mode dp/ddp/fsdp); with --script the "
                        "script's hooks hand the turn on at each step record")
    p.add_argument("--format", choices=("table", "markdown", "csv", "json"), default="table",
                   help="how to print the comparison at the end (default: table)")
    p.add_argument("--detach", action="store_true", help="run the A/B in the background (its output in "
                   "RUNS/.ab/GROUP.log) and print one JSON line with its group id")
    p.add_argument("--estimate", action="store_true", help="a preset's A/B: time one step of each variant and "
                   "print how long the A/B would take (one JSON line with --format json); start nothing. With "
                   "--script it times nothing and says so (a script's length is its own and amptui does not run "
                   "your code only to time it): it prints \"estimate: none (...)\" and exits 0")
    p.add_argument("--group", help=argparse.SUPPRESS)  # the group a detached A/B drives (made by --detach)
    runs_dir_option(p)


def handle(args) -> int:
    """The CLI's and the dashboard's A/B (jobs/ab.py): here in the terminal, or with --detach as a
    group driven in the background by this same command line (`--group ID`)."""
    from amptui.cli.prose import error, say
    from amptui.cli.run import check_layer_rules
    from amptui.cli.tables import print_comparison
    from amptui.core.comparison import runsummary
    from amptui.core.config import presets
    from amptui.core.config import values as config
    from amptui.core.config import variants as ab
    from amptui.core.config.precision import Precision
    from amptui.core.config.scriptsets import check_no_script
    from amptui.core.prepare import preflight
    from amptui.core.run import runs
    from amptui.jobs import ab as abjob
    from amptui.jobs import groups, launch
    from amptui.machine.hardware import emulated_dtype_notice

    if args.script or args.script_variants:
        from amptui.cli.abscript import cmd_ab_script

        return cmd_ab_script(args)
    if not args.preset:
        raise UserError("ab: name a preset (see `amptui presets list`) or your own script with --script FILE")
    root = runs.runs_root(args.runs_dir, writable=True)
    preset = presets.find_preset(args.preset)
    overrides = config.parse_set(args.sets)
    ab.check_overrides(overrides)
    if not args.group:  # the variants are checked before a group exists: a refusal leaves nothing behind
        planned = preset.config(overrides)
        check_no_script("ab", planned.run.script)
        expanded = ab.expand(args.variants, preflight.device_type(planned.run.device), planned.dist.mode)
        refusal = abjob.interleave_refusal(planned.dist.mode) if args.interleave else None
        if refusal:
            raise UserError(refusal)
        for _, variant in expanded:  # [amp.layers] that match no module: refused before a group exists
            check_layer_rules(preset.config({**overrides, **variant}))
            if args.detach:  # what this machine refuses (CUDA asked on a CPU box): said here, not in the log
                launch.resolve_config(preset, {**overrides, **variant})
        if args.estimate:  # how long it would take, and nothing started (the dashboard asks this first)
            from amptui.cli.estimate import ab_estimate_or_why

            found = ab_estimate_or_why(preset, overrides, expanded)
            print(json.dumps(found) if args.format == "json" else f"estimate: {found['words']}")
            return 0
    if args.detach:
        group, pid = abjob.start_detached(root, preset, args.preset, overrides, args.variants, args.argv)
        announce("ab", f"A/B {group.label} of {preset.name} started in the background; its runs are listed "
                       f"in `amptui runs` as they start\noutput: {group.log}",
                 group_id=group.group_id, label=group.label, pid=pid, log=group.log, group=group.path)
        return 0
    group = groups.find(root, args.group) if args.group else \
        abjob.start_here(root, preset, args.preset, overrides, args.variants)
    with group.recording():
        planned = preset.config(overrides)
        device = preflight.device_type(planned.run.device)
        variants = ab.expand(args.variants, device, planned.dist.mode)
        # Check every variant before the first one starts: a bad combination fails now, not halfway.
        for name, variant in variants:
            resolved = launch.resolve_config(preset, {**overrides, **variant})
            precision = Precision.from_config(resolved, resolved.run.device)
            notice = emulated_dtype_notice(resolved.run.device, precision.autocast, precision.dtype)
            if notice:
                say(f"note: variant {name}: {notice}")

        if not args.group:  # a detached A/B's driver: the dashboard asked for the estimate first
            from amptui.cli.estimate import said_before_start

            say(said_before_start(preset, overrides, variants))
        labels = variant_labels([name for name, _ in variants])

        if args.interleave:
            say(INTERLEAVED)
            outcome = abjob.run_interleaved(
                group, [name for name, _ in variants],
                lambda i: launch.create_run(preset, {**overrides, **variants[i][1]}, root)[0],
                lambda i, run_dir, env: launch.start(run_dir, extra_env=env),
                lambda dirs, procs, tick: attach_all(dirs, procs, labels, tick))
        else:
            def follow(run_dir: Path, proc, index: int, name: str) -> int:
                return attach(run_dir, proc, False, 0, label=labels[index - 1])

            outcome = abjob.run_variants(group, preset, overrides, variants, root, follow)
    print()
    print_comparison(outcome.run_dirs, args.format)
    if args.format in ("table", "markdown"):
        print_emulation_notes([runsummary.summarize(d) for d in outcome.run_dirs])
        say(f"again later: amptui compare {' '.join(d.name for d in outcome.run_dirs)}")
    if outcome.error:
        error(outcome.error)
    return outcome.exit_code
