"""`amptui`: the dashboard, and the commands that work without it.

Only the standard library and amptui's core are imported here; torch and textual load when a
command needs them, so `amptui --help` answers at once.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from . import __version__
from .core.errors import UserError

EXAMPLES = """\
examples:
  amptui                                     open the dashboard
  amptui run quickstart                      train the default preset here, with live numbers
  amptui run mlp-recipe --set amp.autocast=false --set run.max_steps=20
  amptui run scaler-lab --detach             start in the background, print the run id
  amptui runs                                list runs and their status
  amptui stop RUN_ID / amptui resume RUN_ID  stop with a checkpoint / continue from it
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="amptui", description="A terminal dashboard for PyTorch automatic mixed precision (AMP) training.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"amptui {__version__}")
    parser.add_argument("--runs-dir", metavar="DIR", help="where runs live (default $AMPTUI_RUNS_DIR or ./runs)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def runs_dir_option(p):
        p.add_argument("--runs-dir", metavar="DIR", default=argparse.SUPPRESS,
                       help="where runs live (default $AMPTUI_RUNS_DIR or ./runs)")

    p = sub.add_parser("run", help="run a preset without the dashboard",
                       usage="amptui run PRESET [--set KEY=VALUE]... [--detach] | amptui run [PRESET] --script FILE "
                             "[--set ...] [-- ARGS...]")
    p.add_argument("preset", nargs="?", help="a built-in or saved preset name, or a path to a .toml file")
    p.add_argument("--script", metavar="FILE", help="launch your own training script (which writes events with "
                   "amptui.Monitor); arguments after -- go to the script")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a preset key, e.g. --set amp.dtype=bfloat16 (repeatable)")
    p.add_argument("--detach", action="store_true", help="start in the background and print the run id")
    p.add_argument("--print-launch", action="store_true",
                   help="print the command to run on every node of a multi-node DDP run, and start nothing")
    runs_dir_option(p)

    p = sub.add_parser("stop", help="stop a running run gracefully (checkpoint, then status stopped)")
    p.add_argument("run_id")
    runs_dir_option(p)

    p = sub.add_parser("resume", help="continue a stopped, failed or killed run from its last checkpoint")
    p.add_argument("run_id")
    p.add_argument("--detach", action="store_true", help="continue in the background")
    runs_dir_option(p)

    p = sub.add_parser("watch", help="open the dashboard's run screen on a run, live or finished")
    p.add_argument("run_id", help="the run's id, as `amptui runs` lists it")
    runs_dir_option(p)

    p = sub.add_parser("ab", help="run a preset once per precision variant, then compare them")
    p.add_argument("preset")
    p.add_argument("--variants", metavar="V,V,...",
                   help="from fp32, fp16, fp16+scaler, bf16, bf16+scaler (default: fp32,fp16,fp16+scaler on "
                        "CUDA, fp32,bf16 on CPU)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--format", choices=("table", "markdown", "csv", "json"), default="table")
    runs_dir_option(p)

    p = sub.add_parser("compare", help="the tutorials' table for some runs (speed-up and saving against the first)")
    p.add_argument("run_ids", nargs="+", metavar="RUN_ID")
    p.add_argument("--format", choices=("table", "markdown", "csv", "json"), default="table")
    runs_dir_option(p)

    p = sub.add_parser("runs", help="list runs")
    p.add_argument("--format", choices=("table", "json"), default="table")
    runs_dir_option(p)

    p = sub.add_parser("doctor", help="what this machine offers for AMP, and which dtype to use")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--no-bench", action="store_true", help="skip the matmul measurements")

    p = sub.add_parser("presets", help="list, show or save presets")
    psub = p.add_subparsers(dest="action", metavar="ACTION")
    psub.add_parser("list", help="built-in and saved presets")
    show = psub.add_parser("show", help="print a preset with every key resolved")
    show.add_argument("name")
    show.add_argument("--raw", action="store_true", help="print the file as written")
    save = psub.add_parser("save", help="save a preset (with overrides) under a new name")
    save.add_argument("name")
    save.add_argument("--from", dest="source", required=True, metavar="PRESET")
    save.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    save.add_argument("--force", action="store_true", help="overwrite a saved preset of that name")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after a bare "--" belongs to the user's script (`amptui run --script x.py -- ARGS`).
    script_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    args = build_parser().parse_args(argv)
    args.script_args = script_args
    try:
        handler = COMMANDS.get(args.command or "dashboard")
        return handler(args) or 0
    except UserError as exc:
        print(f"amptui: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


# --- commands ------------------------------------------------------------------------------------

def cmd_run(args) -> int:
    from .core import config, launch, presets

    if not args.preset and not args.script:
        raise UserError("name a preset (see `amptui presets list`) or a script with --script FILE")
    preset = presets.find_preset(args.preset) if args.preset else None
    overrides = config.parse_set(args.sets)
    if args.script:
        overrides["run.script"] = args.script
    if args.print_launch:
        return _print_launch(args, preset, overrides)
    run_dir, cfg = launch.create_run(preset, overrides, args.runs_dir)
    proc = launch.start(run_dir, script_args=args.script_args)
    return _attach(run_dir, proc, args.detach, offset=0)


def _print_launch(args, preset, overrides) -> int:
    """Each node's `amptui run` line, and the torchrun command it starts there."""
    import shlex

    from .core import launch

    cfg = launch.resolve_config(preset, overrides)
    if cfg.dist.mode != "ddp":
        raise UserError("--print-launch is for DDP runs: add --set dist.mode=ddp")
    base = ["amptui", "run"] + ([args.preset] if args.preset else []) + \
        [a for s in args.sets if not s.startswith("dist.node_rank=") for a in ("--set", s)]
    for node in range(cfg.dist.nnodes):
        node_cfg = cfg.with_overrides({"dist.node_rank": node})
        print(f"# node {node} of {cfg.dist.nnodes}:")
        print(shlex.join(base + ["--set", f"dist.node_rank={node}"]))
        print("#   which runs: " + shlex.join(["torchrun", *launch.torchrun_args(node_cfg, Path("runs/RUN_ID"))]))
    return 0


def cmd_resume(args) -> int:
    from .core import launch, runs

    run_dir = runs.run_dir(runs.runs_root(args.runs_dir), args.run_id)
    launch.check_resumable(run_dir)
    offset = _size(run_dir / "events.jsonl")
    proc = launch.start(run_dir, resume=True)
    return _attach(run_dir, proc, args.detach, offset=offset)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _attach(run_dir: Path, proc, detach: bool, offset: int, label: str = "") -> int:
    """Follow a just-started trainer on the terminal, or leave it running and print its id.

    With a `label` (one run of an A/B) only one progress line and a summary are shown."""
    from .console import ProgressPrinter
    from .core.events import EventReader, primary_events_file

    if detach:
        print(f"started in the background; follow it with: amptui watch {run_dir.name}")
        print(f"output: {run_dir / 'output.log'}")
        print(run_dir.name)
        return 0
    reader = EventReader(run_dir / "events.jsonl", offset=offset)
    printer = ProgressPrinter(label=label)
    end = None
    stopping = False
    while end is None:
        try:
            if reader.offset == offset and primary_events_file(run_dir) != reader.path:
                reader = EventReader(primary_events_file(run_dir))  # this node holds no rank 0
            batch = reader.read()
            printer.feed(batch)
            end = next((r for r in batch if r.get("kind") == "end"), None)
            if end is None:
                if proc.poll() is not None:  # gone without an end record: one last look, then give up
                    batch = reader.read()
                    printer.feed(batch)
                    end = next((r for r in batch if r.get("kind") == "end"), None)
                    if end is None:
                        break
                time.sleep(0.1)
        except KeyboardInterrupt:
            if stopping:  # a second Ctrl-C: leave it running in the background
                printer.close()
                print(f"left running in the background: amptui watch {run_dir.name}", file=sys.stderr)
                return 130
            stopping = True
            print("\nstopping (checkpoint first); Ctrl-C again to leave it running", file=sys.stderr)
            from .core.launch import request_stop

            request_stop(run_dir)
    printer.close()
    try:
        proc.wait(timeout=30)
    except Exception:
        pass
    if label:
        if stopping:
            return 130
        return 0 if end is not None and end["status"] == "completed" else 1
    if end is None:
        print(f"amptui: error: the trainer exited without finishing (exit code {proc.returncode}); "
              f"see {run_dir / 'output.log'}", file=sys.stderr)
        return 1
    print(f"run {run_dir.name}: {end['status']}")
    if end["status"] == "failed":
        error = end.get("error") or {}
        print(f"amptui: error: {error.get('type', 'Error')}: {error.get('message', '')} "
              f"(details in {run_dir / 'output.log'})", file=sys.stderr)
        return 1
    if end["status"] == "stopped":
        print(f"resume with: amptui resume {run_dir.name}")
        return 130 if stopping else 0
    return 0


def cmd_ab(args) -> int:
    from .core import ab, compare, config, launch, preflight, presets

    preset = presets.find_preset(args.preset)
    overrides = config.parse_set(args.sets)
    ab.check_overrides(overrides)
    device = preflight.device_type(preset.config(overrides).run.device)
    variants = ab.expand(args.variants, device)
    # Check every variant before the first one starts: a bad combination fails now, not halfway.
    for _, variant in variants:
        launch.resolve_config(preset, {**overrides, **variant})
    run_dirs, failed, interrupted = [], [], False
    for i, (name, variant) in enumerate(variants, 1):
        run_dir, _ = launch.create_run(preset, {**overrides, **variant}, args.runs_dir)
        run_dirs.append(run_dir)
        code = _attach(run_dir, launch.start(run_dir), False, 0, label=f"[{i}/{len(variants)}] {name:<11}")
        if code == 130:  # Ctrl-C: the A/B ends here; the variants after this one are not started
            interrupted = True
            break
        if code != 0:
            failed.append(name)
    rows = compare.compare_rows([compare.summarize(d) for d in run_dirs])
    print()
    print(compare.render(rows, args.format))
    if args.format in ("table", "markdown"):
        print(f"\n{compare.TIMING_NOTE}")
        print(f"again later: amptui compare {' '.join(d.name for d in run_dirs)}")
    if interrupted:
        print(f"amptui: error: interrupted after {len(run_dirs)} of {len(variants)} variants", file=sys.stderr)
        return 130
    if failed:
        print(f"amptui: error: variant(s) {', '.join(failed)} did not complete", file=sys.stderr)
        return 1
    return 0


def cmd_compare(args) -> int:
    from .core import compare, runs

    root = runs.runs_root(args.runs_dir)
    dirs = [runs.run_dir(root, run_id) for run_id in args.run_ids]
    print(compare.render(compare.compare_rows([compare.summarize(d) for d in dirs]), args.format))
    if args.format in ("table", "markdown"):
        print(f"\n{compare.TIMING_NOTE}")
    return 0


def cmd_stop(args) -> int:
    from .core import launch, runs

    run_dir = runs.run_dir(runs.runs_root(args.runs_dir), args.run_id)
    info = launch.stop(run_dir)
    if info.status == "running":
        print(f"run {info.run_id}: stop requested; still finishing its current step (check `amptui runs`)")
        return 1
    print(f"run {info.run_id}: {info.status} at step {info.step}")
    return 0 if info.status == "stopped" else 1


def cmd_runs(args) -> int:
    from .console import runs_table
    from .core import runs

    found = runs.list_runs(runs.runs_root(args.runs_dir))
    if args.format == "json":
        print(json.dumps([r.as_json() for r in found], indent=2))
    elif not found:
        print(f"no runs in {runs.runs_root(args.runs_dir)} (start one with `amptui run quickstart`)")
    else:
        print(runs_table(found))
    return 0


def cmd_presets(args) -> int:
    from .console import table
    from .core import config, presets

    action = args.action or "list"
    if action == "list":
        rows = [("NAME", "KIND", "DESCRIPTION")]
        rows += [(p.name, "built-in" if p.builtin else "saved", p.description) for p in presets.list_presets()]
        print(table(rows))
        print(f"\nsaved presets live in {presets.saved_dir()}")
    elif action == "show":
        preset = presets.find_preset(args.name)
        if args.raw:
            print(preset.path.read_text(), end="")
        else:
            cfg = preset.config()
            print(config.to_toml(cfg.to_dict(), f"# preset {preset.name} ({preset.path}), every key resolved"), end="")
    elif action == "save":
        source = presets.find_preset(args.source)
        cfg = source.config(config.parse_set(args.sets))
        values = cfg.to_dict()
        if values["run"]["name"] == source.name:
            values["run"]["name"] = args.name
        path = presets.save_preset(args.name, values, force=args.force, source=source.name)
        print(f"saved preset {args.name!r} to {path}")
    return 0


def cmd_doctor(args) -> int:
    from .doctor import run_doctor

    return run_doctor(args)


def _need_terminal() -> None:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UserError("the dashboard needs an interactive terminal (for scripts: amptui run / runs / compare)")


def cmd_dashboard(args) -> int:
    from .core import runs

    _need_terminal()
    from .dashboard.app import make_app

    make_app(runs.runs_root(args.runs_dir)).run()
    return 0


def cmd_watch(args) -> int:
    from .core import runs

    run_dir = runs.run_dir(runs.runs_root(args.runs_dir), args.run_id)  # a bad id: one line, exit 2
    _need_terminal()
    from .dashboard.app import make_app

    make_app(runs.runs_root(args.runs_dir), watch=run_dir).run()
    return 0


COMMANDS = {"run": cmd_run, "resume": cmd_resume, "stop": cmd_stop, "runs": cmd_runs, "presets": cmd_presets,
            "doctor": cmd_doctor, "ab": cmd_ab, "compare": cmd_compare, "dashboard": cmd_dashboard, "watch": cmd_watch}
