"""`amptui run` and `amptui resume`: start a trainer, then follow it on the terminal (a progress
line, Ctrl-C to stop it at a checkpoint) or leave it in the background (`--detach`: one JSON line).

`attach` is also how the A/B command follows each of its runs. Like cli/main.py, only the
standard library and amptui's core load at import time.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from amptui.core.errors import UserError
from amptui.core.run.runfiles import RunFolder
from amptui.jobs.detached import announce

if TYPE_CHECKING:
    from amptui.core.config.values import Config


def cmd_run(args) -> int:
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
    run_dir, cfg = launch.create_run(preset, overrides, root, notes=notes)
    for note in notes:  # detached: stdout is the JSON line's
        print(f"note: {note}", file=sys.stderr if args.detach else sys.stdout, flush=True)
    proc = launch.start(run_dir, script_args=args.script_args)
    return attach(run_dir, proc, args.detach, offset=0, kind="run")


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


def cmd_resume(args) -> int:
    from amptui.core.run import runs
    from amptui.jobs import launch

    run_dir = runs.run_dir(runs.runs_root(args.runs_dir, writable=True), args.run_id)
    trusted = args.trust_code or asked_on_terminal(run_dir)
    offset = _size(RunFolder(run_dir).events)
    # checks it can resume while holding the run's lock
    proc = launch.start(run_dir, resume=True, check_checkpoint=_check_checkpoint_file, trust_code=trusted)
    return attach(run_dir, proc, args.detach, offset=offset, kind="resume")


def asked_on_terminal(run_dir: Path) -> bool:
    """`amptui resume` of a run naming code not given here: on a terminal, ask (no: one line, exit
    2); elsewhere, or when the resume is refused anyway, False (launch.start then says why)."""
    from amptui.core import trust
    from amptui.core.run import runops

    foreign = trust.foreign_code(run_dir)
    if not foreign or not (sys.stdin.isatty() and sys.stderr.isatty()):
        return False
    if runops.resume_refusal(run_dir, hints=runops.CLI_HINTS):
        return False  # refused anyway: no question first
    print(trust.question(Path(run_dir).name, foreign) + " [y/N] ", end="", file=sys.stderr, flush=True)
    if sys.stdin.readline(16).strip().lower() not in ("y", "yes"):
        raise UserError(f"run {Path(run_dir).name} not resumed: its code was not trusted")
    return True


def stop_point(run_dir: Path) -> str:
    """Where a stopping run stops: amptui's trainer checkpoints first; a script's own loop is
    stopped at its next optimizer step (amptui writes no checkpoint for it)."""
    from amptui.core.config import values as cfgmod
    from amptui.core.errors import ConfigError

    try:
        run = cfgmod.read_toml(RunFolder(run_dir).config).get("run")
    except (ConfigError, OSError):
        run = None
    return "at the script's next optimizer step" if isinstance(run, dict) and run.get("script") else "checkpoint first"


def _check_checkpoint_file(run_dir: Path, cfg: Config) -> None:
    """A resume's check of last.pt itself (torch), for a checkpoint its last.json does not describe."""
    from amptui.trainer.checkpoint import check_resume

    check_resume(run_dir, cfg)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def attach(run_dir: Path, proc, detach: bool, offset: int, label: str = "", kind: str = "run") -> int:
    """Follow a just-started trainer on the terminal, or leave it running and print its JSON line.

    With a `label` (one run of an A/B) only one progress line and a summary are shown."""
    from amptui.cli.console import ProgressPrinter
    from amptui.core.run import runs

    if detach:
        announce(kind, f"started in the background; follow it with: amptui watch {run_dir.name}\n"
                       f"output: {RunFolder(run_dir).output_log}",
                 run_id=run_dir.name, run_dir=run_dir.resolve(), pid=proc.pid, log=RunFolder(run_dir).output_log.resolve())
        return 0
    from amptui.jobs import scriptexit

    began = time.time()
    printer = ProgressPrinter(label=label)
    followed = _follow(run_dir, proc, offset, printer)
    if followed is None:
        return 130  # left running in the background
    end, stopping = followed
    try:
        proc.wait(timeout=30)
    except Exception:
        pass
    script = scriptexit.lone_script(run_dir)
    if end is None and script and proc.returncode is not None:  # os._exit, a signal: we write its end
        end = scriptexit.record_exit(run_dir, offset, began, proc.returncode)
    info = runs.load_run(run_dir)
    printer.finish(info.duration_s)
    if label:
        if stopping:
            return 130
        return 0 if end is not None and end["status"] == "completed" else 1
    code = _report_end(run_dir, proc, end, info, stopping)
    if script and code == 1 and proc.returncode:  # the script's own exit code (a signal: 128+N)
        return scriptexit.shell_code(proc.returncode)
    return code


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
            print(f"stopping ({stop_point(run_dir)}); Ctrl-C again to leave it running", file=sys.stderr)
            launch.request_stop(run_dir)
    return end, stopping


def _feed(reader, printer) -> dict | None:
    """Read the records written since the last call into the printer; the end record if among them."""
    batch = reader.read()
    printer.feed(batch)
    return next((r for r in batch if r.get("kind") == "end"), None)


def _report_end(run_dir: Path, proc, end: dict | None, info, stopping: bool) -> int:
    """The lines after a followed run ends, and the command's exit code."""
    from amptui.cli.prose import error, say
    from amptui.core.run import runops

    if end is None:
        error(f"the run's process exited (exit code {proc.returncode}) without an end record; "
              f"see {RunFolder(run_dir).output_log}")
        return 1
    print(f"run {run_dir.name}: {end['status']}")
    if end["status"] == "failed":
        error(f"{info.error or 'failed'} (details in {RunFolder(run_dir).output_log})")
        return 1
    if end["status"] == "stopped":
        refusal = runops.resume_refusal(run_dir, info, runops.CLI_HINTS)
        say(f"resume with: amptui resume {run_dir.name}" if refusal is None else f"(no resume: {refusal})")
        return 130 if stopping else 0
    return 0
