"""`amptui plan PRESET` / `amptui plan --script FILE [-- ARGS]`: which linear can run in which
precision, from one short sampled run: every recipe's numerics per linear on the same tensors,
each linear's GEMM shapes and the speed-up a named GPU's roofline predicts, a choice per linear
with its reason (core/planning/plan.py); `--save NAME` keeps it as a preset with `[amp.layers]`.

Standard library and amptui's core only at import time (main.py imports every command).
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from amptui.cli.parser import PRESET_HELP, runs_dir_option
from amptui.cli.planwatch import FIRST_STEP_BUDGET_S
from amptui.cli.stop import positive_seconds
from amptui.core.errors import UserError

DEFAULT_STEPS = 24
SAMPLES = 4  # sampled steps in a plan's run (the last step and evenly before it)


def add_parser(sub) -> None:
    p = sub.add_parser("plan", help="a per-layer precision plan: every recipe's numerics and predicted speed-up",
                       usage="amptui plan PRESET [--for GPU] [--steps N] [--format table|json] [--save NAME]\n"
                             "       amptui plan --script FILE [--for GPU] [...] [-- ARGS...]")
    p.add_argument("preset", nargs="?", metavar="PRESET", help=PRESET_HELP)
    p.add_argument("--script", metavar="FILE", help="plan your own training script, unmodified (its first "
                   "--steps optimizer steps are sampled, then it is stopped); arguments after -- go to the script")
    p.add_argument("--for", dest="device", metavar="GPU", help="the GPU the speed-ups are predicted for (H100, "
                   "H200, B200, A100, L40S, ...); default: this machine's GPU; on a CPU it must be named")
    p.add_argument("--steps", type=int, default=DEFAULT_STEPS, metavar="N",
                   help=f"optimizer steps of the sampled run (default {DEFAULT_STEPS}; {SAMPLES} of them are sampled)")
    p.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or json")
    p.add_argument("--save", metavar="NAME", help="presets only: save the plan as a preset NAME, the preset with "
                   "[amp.layers] giving each linear its planned precision (a script's precision is its own code's)")
    p.add_argument("--verify", action="store_true", help="with --save: then run the A/B of all-bf16 against the "
                   "saved plan (--steps steps each) and put the measured speed-up and loss beside the prediction")
    p.add_argument("--budget", type=positive_seconds, default=FIRST_STEP_BUDGET_S, metavar="SECONDS",
                   help="--script: how long to wait for the script's first optimizer step before it is ended "
                        f"(default {FIRST_STEP_BUDGET_S:g})")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a preset key for the sampled run (repeatable)")
    runs_dir_option(p)


def handle(args) -> int:
    from amptui.core.config import presets
    from amptui.core.config import values as config
    from amptui.core.planning import plan as planner
    from amptui.core.run import runs
    from amptui.jobs import launch

    if not args.preset and not args.script:
        raise UserError("name a preset (see `amptui presets list`) or a script with --script FILE")
    if args.preset and args.script:
        raise UserError("give a preset or --script FILE, not both")
    if args.steps < 2:
        raise UserError(f"--steps {args.steps}: a plan needs at least 2 steps")
    roof = device_roof(args.device)  # before anything starts: an unknown GPU is one line
    preset = presets.find_preset(args.preset) if args.preset else None
    if args.save:
        check_save(args)
    if args.verify and not args.save:
        raise UserError("--verify runs the A/B of a saved plan: add --save NAME")
    every = max(1, args.steps // SAMPLES)
    overrides = config.parse_set(args.sets)
    overrides["numerics.plan_every"] = every
    if args.script:
        from amptui.core.config.scriptsets import check_script_sets

        check_script_sets(overrides)
        launch.check_script(args.script)
        overrides["run.script"] = args.script
        overrides["run.max_steps"] = args.steps  # the hooks stop it after exactly --steps steps
    else:
        overrides.update({"run.max_steps": args.steps, "log.checkpoint_every": 0, "log.eval_every": 0})
    root = runs.runs_root(args.runs_dir, writable=True)
    if preset is not None:
        from amptui.cli.run import check_layer_rules

        check_layer_rules(preset.config(overrides))
    run_dir, cfg = launch.create_run(preset, overrides, root, notes=[])
    samples, start = sampled_run(run_dir, launch.start(run_dir, script_args=args.script_args), args)
    if not samples:
        raise UserError(f"run {run_dir.name} recorded no plan sample (it ended before step {every}, or has no "
                        "nn.Linear): see amptui watch " + run_dir.name)
    step_flops = start.get("step_flops") if isinstance(start.get("step_flops"), (int, float)) else None
    plan = planner.make_plan(samples, roof, step_flops=step_flops * cfg.amp.accumulate if step_flops else None)
    saved = save(args.save, preset, cfg, plan, args) if args.save else None
    doc: dict[str, Any] = {"run_id": run_dir.name, "preset": cfg.run.name, **planner.as_json(plan),
                           **({"saved": str(saved)} if saved else {})}
    if args.verify:
        from amptui.cli import planverify

        with contextlib.redirect_stdout(sys.stderr if args.format == "json" else sys.stdout):
            doc["verify"] = planverify.verify(args, preset, plan, args.save, root)
    from amptui.core.safefile import atomic_write_text

    atomic_write_text(run_dir / planner.PLAN_FILE, json.dumps(doc, indent=2))  # for the dashboard's plan screen
    if args.format == "json":
        print(json.dumps(doc, indent=2))
    else:
        from amptui.cli import plantable, prose

        prose.say(plantable.as_text(run_dir.name, plan, where=start.get("device")))
        if saved:
            prose.say(f"saved as preset {args.save!r} ({saved}); verify it against all-bf16: amptui ab "
                      f"{cfg.run.name} --variants bf16,plan:{args.save}")
        if "verify" in doc:
            from amptui.cli import planverify

            prose.say(planverify.words(doc["verify"]))
    return 0


def device_roof(name: str | None):
    """The roofline the speed-ups are predicted on: the named GPU, else this machine's GPU."""
    from amptui.core.planning import roofline

    if name:
        return roofline.roof_for(name)
    roof = local_roof()
    if roof is None:
        raise UserError("no GPU here to predict speed-ups for: name one with --for GPU (known: "
                        + ", ".join(sorted(roofline.DEVICES)) + "); the numerics are measured here either way")
    return roof


