"""`amptui`: the dashboard, and the commands that work without it.

Only the standard library and amptui's core are imported here; torch and textual load when a
command needs them, so `amptui --help` answers at once.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from amptui.cli import pictures as cli_pictures
from amptui.cli import tune as cli_tune
from amptui.cli.parser import build_parser
from amptui.core.errors import UserError
from amptui.core.run.runfiles import RunFolder
from amptui.jobs.detached import announce

if TYPE_CHECKING:
    from amptui.core.config.values import Config
from amptui.core.fmt import shown


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after a bare "--" belongs to the user's script (`amptui run --script x.py -- ARGS`).
    script_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    args = build_parser().parse_args(argv)
    args.script_args = script_args
    args.argv = argv  # a --detach start runs this same command line again in the background
    try:
        handler = COMMANDS.get(args.command or "dashboard")
        return handler(args) or 0
    except UserError as exc:
        print(f"amptui: error: {shown(exc, newlines=True)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


# --- commands ------------------------------------------------------------------------------------

def cmd_run(args) -> int:
    from amptui.core.config import presets
    from amptui.core.config import values as config
    from amptui.core.run import runs
    from amptui.jobs import launch

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
    return _attach(run_dir, proc, args.detach, offset=0, kind="run")


def _print_launch(args, preset, overrides) -> int:
    """Each node's `amptui run` line, and the torchrun command it starts there."""
    import shlex

    from amptui.jobs import launch

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
    from amptui.core import trust
    from amptui.core.run import runs
    from amptui.jobs import launch

    run_dir = runs.run_dir(runs.runs_root(args.runs_dir, writable=True), args.run_id)
    trusted = args.trust_code or trust.asked_on_terminal(run_dir)
    offset = _size(RunFolder(run_dir).events)
    # checks it can resume while holding the run's lock
    proc = launch.start(run_dir, resume=True, check_checkpoint=_check_checkpoint_file, trust_code=trusted)
    return _attach(run_dir, proc, args.detach, offset=offset, kind="resume")


def _check_checkpoint_file(run_dir: Path, cfg: Config) -> None:
    """A resume's check of last.pt itself (torch), for a checkpoint its last.json does not describe."""
    from amptui.trainer.checkpoint import check_resume

    check_resume(run_dir, cfg)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _attach(run_dir: Path, proc, detach: bool, offset: int, label: str = "", kind: str = "run") -> int:
    """Follow a just-started trainer on the terminal, or leave it running and print its JSON line.

    With a `label` (one run of an A/B) only one progress line and a summary are shown."""
    from amptui.cli.console import ProgressPrinter
    from amptui.core.run import runs

    if detach:
        announce(kind, f"started in the background; follow it with: amptui watch {run_dir.name}\n"
                       f"output: {RunFolder(run_dir).output_log}",
                 run_id=run_dir.name, run_dir=run_dir.resolve(), pid=proc.pid, log=RunFolder(run_dir).output_log.resolve())
        return 0
    printer = ProgressPrinter(label=label)
    followed = _follow(run_dir, proc, offset, printer)
    if followed is None:
        return 130  # left running in the background
    end, stopping = followed
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
    return _report_end(run_dir, proc, end, info, stopping)


def _follow(run_dir: Path, proc, offset: int, printer) -> tuple[dict | None, bool] | None:
    """Feed the run's records to `printer` until its end record, or until its process is gone
    without one: (the end record or None, whether Ctrl-C asked it to stop). A first Ctrl-C asks
    the run to stop (checkpoint first); a second leaves it running: None."""
    from amptui.core.events import EventReader, primary_events_file
    from amptui.jobs import launch

    reader = EventReader(RunFolder(run_dir).events, offset=offset)
    end = None
    stopping = False
    while end is None:
        try:
            if reader.offset == offset and primary_events_file(run_dir) != reader.path:
                reader = EventReader(primary_events_file(run_dir))  # this node holds no rank 0
            end = _feed(reader, printer)
            if end is None:
                if proc.poll() is not None:  # gone without an end record: one last look, then give up
                    end = _feed(reader, printer)
                    if end is None:
                        break
                time.sleep(0.1)
        except KeyboardInterrupt:
            printer.close()
            if stopping:  # a second Ctrl-C: leave it running in the background
                print(f"left running in the background: amptui watch {run_dir.name}", file=sys.stderr)
                return None
            stopping = True
            print("stopping (checkpoint first); Ctrl-C again to leave it running", file=sys.stderr)
            launch.request_stop(run_dir)
    return end, stopping


