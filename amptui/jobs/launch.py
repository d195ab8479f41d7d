"""Starting, stopping and resuming trainer processes.

The trainer always runs as a process of its own, in a new session (setsid), with its output
appended to the run's output.log: closing the terminal or quitting the dashboard never takes
it down. DDP runs go through torchrun, which starts one trainer per rank. What a start refuses
before it writes anything (the folder's files, a resume that cannot continue) is startchecks.py.
"""

from __future__ import annotations

import functools
import os
import subprocess
import time
from pathlib import Path

from amptui.core import safefile
from amptui.core.config import values as cfgmod
from amptui.core.config.precision import auto_dtype
from amptui.core.config.presets import Preset
from amptui.core.errors import UserError
from amptui.core.prepare import preflight
from amptui.core.run import runlock, runops, runs, trust
from amptui.core.run.runfiles import RUN_DIR_ENV, RunFolder
from amptui.core.safefile import atomic_write_text
from amptui.jobs.modulefind import module_missing
from amptui.jobs.spawn import amptui_python, spawn
from amptui.jobs.startchecks import CheckpointCheck, check_resumable, check_run_files, refuse_resume_early
from amptui.machine import cputorch
from amptui.machine.dtype_speed import slow_dtypes


def trainer_command(cfg: cfgmod.Config, run_dir: Path, resume: bool = False,
                    script_args: list[str] | None = None) -> list[str]:
    """The command that runs a (resolved) config: amptui's trainer or the user's own script
    (`run.script`); for DDP, the supervisor that runs them under torchrun."""
    if cfg.dist.mode in cfgmod.TORCHRUN_MODES:
        return [*amptui_python("-u"), "-m", "amptui.trainer.torchrun", str(run_dir)] + \
            (["--resume"] if resume else []) + (["--", *script_args] if script_args else [])
    if cfg.run.script:  # through scriptrun, so a script that fails before its Monitor still ends `failed`
        return [*amptui_python("-u"), "-m", "amptui.trainer.scriptrun", str(run_dir), cfg.run.script,
                *(script_args or [])]
    return [*amptui_python("-u"), *worker_args(cfg, run_dir, resume, script_args)]


def worker_args(cfg: cfgmod.Config, run_dir: Path, resume: bool = False,
                script_args: list[str] | None = None) -> list[str]:
    """What one worker runs, after `python`: amptui's trainer module or the user's script (through
    scriptrun, which installs the script hooks first)."""
    if cfg.run.script:
        return ["-m", "amptui.trainer.scriptrun", str(run_dir), cfg.run.script, *(script_args or [])]
    return ["-m", "amptui.trainer", str(run_dir)] + (["--resume"] if resume else [])


# Options amptui passes that an older torchrun lacks, and the environment variable that sets the
# same thing there (the rank prefix became a flag in torch 2.14; the variable exists since 2.2).
TORCHRUN_ENV_FALLBACKS = {"--log-line-prefix-template": "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"}


@functools.lru_cache(maxsize=1)
def torchrun_options() -> frozenset[str]:
    """Every option string the installed torch's torchrun accepts (torch is imported here only)."""
    from torch.distributed.run import get_args_parser

    # argparse lists its options nowhere public; this mapping is where it keeps them.
    return frozenset(get_args_parser()._option_string_actions)


def _torchrun_wanted(cfg: cfgmod.Config, run_dir: Path) -> list[tuple[str, str | None]]:
    """(option, value or None for a flag): what amptui asks torchrun for, before matching it to
    the installed torch."""
    d = cfg.dist
    wanted: list[tuple[str, str | None]] = [("--nproc-per-node", str(d.nproc_per_node)),
                                            ("--max-restarts", str(d.max_restarts))]
    if d.nnodes == 1:
        wanted += [("--standalone", None)]  # a free port per run, so two local DDP runs never collide
    else:
        # Static rendezvous: the only one that honours --node-rank, so the machine started with
        # node_rank 0 holds global rank 0 (c10d orders nodes by host name). Its cost: a fixed set
        # of nodes, no elastic joining or leaving (see docs/distributed.md).
        host, port = split_endpoint(d.rdzv_endpoint)
        wanted += [("--nnodes", str(d.nnodes)), ("--node-rank", str(d.node_rank)), ("--rdzv-backend", "static"),
                   ("--master-addr", host), ("--master-port", port)]
    # Every rank's output in output.log, each line prefixed with its rank.
    wanted += [("--log-dir", str(run_dir / "torchrun")), ("--tee", "3"),
               ("--log-line-prefix-template", "[rank ${rank}] ")]
    return wanted


