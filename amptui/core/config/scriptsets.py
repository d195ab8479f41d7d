"""Which `--set` keys a script run honours (`amptui run --script` / `-m`), and why the rest are refused.

A script brings its own model, data, optimizer, schedule, precision and loop; amptui only starts
it, records it and names the run. So a script run takes the keys that say how amptui does that:

- run.name, run.description: the run's name in `amptui runs` and the dashboard;
- log.every (steps between step records), log.tensorboard, log.mlflow (the records mirrored as
  TensorBoard scalars, into MLflow);
- numerics.every, numerics.depth: range headroom sampled on the script's model; numerics.plan_every:
  `amptui plan --script`'s per-linear probes; numerics.hygiene_every: precision hygiene's samples;
- amp.autopilot: the precision autopilot, which for a script only advises (docs/autopilot.md);
- run.apply_amp: the precision amptui applies to the script's fp32 loop (`amptui ab --script
  --variants`; telemetry/scripthooks/applyamp.py);
- dist.mode ("none", or "ddp"/"fsdp": the script started once per rank under torchrun; which of
  the two the script really does is its own code's choice), nproc_per_node, nnodes, node_rank,
  rdzv_endpoint, max_restarts: torchrun's launch.

Any other key would be silently ignored (the script's own loop decides it), so it is refused in
one line naming the key and what to change instead. No torch here.
"""

from __future__ import annotations

import shlex
from typing import Any, Mapping

from amptui.core.errors import UserError

SCRIPT_SETTABLE = ("run.name", "run.description", "log.every", "log.tensorboard", "log.mlflow", "numerics.every",
                   "numerics.depth", "numerics.plan_every", "numerics.hygiene_every", "run.apply_amp", "amp.autopilot",
                   "dist.mode", "dist.nproc_per_node", "dist.nnodes", "dist.node_rank",
                   "dist.rdzv_endpoint", "dist.max_restarts")
SCRIPT_DIST_MODES = ("none", "ddp", "fsdp")  # ddp and fsdp both mean: under torchrun
SETTABLE_WORDS = ("run.name, run.description, log.every, log.tensorboard, log.mlflow, numerics.every, numerics.depth, "
                  "run.apply_amp, amp.autopilot, dist.*")

# Why a key is not a script run's, by key and then by section; each says what to do instead.
_WHY = {
    "run.script": "give the script with --script FILE (or -m MODULE)",
    "run.variant": "amptui ab --script sets it: name the variant there, --variant NAME='ARGS'",
    "run.device": "the script puts its model and tensors on a device itself",
    "run.seed": "the script seeds its own random generators",
    "amp": "the script's own torch.autocast and GradScaler decide the precision, and amptui records what "
           "they do; change them in the script",
    "model": "the script builds its own model; change it in the script (or pass it an argument after --)",
    "data": "the script loads its own data; change it in the script (or pass it an argument after --)",
    "optim": "the script makes its own optimizer; change it in the script (or pass it an argument after --)",
    "sched": "the script makes its own schedule; change it in the script (or pass it an argument after --)",
    "run": "the script's own loop decides how long it trains; pass it an argument after --",
    "log": "the script's own loop decides when it evaluates and checkpoints",
    "numerics.trace_nonfinite": "re-running a batch needs amptui's trainer; numerics.every samples a script's model",
    "dist.backend": "the script calls init_process_group itself",
    "debug": "fault injection is amptui's trainer's",
}


# A script that sets its own precision gets none applied on top (telemetry/scripthooks/applyamp.py says
# it when the script enters its own autocast or GradScaler; `amptui ab --script` after its fp32 run).
APPLY_REFUSAL = ("{script}: this script sets its own precision ({what}), so amptui applies none on top; A/B it "
                 "by its own flags instead: amptui ab --script {script} --variant NAME='ARGS' ...")

HAND_LOOP_REFUSAL = ("{script}: no torch.optim optimizer step amptui can see ({what}), so fp16+scaler cannot be "
                     "applied: its GradScaler unscales and steps through the optimizer, and a loop that updates "
                     "its parameters by hand would train on scaled gradients. Use a torch.optim optimizer, or "
                     "A/B fp32,bf16 (no scaler)")
# `amptui ab --script` probes the script before any variant runs (jobs/scriptprobe.py): the hooks
# write what they saw to the file this variable names, at the first optimizer step, then end it.
PROBE_ENV = "AMPTUI_SCRIPT_PROBE"


def script_set_refusal(overrides: Mapping[str, Any]) -> str | None:
    """The one line refusing the first `--set` key (dotted, as parsed) a script run cannot honour,
    or None when it honours them all."""
    for key, value in overrides.items():
        if key == "dist.mode" and value not in SCRIPT_DIST_MODES:
            return (f"--set dist.mode={value}: not for a script run: the script wraps its own model (DataParallel "
                    f"is its code's); dist.mode ddp or fsdp starts it once per rank under torchrun")
        if key in SCRIPT_SETTABLE:
            continue
        why = _WHY.get(key) or _WHY.get(key.partition(".")[0], "the script's own loop decides it")
        return f"--set {key}: not for a script run: {why} (a script run takes {SETTABLE_WORDS})"
    return None


def check_script_sets(overrides: Mapping[str, Any]) -> None:
    """Raise UserError (exit 2) for a `--set` key a script run would ignore (see script_set_refusal)."""
    refusal = script_set_refusal(overrides)
    if refusal:
        raise UserError(refusal)


def preset_refusal(preset: str, how: str = "--script") -> str:
    """The one line refusing `amptui run PRESET --script FILE` (or `-m`): every key a preset sets
    that a script run would honour is a `--set` key (SCRIPT_SETTABLE); the rest (model, data,
    precision, optimizer, schedule) the script's own loop decides, so a preset would be ignored."""
    return (f"{preset} {how}: a script run takes no preset: the script's own loop decides its model, data and "
            f"precision; drop {preset!r} (name the run with --set run.name=NAME; a script run takes {SETTABLE_WORDS})")


def check_no_script(command: str, script: str | None) -> None:
    """`amptui ab` and `amptui tune` set the precision (and batch size, compile) of amptui's own
    trainer; a script's loop decides those itself, so every variant would run the same loop."""
    if script:
        tried = "variants" if command == "ab" else "trials"
        raise UserError(f"run.script = {script!r}: a script's own loop decides its precision, so {command}'s {tried} "
                        "would all run the same loop; run each setup as `amptui run --script FILE` and compare "
                        "them with `amptui compare`")


def preset_script_refusal(source: str, script: object) -> str | None:
    """The one line refusing a preset (a file, or one about to be saved) that names `run.script`,
    None when it names none. A preset is amptui's trainer's config: with a script its model, data,
    precision, optimizer and schedule keys would all be silently ignored (as `amptui run PRESET
    --script FILE` is refused, see preset_refusal). The script is run as itself instead."""
    if not isinstance(script, str) or not script:  # a wrong type is the schema's error, "" is the trainer
        return None
    how = shlex.join(script_option(script))
    return (f"{source}: run.script = {script!r}: a preset names no script: the script's own loop decides its "
            f"model, data and precision, so the preset's other keys would be ignored; remove run.script, or run "
            f"the script as `amptui run {how}` (a script run takes {SETTABLE_WORDS})")


def script_option(script: str) -> list[str]:
    """The `amptui run` option that names a `run.script`: ["-m", MODULE] for "-m MODULE", else
    ["--script", FILE]."""
    return ["-m", script[3:].strip()] if script.startswith("-m ") else ["--script", script]