def _feed(reader, printer) -> dict | None:
    """Read the records written since the last call into the printer; the end record if among them."""
    batch = reader.read()
    printer.feed(batch)
    return next((r for r in batch if r.get("kind") == "end"), None)


def _report_end(run_dir: Path, proc, end: dict | None, info, stopping: bool) -> int:
    """The lines after a followed run ends, and the command's exit code."""
    from amptui.core.run import runops

    if end is None:
        print(f"amptui: error: the run's process exited (exit code {proc.returncode}) without an end record; "
              f"see {run_dir / 'output.log'}", file=sys.stderr)
        return 1
    print(f"run {run_dir.name}: {end['status']}")
    if end["status"] == "failed":
        print(f"amptui: error: {info.error or 'failed'} (details in {run_dir / 'output.log'})", file=sys.stderr)
        return 1
    if end["status"] == "stopped":
        refusal = runops.resume_refusal(run_dir, info, runops.CLI_HINTS)
        print(f"resume with: amptui resume {run_dir.name}" if refusal is None else f"(no resume: {refusal})")
        return 130 if stopping else 0
    return 0


def cmd_ab(args) -> int:
    """The CLI's and the dashboard's A/B (jobs/ab.py): here in the terminal, or with --detach as a
    group driven in the background by this same command line (`--group ID`)."""
    from amptui.cli.console import print_comparison
    from amptui.core import compare, preflight
    from amptui.core.config import presets
    from amptui.core.config import values as config
    from amptui.core.config import variants as ab
    from amptui.core.config.precision import Precision
    from amptui.core.run import runs
    from amptui.jobs import ab as abjob
    from amptui.jobs import groups, launch
    from amptui.machine.hardware import emulated_dtype_notice

    root = runs.runs_root(args.runs_dir, writable=True)
    preset = presets.find_preset(args.preset)
    overrides = config.parse_set(args.sets)
    ab.check_overrides(overrides)
    if args.detach:
        group, pid = abjob.start_detached(root, preset, args.preset, overrides, args.variants, args.argv)
        announce("ab", f"A/B {group.label} of {preset.name} started in the background; its runs are listed "
                       f"in `amptui runs` as they start\noutput: {group.log}",
                 group_id=group.group_id, label=group.label, pid=pid, log=group.log, group=group.path)
        return 0
    group = groups.find(root, args.group) if args.group else \
        abjob.start_here(root, preset, args.preset, overrides, args.variants)
    with group.recording():
        device = preflight.device_type(preset.config(overrides).run.device)
        variants = ab.expand(args.variants, device)
        # Check every variant before the first one starts: a bad combination fails now, not halfway.
        for name, variant in variants:
            resolved = launch.resolve_config(preset, {**overrides, **variant})
            precision = Precision.from_config(resolved, resolved.run.device)
            notice = emulated_dtype_notice(resolved.run.device, precision.autocast, precision.dtype)
            if notice:
                print(f"note: variant {name}: {notice}")

        def follow(run_dir: Path, proc, index: int, name: str) -> int:
            return _attach(run_dir, proc, False, 0, label=f"[{index}/{len(variants)}] {name:<11}")

        outcome = abjob.run_variants(group, preset, overrides, variants, root, follow)
    print()
    print_comparison(outcome.run_dirs, args.format)
    if args.format in ("table", "markdown"):
        _print_emulation_notes([compare.summarize(d) for d in outcome.run_dirs])
        print(f"again later: amptui compare {' '.join(d.name for d in outcome.run_dirs)}")
    if outcome.error:
        print(f"amptui: error: {outcome.error}", file=sys.stderr)
    return outcome.exit_code


