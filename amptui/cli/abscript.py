"""`amptui ab --script FILE`: the A/B table for the user's own script, in one of two ways.

- `--variant NAME='ARGS'` (repeated): the script's own flags choose each variant's precision;
  each variant is the script run with ARGS (shlex-split) after its `-- ARGS`.
- `--variants fp32,bf16,fp16+scaler`: fp32 runs the script as written; each other variant runs it
  with AMP applied by amptui to its unmodified fp32 loop (run.apply_amp, applied by
  telemetry/scripthooks/applyamp.py). A script that sets its own precision is refused in one line
  (APPLY_REFUSAL): after its fp32 run, or by the hooks at its first autocast or scaled loss.

Both make one A/B group (jobs/groups.py) and end with the compare table a preset's A/B prints. A
`--variant` run keeps its NAME (config run.variant), so `amptui compare` names it later as the A/B did.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

from amptui.core.errors import UserError

INTERLEAVED = ("interleaved: the variants run side by side and take turns, one step record at a time; only the "
               "one whose turn it is trains, the others wait off their step clocks")  # ab and ab --script say it
AS_WRITTEN = "fp32"  # --variants: the script as written (its own float32 loop)
NO_STEP = ("it recorded no training step (amptui saw no optimizer.step() before the script ended: check its "
           "arguments, e.g. a step count of 0)")
# said by `ab` and `ab --script` alike when the variants take turns
INTERLEAVED = ("interleaved: the variants run side by side and take turns, one step record at a time; only the "
               "one whose turn it is trains, the others wait off their step clocks")

def script_variants(args, device_type: str) -> list[tuple[str, dict[str, object], list[str]]]:
    """(name, the run's overrides, the script's extra arguments) for each variant."""
    from amptui.core.config.schema import APPLIED_AMP
    from amptui.core.config.variants import default_variants

    if args.script_variants and args.variants:
        raise UserError("ab --script: choose the variants one way: --variant NAME='ARGS' (the script's own flags) "
                        "or --variants V,... (AMP applied by amptui), not both")
    out: list[tuple[str, dict[str, object], list[str]]] = []
    if args.script_variants:
        for given in args.script_variants:
            name, eq, extra = given.partition("=")
            if not eq or not name.strip():
                raise UserError(f"--variant {given!r}: give NAME='ARGS', e.g. --variant bf16='--dtype bfloat16'")
            try:
                words = shlex.split(extra)
            except ValueError as exc:
                raise UserError(f"--variant {given!r}: {exc}") from None
            out.append((name.strip(), {"run.variant": name.strip()}, words))  # saved: compare names the run
    else:
        names = [n.strip() for n in args.variants.split(",") if n.strip()] if args.variants \
            else default_variants(device_type)
        known = [AS_WRITTEN, *(v for v in APPLIED_AMP if v)]
        unknown = [n for n in names if n not in known]
        if unknown or not names:
            raise UserError(f"--variants {', '.join(unknown) or '(none)'}: with --script amptui applies "
                            f"{', '.join(known)} (fp32: the script as written)")
        out = [(n, {"run.apply_amp": "" if n == AS_WRITTEN else n}, []) for n in names]
    names = [name for name, _, _ in out]
    if len(set(names)) != len(names):
        raise UserError("ab --script: each variant once")
    return out


def _start_detached(args, root: Path, overrides: dict, spec: str):
    """The group, driven by this command line started again in the background (`--group ID`, the
    script's own arguments after `--` kept); returns the group and the driver's pid."""
    from amptui.core.run import runs
    from amptui.jobs import groups
    from amptui.jobs.detached import relaunch

    started: list[int] = []

    def driver(group) -> dict:
        tail = ["--group", group.group_id, "--runs-dir", str(Path(root).resolve())]
        proc = relaunch(args.argv, [*tail, *(["--", *args.script_args] if args.script_args else [])], group.log)
        started.append(proc.pid)
        return runs.launch_identity(proc.pid)

    group = groups.create(root, args.script, Path(args.script).stem, overrides, spec, driver)
    return group, started[0]


def cmd_ab_script(args) -> int:
    from amptui.cli.prose import error, say
    from amptui.cli.run_commands import attach
    from amptui.cli.tables import print_comparison
    from amptui.core.config import values as config
    from amptui.core.config.scriptsets import check_script_sets
    from amptui.core.prepare import preflight
    from amptui.core.run import runs
    from amptui.jobs import groups, launch
    from amptui.jobs.ab import Outcome, interleave_refusal
    from amptui.jobs.detached import announce

    script = args.script
    if not script:
        raise UserError("--variant is for `amptui ab --script FILE`: name the script")
    if args.preset:
        raise UserError(f"ab {args.preset} --script: give a preset or a script, not both")
    overrides = config.parse_set(args.sets)
    check_script_sets(overrides)
    if "run.apply_amp" in overrides:
        raise UserError("--set run.apply_amp: the variants set it; choose them with --variants")
    launch.check_script(script)
    refusal = interleave_refusal(str(overrides.get("dist.mode", "none"))) if args.interleave else None
    if refusal:
        raise UserError(refusal)
    variants = script_variants(args, preflight.device_type(overrides.get("run.device", "auto")))
    if args.estimate:  # as for a preset with a model of its own: nothing started, and why
        why = "a script of your own is not run just to time a step"
        found = {"kind": "estimate", "error": why, "words": f"none ({why})"}
        print(json.dumps(found) if args.format == "json" else f"estimate: {found['words']}")
        return 0
    root = runs.runs_root(args.runs_dir, writable=True)
    if not args.group:  # before any variant runs or a group exists: a refusal leaves nothing behind
        refuse_early(script, args.script_args, overrides, variants)
    spec = ",".join(name for name, _, _ in variants)
    if args.detach:  # this same command line drives the group in the background (the dashboard's `a`)
        group, pid = _start_detached(args, root, overrides, spec)
        announce("ab", f"A/B {group.label} of {group.preset} started in the background; its runs are listed "
                       f"in `amptui runs` as they start\noutput: {group.log}",
                 group_id=group.group_id, label=group.label, pid=pid, log=group.log, group=group.path)
        return 0
    group = groups.find(root, args.group) if args.group else groups.create(
        root, script, Path(script).stem, overrides, spec, lambda group: runs.launch_identity(os.getpid()))
    labels = variant_labels([name for name, _, _ in variants])
    for note in precision_notes(variants, overrides, preflight.device_type(overrides.get("run.device", "auto"))):
        say(f"note: {note}", hang=6)
    # on a terminal the script's own output above the progress line, as `run --script` shows it; in
    # a pipe stdout stays the A/B's lines and table (each run's output.log keeps the script's)
    echoed = 0 if sys.stdout.isatty() else None
    if args.interleave:  # the variants side by side, taking turns at each step record (core/run/turns.py)
        from amptui.cli.run_commands import attach_all
        from amptui.jobs.ab import run_interleaved

        say(INTERLEAVED)
        with group.recording():
            outcome = run_interleaved(
                group, [name for name, _, _ in variants],
                lambda i: launch.create_run(None, {**overrides, **variants[i][1], "run.script": script}, root)[0],
                lambda i, run_dir, env: launch.start(run_dir, script_args=[*args.script_args, *variants[i][2]],
                                                     extra_env=env),
                lambda dirs, procs, tick: attach_all(dirs, procs, labels, tick))
            outcome.failed, outcome.why = [], {}  # judged below, as one after another are
            for i, (name, variant, _) in enumerate(variants):
                run_dir = outcome.run_dirs[i]
                judge_variant(outcome, name, variant, run_dir, 0 if runs.load_run(run_dir).status == "completed"
                              else 1, variants, script)
            group.update(state=outcome.state, error=outcome.error)
    else:
        outcome = Outcome(total=len(variants))
        with group.recording():
            group.update(state="running", variants=[name for name, _, _ in variants])
            for i, (name, variant, extra) in enumerate(variants):
                run_dir, _ = launch.create_run(None, {**overrides, **variant, "run.script": script}, root)
                outcome.run_dirs.append(run_dir)
                group.update(runs=group.runs + [run_dir.name])
                code = attach(run_dir, launch.start(run_dir, script_args=[*args.script_args, *extra]), False, 0,
                              label=labels[i], output_from=echoed)
                if code == 130:
                    outcome.interrupted = True
                    break
                judge_variant(outcome, name, variant, run_dir, code, variants, script)
            group.update(state=outcome.state, error=outcome.error)
    print()
    print_comparison(outcome.run_dirs, args.format)  # a --variant run named by its run.variant (comparenotes)
    if args.format in ("table", "markdown"):
        say(f"again later: amptui compare {' '.join(d.name for d in outcome.run_dirs)}")
    if outcome.error:
        error(outcome.error)
    return outcome.exit_code


def judge_variant(outcome, name: str, variant: dict, run_dir: Path, code: int, variants: list, script: str) -> None:
    """A variant's run that has ended: failed (with the error it recorded), trained nothing, turned
    non-finite where the baseline did not, or refused (the script's own precision under applied AMP;
    a script as written that is no float32 loop)."""
    from amptui.core.config.scriptsets import APPLY_REFUSAL
    from amptui.core.run import runs
    from amptui.jobs.ab import failure_words

    info = runs.load_run(run_dir)
    refused = (info.error or "").partition("SystemExit: ")[2]
    if "so amptui applies none on top" in refused:  # the hooks saw the script's own precision
        raise UserError(refused)
    turned = nan_where_baseline_finite(outcome.run_dirs[0], run_dir) if variant.get("run.apply_amp") else None
    if code != 0:
        outcome.failed.append(name)
        outcome.why[name] = failure_words(run_dir)  # the error its run recorded, said with its name
    elif info.step <= 0:  # exited 0 having trained nothing: no result either (issue 51.10)
        outcome.failed.append(name)
        outcome.why[name] = NO_STEP
    elif turned is not None:  # "completed" with a NaN loss is no result: the A/B says it failed
        outcome.failed.append(f"{name} (its loss turned non-finite at step {turned}, where "
                              f"{variants[0][0]}'s was finite)")
    elif variant.get("run.apply_amp") == "" and info.precision not in ("", AS_WRITTEN) \
            and len(variants) > 1:  # the script as written is not a float32 loop
        raise UserError(APPLY_REFUSAL.format(script=script, what=info.precision_words))


def refuse_early(script: str, script_args: list[str], overrides: dict, variants: list) -> None:
    """AMP applied to a script that sets its own precision, or a GradScaler applied to a loop with
    no optimizer step amptui can see, is refused in one line before any variant runs: the script's
    own precision is found by a short probe (jobs/scriptprobe.py) up to its first step."""
    from amptui.core.config.precision import Precision
    from amptui.core.config.scriptsets import APPLY_REFUSAL, HAND_LOOP_REFUSAL
    from amptui.jobs.scriptprobe import probe_script

    applied = [str(v["run.apply_amp"]) for _, v, _ in variants if v.get("run.apply_amp")]
    if not applied:
        return
    seen = probe_script(script, script_args, overrides)
    if seen is None:  # not at its first step in time: the variants' hooks still refuse what they see
        return
    own = [*seen.get("autocast", []), *(["a GradScaler of its own"] if seen.get("scaler") else [])]
    if own:
        raise UserError(APPLY_REFUSAL.format(script=script, what=", ".join(own)))
    if not seen.get("optimizer_step") and any(Precision.from_variant(v).scaler for v in applied):
        raise UserError(HAND_LOOP_REFUSAL.format(
            script=script, what=f"{seen.get('backward_calls', 0)} backward() calls and no optimizer.step()"))


def precision_notes(variants: list[tuple[str, dict[str, object], list[str]]], overrides: dict[str, object],
                    device_type: str) -> list[str]:
    """What a preset's run says of its precision on this machine ("float16 autocast on the CPU:
    float16 is slow on this CPU ..."), for each variant whose AMP amptui applies to the script:
    said once before the A/B starts (a preset's trainer says it as each run starts)."""
    from amptui.core.config import values as config
    from amptui.core.config.variants import VARIANTS
    from amptui.core.prepare import preflight
    from amptui.machine.dtype_speed import slow_dtypes

    slow = slow_dtypes("cpu") if device_type == "cpu" else None
    notes = []
    for name, variant, _ in variants:
        if not variant.get("run.apply_amp") or name not in VARIANTS:
            continue
        settings = {k: v for k, v in overrides.items() if not k.startswith("amp.")}
        cfg = config.build_config({}, {**settings, **VARIANTS[name], "run.device": device_type})
        notes += [f"{name}: {said}" for said in preflight.odd_combinations(cfg, slow)]
    return notes


def nan_where_baseline_finite(baseline: Path, run_dir: Path) -> int | None:
    """The first step at which `run_dir`'s loss was not finite (a step record's loss null) while
    `baseline`'s at that step was finite; None when there is none (or it is the baseline)."""
    from amptui.core.stream.events import EventReader, primary_events_file
    from amptui.core.stream.records import Step

    def losses(path: Path) -> dict[int, float | None]:
        out: dict[int, float | None] = {}
        reader = EventReader(primary_events_file(path))
        while batch := reader.read(8 * 1024 * 1024):
            out.update((r.step, r.loss) for r in batch
                       if isinstance(r, Step) and isinstance(r.step, int) and "loss" in r)
        return out

    if baseline == run_dir:
        return None
    base = losses(baseline)
    return next((step for step, loss in sorted(losses(run_dir).items())
                 if loss is None and isinstance(base.get(step), (int, float))), None)


def variant_labels(names: list[str]) -> list[str]:
    """Each A/B run's progress-line label: "[3/4] bf16+reduce " padded to the longest name and a
    space, so what follows ("completed: ...") never runs into the name."""
    width = max((len(name) for name in names), default=0) + 1
    return [f"[{i}/{len(names)}] {name:<{width}}" for i, name in enumerate(names, 1)]