def split_endpoint(endpoint: str) -> tuple[str, str]:
    """"HOST:PORT" (or "[v6]:PORT") -> (host, port)."""
    host, _, port = endpoint.rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"dist.rdzv_endpoint = {endpoint!r}: expected HOST:PORT, e.g. 10.0.0.1:29500")
    return host.strip("[]"), port


def _accepted_spelling(option: str) -> str | None:
    """The option as the installed torchrun spells it (torch once spelled some with underscores)."""
    accepted = torchrun_options()
    for spelling in (option, "--" + option[2:].replace("-", "_")):
        if spelling in accepted:
            return spelling
    return None


def torchrun_args(cfg: cfgmod.Config, run_dir: Path, resume: bool = False,
                  script_args: list[str] | None = None) -> list[str]:
    """torchrun's arguments for a DDP run (what `--print-launch` shows), in the spelling the
    installed torch accepts; options it lacks go through `torchrun_env` instead."""
    args: list[str] = []
    for option, value in _torchrun_wanted(cfg, run_dir):
        spelling = _accepted_spelling(option)
        if spelling is None:
            if option in TORCHRUN_ENV_FALLBACKS:
                continue
            import torch

            raise UserError(f"torch {torch.__version__}'s torchrun has no {option} option, which amptui needs "
                            "for this run; install a torch that amptui supports (see pyproject.toml)")
        args += [spelling] if value is None else [spelling, value]
    # torchrun's own `-m` would start `python -u -m ...`, the working folder first on the path
    return args + ["--no-python", *amptui_python("-u"), *worker_args(cfg, run_dir, resume, script_args)]


def torchrun_env(cfg: cfgmod.Config, run_dir: Path) -> dict[str, str]:
    """Environment variables for the options the installed torchrun lacks as flags."""
    return {TORCHRUN_ENV_FALLBACKS[option]: value for option, value in _torchrun_wanted(cfg, run_dir)
            if option in TORCHRUN_ENV_FALLBACKS and _accepted_spelling(option) is None and value is not None}


MODULE_PREFIX = "-m "  # run.script = "-m pkg.train": a module run as `python -m pkg.train`


def script_module(script: str) -> str | None:
    """The module a `run.script` names ("-m pkg.train" -> "pkg.train"), None for a file."""
    return script[len(MODULE_PREFIX):].strip() if script.startswith(MODULE_PREFIX) else None


def check_script(script: str) -> None:
    """Refuse (UserError, one line) a `run.script` that names no file, or a module Python would not
    find from here (`python -m` runs it from the current folder): before any run folder is made."""
    module = script_module(script)
    if module is not None:
        if not module or not all(part.isidentifier() for part in module.split(".")):
            raise UserError(f"run.script = {script!r}: {module!r} is not a module name (e.g. -m pkg.train)")
        missing = module_missing(module)
        if missing:
            raise UserError(f"-m {module}: {missing}")
    elif not Path(script).is_file():
        raise UserError(f"run.script = {script!r}: no such file (relative to {os.getcwd()})")


def resolve_config(preset: Preset | None, overrides: dict | None = None,
                   notes: list[str] | None = None) -> cfgmod.Config:
    """The preset with its overrides, validated and resolved for this machine (nothing written).

    `preset` None means the defaults (e.g. `amptui run --script train.py`). Lines the user should
    read before the run (automatic precision falling back to float32) are appended to `notes`.
    """
    if preset is None:
        cfg = cfgmod.build_config({}, overrides)
        if cfg.run.script and not cfg.run.name:
            module = script_module(cfg.run.script)
            cfg = cfg.with_overrides({"run.name": module.rpartition(".")[2] if module else Path(cfg.run.script).stem})
    else:
        cfg = preset.config(overrides)
    if cfg.run.script:
        check_script(cfg.run.script)
    resolved = preflight.resolve(cfg, slow_dtypes=measured_slow_dtypes, notes=notes)
    if notes is not None and (note := cputorch.first_run_note()):
        notes.append(note)
    return resolved


def measured_slow_dtypes(device_type: str):
    return slow_dtypes(device_type, measured=True, dtypes=(auto_dtype(device_type),))


def create_run(preset: Preset | None, overrides: dict | None = None,
               root: Path | None = None, notes: list[str] | None = None) -> tuple[Path, cfgmod.Config]:
    """Validate and resolve, then make the run folder with its config.toml.

    Nothing is written before every check has passed.
    """
    cfg = resolve_config(preset, overrides, notes)
    if cfg.run.script and script_module(cfg.run.script) is None:  # absolute, as scriptrun's own launch: read anywhere
        cfg = cfg.with_overrides({"run.script": os.path.abspath(cfg.run.script)}, source="run.script")
    folder = runs.create_folder(root, cfg.run.name)
    runs.write_new(folder, cfg, f"# amptui run {folder.name}: preset {cfg.run.name!r} resolved for this machine")
    return folder.path, cfg