def cmd_compare(args) -> int:
    from amptui.cli.console import print_comparison
    from amptui.core.run import runs

    root = runs.runs_root(args.runs_dir)
    dirs = [runs.run_dir(root, run_id) for run_id in args.run_ids]
    if args.format == "svg":  # the compare screen, drawn headless
        return cli_pictures.compare_svg(args, root, dirs)
    print_comparison(dirs, args.format)
    if args.format in ("table", "markdown"):
        from amptui.core import compare

        _print_emulation_notes([compare.summarize(d) for d in dirs])
    return 0


def _print_emulation_notes(summaries) -> None:
    """Under the table: which runs autocast to a dtype this CPU only emulates (so slow is expected)."""
    from amptui.cli.console import emulated_notice

    emulated = [(s.run_id, emulated_notice(s.start)) for s in summaries]
    emulated = [(run_id, notice) for run_id, notice in emulated if notice]
    if emulated:
        print(f"note: {', '.join(run_id for run_id, _ in emulated)}: {emulated[0][1]}")


def cmd_stop(args) -> int:
    from amptui.core.run import runs
    from amptui.jobs import launch

    run_dir = runs.run_dir(runs.runs_root(args.runs_dir, writable=True), args.run_id)
    info = launch.stop(run_dir)
    if info.status == "running":
        print(f"run {info.run_id}: stop requested; still finishing its current step (check `amptui runs`)")
        return 1
    print(f"run {info.run_id}: {info.status} at step {info.step}")
    return 0 if info.status == "stopped" else 1


def cmd_runs(args) -> int:
    from amptui.cli.console import print_runs
    from amptui.core.run import runs

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
    from amptui.cli.console import print_table
    from amptui.core import safefile
    from amptui.core.config import presets
    from amptui.core.config import values as config

    action = args.action or "list"
    if action == "list":
        rows = [(p.name, "built-in" if p.builtin else "saved", p.description) for p in presets.list_presets()]
        print_table(("NAME", "KIND", "DESCRIPTION"), rows, no_wrap=("NAME", "KIND"))
        print(f"\nsaved presets live in {presets.saved_dir()}")
    elif action == "show":
        preset = presets.find_preset(args.name)
        if args.raw:
            try:
                text = safefile.read_text(preset.path, config.TOML_LIMIT, follow=True)
            except (OSError, ValueError) as exc:
                raise UserError(f"{preset.path}: cannot read: {exc}") from None
            print(shown(text, newlines=True), end="")
        else:
            cfg = preset.config()
            print(config.to_toml(cfg.to_dict(), f"# preset {preset.name} ({preset.path}), every key resolved"), end="")
    elif action == "save":
        source = presets.find_preset(args.source)
        cfg = source.config(config.parse_set(args.sets))
        if cfg.run.name == source.name:
            cfg = cfg.with_overrides({"run.name": args.name})
        path = presets.save_preset(args.name, cfg, force=args.force, source=source.name)
        print(f"saved preset {args.name!r} to {path}")
    return 0


def cmd_doctor(args) -> int:
    from amptui.cli.doctor import run_doctor

    return run_doctor(args)


def _need_terminal() -> None:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UserError("the dashboard needs an interactive terminal (for scripts: amptui run / runs / compare)")


def cmd_dashboard(args) -> int:
    from amptui.core.run import runs

    _need_terminal()
    from amptui.dashboard.app import make_app

    make_app(runs.runs_root(args.runs_dir)).run()
    return 0


def cmd_watch(args) -> int:
    from amptui.core.run import runs

    run_dir = runs.run_dir(runs.runs_root(args.runs_dir), args.run_id)  # a bad id: one line, exit 2
    if args.svg:  # the run screen, drawn headless
        return cli_pictures.watch_svg(args, run_dir)
    _need_terminal()
    from amptui.dashboard.app import make_app

    make_app(runs.runs_root(args.runs_dir), watch=run_dir).run()
    return 0


COMMANDS = {"run": cmd_run, "resume": cmd_resume, "stop": cmd_stop, "runs": cmd_runs, "presets": cmd_presets,
            "doctor": cmd_doctor, "ab": cmd_ab, "compare": cmd_compare, "dashboard": cmd_dashboard, "watch": cmd_watch}
COMMANDS["tune"] = cli_tune.cmd_tune
