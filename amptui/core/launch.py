"""Starting, stopping and resuming trainer processes.

The trainer always runs as a process of its own, in a new session (setsid), with its output
appended to the run's output.log: closing the terminal or quitting the dashboard never takes
it down. DDP runs go through torchrun, which starts one trainer per rank.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from . import config as cfgmod
from . import preflight, runs
from .errors import UserError
from .presets import Preset, atomic_write_text


RUN_DIR_ENV = "AMPTUI_RUN_DIR"  # tells a user's script (its amptui.Monitor) where its run folder is


def trainer_command(cfg: cfgmod.Config, run_dir: Path, resume: bool = False,
                    script_args: list[str] | None = None) -> list[str]:
    """The command that runs a (resolved) config: amptui's trainer or the user's own script
    (`run.script`); for DDP, the supervisor that runs them under torchrun."""
    if cfg.dist.mode == "ddp":
        return [sys.executable, "-u", "-m", "amptui.trainer.torchrun", str(run_dir)] + \
            (["--resume"] if resume else []) + (["--", *script_args] if script_args else [])
    return [sys.executable, "-u", *worker_args(cfg, run_dir, resume, script_args)]


def worker_args(cfg: cfgmod.Config, run_dir: Path, resume: bool = False,
                script_args: list[str] | None = None) -> list[str]:
    """What one worker runs, after `python`: amptui's trainer module or the user's script."""
    if cfg.run.script:
        return [cfg.run.script, *(script_args or [])]
    return ["-m", "amptui.trainer", str(run_dir)] + (["--resume"] if resume else [])


def torchrun_args(cfg: cfgmod.Config, run_dir: Path, resume: bool = False,
                  script_args: list[str] | None = None) -> list[str]:
    """torchrun's arguments for a DDP run (what `--print-launch` shows)."""
    d = cfg.dist
    args = ["--nproc-per-node", str(d.nproc_per_node), "--max-restarts", str(d.max_restarts)]
    if d.nnodes == 1:
        args += ["--standalone"]  # a free port per run, so two local DDP runs never collide
    else:
        args += ["--nnodes", str(d.nnodes), "--node-rank", str(d.node_rank), "--rdzv-backend", "c10d",
                 "--rdzv-endpoint", d.rdzv_endpoint, "--rdzv-id", f"amptui-{cfg.run.name}-{cfg.run.seed}"]
    # Every rank's output in output.log, each line prefixed with its rank.
    args += ["--log-dir", str(run_dir / "torchrun"), "--tee", "3",
             "--log-line-prefix-template", "[rank ${rank}] "]
    worker = worker_args(cfg, run_dir, resume, script_args)
    if worker[0] == "-m":
        return args + worker
    return args + ["--no-python", sys.executable, "-u", *worker]


def resolve_config(preset: Preset | None, overrides: dict | None = None) -> cfgmod.Config:
    """The preset with its overrides, validated and resolved for this machine (nothing written).

    `preset` None means the defaults (e.g. `amptui run --script train.py`).
    """
    if preset is None:
        cfg = cfgmod.build_config({}, overrides)
        if cfg.run.script and not cfg.run.name:
            cfg = cfg.with_overrides({"run.name": Path(cfg.run.script).stem})
    else:
        cfg = preset.config(overrides)
    if cfg.run.script and not Path(cfg.run.script).is_file():
        raise UserError(f"run.script = {cfg.run.script!r}: no such file (relative to {os.getcwd()})")
    return preflight.resolve(cfg)


def create_run(preset: Preset | None, overrides: dict | None = None,
               root: Path | None = None) -> tuple[Path, cfgmod.Config]:
    """Validate and resolve, then make the run folder with its config.toml.

    Nothing is written before every check has passed.
    """
    cfg = resolve_config(preset, overrides)
    path = runs.new_run_dir(runs.runs_root(root), cfg.run.name)
    header = f"# amptui run {path.name}: preset {cfg.run.name!r} resolved for this machine"
    atomic_write_text(path / "config.toml", cfgmod.to_toml(cfg.to_dict(), header))
    (path / "checkpoints").mkdir()
    return path, cfg


def load_config(run_dir: Path) -> cfgmod.Config:
    cfg_path = run_dir / "config.toml"
    return cfgmod.build_config(cfgmod.read_toml(cfg_path), source=str(cfg_path))


STOP_FILE = "stop-requested"


def start(run_dir: Path, resume: bool = False, script_args: list[str] | None = None) -> subprocess.Popen:
    """Start the trainer for `run_dir` in its own session; returns at once."""
    cfg = load_config(run_dir)
    (run_dir / STOP_FILE).unlink(missing_ok=True)
    command = trainer_command(cfg, run_dir, resume, script_args)
    env = dict(os.environ, PYTHONUNBUFFERED="1", **{RUN_DIR_ENV: str(run_dir.resolve())})
    with open(run_dir / "output.log", "ab") as log:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                cwd=os.getcwd(), env=env, start_new_session=True)
    runs.write_launch_info(run_dir, proc.pid, command)
    return proc


def request_stop(run_dir: Path) -> None:
    """Ask every rank to stop at its next step record (checkpoint, then status `stopped`).

    A file rather than a signal: under torchrun the workers live in sessions of their own, and
    all ranks must agree on the step they stop at (they check it together, once per record).
    """
    atomic_write_text(run_dir / STOP_FILE, f"{time.time()}\n")


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
            return info
        time.sleep(0.2)
    return info


def check_resumable(run_dir: Path) -> runs.RunInfo:
    info = runs.load_run(run_dir)
    if info.status == "running":
        raise UserError(f"run {info.run_id} is still running; stop it first (amptui stop {info.run_id})")
    if load_config(run_dir).run.script:
        raise UserError(f"run {info.run_id} ran your own script; resume it the way that script resumes")
    if info.status == "completed":
        raise UserError(f"run {info.run_id} has completed; start a new one with `amptui run`")
    if not (run_dir / "checkpoints" / "last.pt").is_file():
        raise UserError(f"run {info.run_id} has no checkpoint to resume from (it ended {info.status} before "
                        "its first checkpoint); start it again with `amptui run`")
    current = load_config(run_dir)
    _check_checkpoint_fits(run_dir, current)
    # The machine may have changed since: the same checks as a new run.
    preflight.check_data(current.to_dict())
    return info


def _check_checkpoint_fits(run_dir: Path, current: cfgmod.Config) -> None:
    """Refuse a resume whose config.toml no longer describes what the checkpoint holds."""
    import torch

    from ..trainer import checkpoint

    try:
        state = torch.load(run_dir / "checkpoints" / checkpoint.FILENAME, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise UserError(f"run {run_dir.name}: its checkpoint cannot be read safely ({type(exc).__name__}: "
                        f"{str(exc).splitlines()[0][:200]})") from None
    changed = checkpoint.structural(checkpoint.config_changes(state.get("config", {}), current.to_dict()))
    if changed:
        listed = ", ".join(f"{k} {a!r} -> {b!r}" for k, a, b in changed)
        raise UserError(f"run {run_dir.name}: config.toml changed since its checkpoint ({listed}); the checkpoint "
                        "no longer fits. Put those values back, or start a new run")