def start(run_dir: Path, resume: bool = False, script_args: list[str] | None = None,
          check_checkpoint: CheckpointCheck | None = None, trust_code: bool = False,
          extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start the trainer for `run_dir` in the background (jobs.spawn); returns at once.

    One writer per run folder: the run's lock is taken first (RunLocked, naming the holder, when
    another writer is alive), a resume is checked while holding it, and the child inherits it
    (core/runlock.py says why a handed-down descriptor leaves no gap for a second command).
    A resume of a folder whose config names code not given on this machine is refused before
    anything is touched, unless `trust_code` (the user said yes; remembered for this folder).
    `extra_env`: variables for the trainer alone (an interleaved A/B's turn file).
    """
    began = time.time()
    check_run_files(run_dir)
    if resume:  # what can be refused without the lock is refused before the lock file is written
        refuse_resume_early(run_dir)
    foreign = trust.foreign_code(run_dir) if resume else []
    if foreign and not trust_code:  # a resume refused anyway says why (those checks run no code)
        raise UserError(runops.resume_refusal(run_dir, hints=runops.CLI_HINTS) or trust.refusal(run_dir, foreign))
    with runlock.acquire(run_dir) as lock:
        if resume:
            foreign = trust.foreign_code(run_dir)  # again: config.toml may have changed meanwhile
            if foreign and not trust_code:
                raise UserError(trust.refusal(run_dir, foreign))
            check_resumable(run_dir, locked=True, check_checkpoint=check_checkpoint)
        cfg = RunFolder(run_dir).load_config()
        check_run_files(run_dir)  # again, now that no other amptui writes here
        clear_old_stop(run_dir, began)
        command = trainer_command(cfg, run_dir, resume, script_args)
        env = dict(os.environ, PYTHONUNBUFFERED="1",
                   **{RUN_DIR_ENV: str(run_dir.resolve()), runlock.FD_ENV: str(lock.fd)}, **(extra_env or {}))
        try:
            proc = spawn(command, RunFolder(run_dir).output_log, env=env, pass_fds=(lock.fd,))
        except OSError as exc:
            raise UserError(f"run {run_dir.name}: cannot write {RunFolder(run_dir).output_log}: "
                            f"{exc.strerror or exc}") from None
        lock.describe(proc.pid, command)  # the child rewrites it when it adopts the lock
        try:
            runs.write_launch_info(run_dir, proc.pid, command)
        except OSError:
            pass  # a disk full since the checks: the lock names the trainer, which reports the rest
    if trust_code:
        trust.remember(run_dir, trust.code_refs(cfg))
    return proc


def clear_old_stop(run_dir: Path, began: float) -> None:
    """Remove a stop request older than this start (it was meant for an earlier session); one sent
    while this start was still checking stays, and the new session stops at its first step record."""
    path = RunFolder(run_dir).stop
    try:  # request_stop writes time.time(); never a link followed out, never a FIFO that waits
        text = safefile.read_bytes(path, 64).decode("ascii", "replace").strip()
        sent = float(text) if text else path.stat().st_mtime
    except FileNotFoundError:
        return
    except (OSError, ValueError):
        sent = 0.0  # unreadable: older than anything
    if sent < began:
        path.unlink(missing_ok=True)


def request_stop(run_dir: Path) -> None:
    """Ask every rank to stop at its next step record (checkpoint, then status `stopped`).

    A file rather than a signal: under torchrun the workers live in sessions of their own, and
    all ranks must agree on the step they stop at (they check it together, once per record).
    """
    atomic_write_text(RunFolder(run_dir).stop, f"{time.time()}\n")


def stop(run_dir: Path, wait_s: float = 120.0) -> runs.RunInfo:
    """Request a graceful stop and wait for the run's `end` record."""
    info = runs.load_run(run_dir)
    if info.status != "running":
        raise UserError(f"run {info.run_id} is not running (status {info.status})")
    request_stop(run_dir)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        info = runs.load_run(run_dir)
        if info.status != "running":
            break
        time.sleep(0.2)
    # The end record comes a moment before the writer exits (a DDP supervisor waits for its ranks):
    # wait for the run's lock too, so a `resume` right after `stop` finds the folder free.
    while time.monotonic() < deadline and info.status != "running":
        try:
            if runlock.holder(run_dir) is None:
                break
        except OSError:
            break
        time.sleep(0.2)
    return info
