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

from . import __version__, cli_tune
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


PRESET_HELP = "a built-in or saved preset name (amptui presets list), or a path to a .toml file"


def run_id_argument(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("run_id", metavar="RUN_ID", help=f"{help}; an id as `amptui runs` lists it")


def _table_alias(value: str) -> str:
    """`doctor --format text` (its old name) means table."""
    return "table" if value == "text" else value


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
    p.add_argument("preset", nargs="?", metavar="PRESET", help=PRESET_HELP)
    p.add_argument("--script", metavar="FILE", help="launch your own training script (which writes events with "
                   "amptui.Monitor); arguments after -- go to the script")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a preset key, e.g. --set amp.dtype=bfloat16 (repeatable)")
    p.add_argument("--detach", action="store_true", help="start in the background and print the run id")
    p.add_argument("--print-launch", action="store_true",
                   help="print the command to run on every node of a multi-node DDP run, and start nothing")
    runs_dir_option(p)

    p = sub.add_parser("stop", help="stop a running run gracefully (checkpoint, then status stopped)")
    run_id_argument(p, "the run to stop")
    runs_dir_option(p)

    p = sub.add_parser("resume", help="continue a stopped, failed or killed run from its last checkpoint")
    run_id_argument(p, "the run to continue (status stopped, failed or killed, with a checkpoint)")
    p.add_argument("--detach", action="store_true", help="continue in the background")
    runs_dir_option(p)

    p = sub.add_parser("watch", help="open the dashboard's run screen on a run, live or finished")
    run_id_argument(p, "the run to watch")
    runs_dir_option(p)

    p = sub.add_parser("ab", help="run a preset once per precision variant, then compare them")
    p.add_argument("preset", metavar="PRESET", help=PRESET_HELP)
    p.add_argument("--variants", metavar="V,V,...",
                   help="from fp32, fp16, fp16+scaler, bf16, bf16+scaler (default: fp32,fp16,fp16+scaler on "
                        "CUDA, fp32,bf16 on CPU)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a preset key in every variant, e.g. --set run.max_steps=200 (repeatable; "
                        "not the amp.* keys the variants set)")
    p.add_argument("--format", choices=("table", "markdown", "csv", "json"), default="table",
                   help="how to print the comparison at the end (default: table)")
    runs_dir_option(p)

    cli_tune.add_parser(sub, runs_dir_option)

    p = sub.add_parser("compare", help="the tutorials' table for some runs (speed-up and saving against the first)")
    p.add_argument("run_ids", nargs="+", metavar="RUN_ID", help="runs to compare; the first is the baseline")
    p.add_argument("--format", choices=("table", "markdown", "csv", "json"), default="table",
                   help="table (default), markdown, csv (raw numbers) or json")
    runs_dir_option(p)

    p = sub.add_parser("runs", help="list runs")
    p.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or json")
    runs_dir_option(p)

    p = sub.add_parser("doctor", help="what this machine offers for AMP, and which dtype to use")
    p.add_argument("--format", choices=("table", "json"), default="table", type=_table_alias,
                   help="table (default; `text` is accepted too) or json")
    p.add_argument("--no-bench", action="store_true", help="skip the matmul measurements")

    p = sub.add_parser("presets", help="list, show or save presets")
    psub = p.add_subparsers(dest="action", metavar="ACTION")
    psub.add_parser("list", help="built-in and saved presets")
    show = psub.add_parser("show", help="print a preset with every key resolved")
    show.add_argument("name", metavar="NAME", help=PRESET_HELP)
    show.add_argument("--raw", action="store_true", help="print the file as written")
    save = psub.add_parser("save", help="save a preset (with overrides) under a new name")
    save.add_argument("name", metavar="NAME", help="the new preset's name")
    save.add_argument("--from", dest="source", required=True, metavar="PRESET", help="the preset to start from")
    save.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                      help="override a key, e.g. --set amp.dtype=bfloat16 (repeatable)")
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
    from .core import config, launch, presets, runs

    if not args.preset and not args.script:
        raise UserError("name a preset (see `amptui presets list`) or a script with --script FILE")
    root = runs.runs_root(args.runs_dir, writable=not args.print_launch)
    preset = presets.find_preset(args.preset) if args.preset else None
    overrides = config.parse_set(args.sets)
    if args.script:
        overrides["run.script"] = args.script
    if args.print_launch:
        return _print_launch(args, preset, overrides)
    run_dir, cfg = launch.create_run(preset, overrides, root)
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
        env = "".join(f"{k}={shlex.quote(v)} " for k, v in launch.torchrun_env(node_cfg, Path("runs/RUN_ID")).items())
        print("#   which runs: " + env + shlex.join(["torchrun", *launch.torchrun_args(node_cfg, Path("runs/RUN_ID"))]))
    return 0


def cmd_resume(args) -> int:
    from .core import launch, runs

    run_dir = runs.run_dir(runs.runs_root(args.runs_dir, writable=True), args.run_id)
    offset = _size(run_dir / "events.jsonl")
    # checks it can resume while holding the run's lock
    proc = launch.start(run_dir, resume=True, check_checkpoint=_check_checkpoint_file)
    return _attach(run_dir, proc, args.detach, offset=offset)


