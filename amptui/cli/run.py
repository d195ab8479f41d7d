"""`amptui run PRESET` / `--script FILE` / `-m MODULE`: start a trainer, then follow it on the
terminal (cli/run_commands.py) or leave it in the background (`--detach`).

Standard library and amptui's core only at import time: main.py imports every command to build
the parser, so what a command needs loads in its handler (`amptui --help` answers at once).
"""

from __future__ import annotations

import sys
from pathlib import Path

from amptui.cli.parser import PRESET_HELP, runs_dir_option
from amptui.cli.prose import say
from amptui.cli.run_commands import attach
from amptui.core.errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="run a preset without the dashboard",
                       usage="amptui run PRESET [--set KEY=VALUE]... [--detach]\n"
                             "       amptui run --script FILE [--set K=V]... [-- ARGS...]\n"
                             "       amptui run -m MODULE [--set K=V]... [-- ARGS...]")
    p.add_argument("preset", nargs="?", metavar="PRESET", help=PRESET_HELP)
    p.add_argument("--script", metavar="FILE", help="run your own training script, unmodified: amptui's hooks record its "
                   "steps, loss, GradScaler and precision (or its amptui.Monitor does); arguments after -- go "
                   "to the script")
    p.add_argument("-m", "--module", metavar="MODULE", help="the same for a module run as a script "
                   "(python -m MODULE), from the current folder")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a preset key, e.g. --set amp.dtype=bfloat16 (repeatable); a script run takes "
                        "run.name, log.every, log.tensorboard, log.mlflow, numerics.every/depth and torchrun's dist.* keys")
    p.add_argument("--detach", action="store_true",
                   help="start in the background and print one JSON line with the run id")
    p.add_argument("--print-launch", action="store_true",
                   help="print the command to run on every node of a multi-node DDP run, and start nothing")
    runs_dir_option(p)


def handle(args) -> int:
    from amptui.core.config import presets
    from amptui.core.config import values as config
    from amptui.core.run import runs
    from amptui.jobs import launch

    if getattr(args, "module", None):
        if args.script:
            raise UserError("--script and -m name the script twice: give one of them")
        args.script = f"{launch.MODULE_PREFIX}{args.module}"
    if not args.preset and not args.script:
        raise UserError("name a preset (see `amptui presets list`) or a script with --script FILE")
    if args.preset and args.script:  # its model/data/amp/optim keys would be silently ignored
        from amptui.core.config.scriptsets import preset_refusal

        raise UserError(preset_refusal(args.preset, "-m" if getattr(args, "module", None) else "--script"))
    overrides = config.parse_set(args.sets)
    if args.script or "run.script" in overrides:  # before anything is written: keys a script ignores
        from amptui.core.config.scriptsets import check_script_sets

        check_script_sets(overrides)
        if args.script:
            launch.check_script(args.script)
    root = runs.runs_root(args.runs_dir, writable=not args.print_launch)
    preset = presets.find_preset(args.preset) if args.preset else None
    if args.script:
        overrides["run.script"] = args.script
    if args.print_launch:
        return _print_launch(args, preset, overrides)
    notes: list[str] = []
    if preset is not None:
        check_layer_rules(preset.config(overrides))
    run_dir, cfg = launch.create_run(preset, overrides, root, notes=notes)
    for note in notes:  # detached: stdout is the JSON line's, a script's: the script's; on a terminal wrapped
        say(f"note: {note}", sys.stderr if args.detach or cfg.run.script else sys.stdout, hang=6)
    proc = launch.start(run_dir, script_args=args.script_args)
    return attach(run_dir, proc, args.detach, offset=0, kind="run", output_from=0 if cfg.run.script else None)


def check_layer_rules(cfg) -> None:
    """[amp.layers] patterns that match no module of the model: a refused config (exit 2) before
    any run folder is made, as every other bad key is (the model is built on the meta device)."""
    if cfg.amp.layers:
        from amptui.trainer.layers import check_matches

        check_matches(cfg)


def _print_launch(args, preset, overrides) -> int:
    """Each node's `amptui run` line, and the torchrun command it starts there."""
    import shlex

    from amptui.jobs import launch

    cfg = launch.resolve_config(preset, overrides)
    if cfg.dist.mode not in ("ddp", "fsdp"):
        raise UserError("--print-launch is for torchrun runs: add --set dist.mode=ddp (or fsdp)")
    base = ["amptui", "run"] + ([args.preset] if args.preset else []) + _script_option(args.script) + \
        [a for s in args.sets if not s.startswith("dist.node_rank=") for a in ("--set", s)]
    script_args = list(getattr(args, "script_args", []) or [])
    for node in range(cfg.dist.nnodes):
        node_cfg = cfg.with_overrides({"dist.node_rank": node})
        print(f"# node {node} of {cfg.dist.nnodes}:")
        print(shlex.join(base + ["--set", f"dist.node_rank={node}"] + (["--", *script_args] if script_args else [])))
        env = "".join(f"{k}={shlex.quote(v)} " for k, v in launch.torchrun_env(node_cfg, Path("runs/RUN_ID")).items())
        torchrun = launch.torchrun_args(node_cfg, Path("runs/RUN_ID"), script_args=script_args)
        print("#   which runs: " + env + shlex.join(["torchrun", *torchrun]))
    return 0


def _script_option(script: str | None) -> list[str]:
    """`--script FILE` or `-m MODULE`, as the user gave it (a run.script of "-m MODULE" is a module)."""
    from amptui.jobs import launch

    if not script:
        return []
    module = launch.script_module(script)
    return ["-m", module] if module is not None else ["--script", script]