def local_roof():
    """This machine's GPU in the roofline's table (its name as torch says it), or None."""
    import torch  # only when no GPU was named

    from amptui.core.errors import ConfigError
    from amptui.core.planning import roofline

    if not torch.cuda.is_available():
        return None
    words = torch.cuda.get_device_name().replace("NVIDIA", "").split()
    for size in range(len(words), 0, -1):  # "H100 80GB HBM3": the longest run of words the table knows
        for first in range(len(words) - size + 1):
            with contextlib.suppress(ConfigError):
                return roofline.roof_for(" ".join(words[first:first + size]))
    return None


def sampled_run(run_dir: Path, proc, args) -> tuple[list[dict], dict]:
    """Follow the run to its end (a script is stopped after --steps steps); its plan samples and
    its start record. With --format json the progress goes to stderr: stdout is the JSON."""
    from amptui.cli.planwatch import FirstStepWatch, script_ends_with_plan
    from amptui.cli.run_commands import attach
    from amptui.core.run.runfiles import RunFolder
    from amptui.core.stream.events import primary_events_file, read_events
    from amptui.core.stream.records import PlanSample, Start

    out = sys.stderr if args.format == "json" else sys.stdout
    watch = FirstStepWatch(run_dir, proc, args.budget) if args.script else None
    try:
        with contextlib.redirect_stdout(out), script_ends_with_plan(proc):
            attach(run_dir, proc, False, 0, label="plan: ", output_from=0 if args.script else None)
    finally:
        if watch is not None:
            watch.done()
    if watch is not None and watch.expired:
        raise UserError(f"plan --script: {args.script} made no optimizer step in {args.budget:g} s (--budget), so "
                        "there was nothing to sample and it was ended; a plan samples a training loop's optimizer "
                        f"steps (its output: amptui watch {run_dir.name}; a slow first step: a longer --budget)")
    records = read_events(primary_events_file(run_dir)) if RunFolder(run_dir).events.exists() else []
    start = next((r.wire for r in records if isinstance(r, Start)), {})
    return [r.wire for r in records if isinstance(r, PlanSample)], start


def check_save(args) -> None:
    """`--save NAME`'s refusals, before anything runs: they depend on the arguments only."""
    from amptui.core.config import presets

    if args.script:
        raise UserError("--save keeps a preset's plan: a script's precision is its own code's (run the plan "
                        "without --save and set the table's choices in the script)")
    presets.check_name(args.save)
    if presets.is_builtin(args.save):
        raise UserError(f"--save {args.save}: preset {args.save!r} is built in; choose another name")


def save(name: str, preset, cfg, plan, args) -> Path:
    """The preset, its sampled run's keys taken back out, with the plan as [amp.layers]."""
    from amptui.core.config import presets
    from amptui.core.config import values as config
    from amptui.core.planning import plan as planner

    base = preset.config(config.parse_set(args.sets))
    keys = {"amp.layers": planner.layer_table(plan), "run.name": name}  # runs of it are listed under its own name
    return presets.save_preset(name, base.with_overrides(keys), force=True,
                               source=f"amptui plan {preset.name} --for {plan.device.name}")