def _check_checkpoint_file(run_dir: Path, cfg) -> None:
    """A resume's check of last.pt itself (torch), for a checkpoint its last.json does not describe."""
    from .trainer.checkpoint import check_resume

    check_resume(run_dir, cfg)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _attach(run_dir: Path, proc, detach: bool, offset: int, label: str = "") -> int:
    """Follow a just-started trainer on the terminal, or leave it running and print its id.

    With a `label` (one run of an A/B) only one progress line and a summary are shown."""
    from .console import ProgressPrinter
    from .core import launch, runs
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
            printer.close()
            print("stopping (checkpoint first); Ctrl-C again to leave it running", file=sys.stderr)
            launch.request_stop(run_dir)
    try:
        proc.wait(timeout=30)
    except Exception:
        pass
    info = runs.load_run(run_dir)
    printer.finish(info.duration_s)
    if label:
        if stopping:
            return 130
        return 0 if end is not None and end["status"] == "completed" else 1
    if end is None:
        print(f"amptui: error: the run's process exited (exit code {proc.returncode}) without an end record; "
              f"see {run_dir / 'output.log'}", file=sys.stderr)
        return 1
    print(f"run {run_dir.name}: {end['status']}")
    if end["status"] == "failed":
        print(f"amptui: error: {info.error or 'failed'} (details in {run_dir / 'output.log'})", file=sys.stderr)
        return 1
    if end["status"] == "stopped":
        refusal = launch.resume_refusal(run_dir, info)
        print(f"resume with: amptui resume {run_dir.name}" if refusal is None else f"(no resume: {refusal})")
        return 130 if stopping else 0
    return 0


def cmd_ab(args) -> int:
    from .console import print_comparison
    from .core import ab, compare, config, launch, preflight, presets, runs
    from .core.precision import Precision
    from .hardware import emulated_dtype_notice

    root = runs.runs_root(args.runs_dir, writable=True)
    preset = presets.find_preset(args.preset)
    overrides = config.parse_set(args.sets)
    ab.check_overrides(overrides)
    device = preflight.device_type(preset.config(overrides).run.device)
    variants = ab.expand(args.variants, device)
    # Check every variant before the first one starts: a bad combination fails now, not halfway.
    for name, variant in variants:
        resolved = launch.resolve_config(preset, {**overrides, **variant}).to_dict()
        precision = Precision.from_config(resolved, resolved["run"]["device"])
        notice = emulated_dtype_notice(resolved["run"]["device"], precision.autocast, precision.dtype)
        if notice:
            print(f"note: variant {name}: {notice}")
    run_dirs, failed, interrupted = [], [], False
    for i, (name, variant) in enumerate(variants, 1):
        run_dir, _ = launch.create_run(preset, {**overrides, **variant}, root)
        run_dirs.append(run_dir)
        code = _attach(run_dir, launch.start(run_dir), False, 0, label=f"[{i}/{len(variants)}] {name:<11}")
        if code == 130:  # Ctrl-C: the A/B ends here; the variants after this one are not started
            interrupted = True
            break
        if code != 0:
            failed.append(name)
    print()
    print_comparison(run_dirs, args.format)
    if args.format in ("table", "markdown"):
        _print_emulation_notes([compare.summarize(d) for d in run_dirs])
        print(f"again later: amptui compare {' '.join(d.name for d in run_dirs)}")
    if interrupted:
        print(f"amptui: error: interrupted after {len(run_dirs)} of {len(variants)} variants", file=sys.stderr)
        return 130
    if failed:
        print(f"amptui: error: variant(s) {', '.join(failed)} did not complete", file=sys.stderr)
        return 1
    return 0


def cmd_compare(args) -> int:
    from .console import print_comparison
    from .core import runs

    root = runs.runs_root(args.runs_dir)
    dirs = [runs.run_dir(root, run_id) for run_id in args.run_ids]
    print_comparison(dirs, args.format)
    if args.format in ("table", "markdown"):
        from .core import compare

        _print_emulation_notes([compare.summarize(d) for d in dirs])
    return 0


def _print_emulation_notes(summaries) -> None:
    """Under the table: which runs autocast to a dtype this CPU only emulates (so slow is expected)."""
    from .console import emulated_notice

    emulated = [(s.run_id, emulated_notice(s.start)) for s in summaries]
    emulated = [(run_id, notice) for run_id, notice in emulated if notice]
    if emulated:
        print(f"note: {', '.join(run_id for run_id, _ in emulated)}: {emulated[0][1]}")


def cmd_stop(args) -> int:
    from .core import launch, runs

    run_dir = runs.run_dir(runs.runs_root(args.runs_dir, writable=True), args.run_id)
    info = launch.stop(run_dir)
    if info.status == "running":
        print(f"run {info.run_id}: stop requested; still finishing its current step (check `amptui runs`)")
        return 1
    print(f"run {info.run_id}: {info.status} at step {info.step}")
    return 0 if info.status == "stopped" else 1


def cmd_runs(args) -> int:
    from .console import print_runs
    from .core import runs

    root = runs.runs_root(args.runs_dir)
    found = runs.list_runs(root)
    if args.format == "json":
        print(json.dumps([r.as_json() for r in found], indent=2))
    elif not found:
        print(f"no runs in {root} (start one with `amptui run quickstart`)")
    else:
        print_runs(found)
    return 0


def cmd_presets(args) -> int:
    from .console import print_table
    from .core import config, presets

    action = args.action or "list"
    if action == "list":
        rows = [(p.name, "built-in" if p.builtin else "saved", p.description) for p in presets.list_presets()]
        print_table(("NAME", "KIND", "DESCRIPTION"), rows, no_wrap=("NAME", "KIND"))
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
COMMANDS["tune"] = cli_tune.cmd_tune
