"""Inside a SkyPilot task (jobs/sky.py writes its run section), on every node:

    python3 -m amptui.jobs.skynode prepare RUNS_DIR HEAD:PORT < preset.toml   # prints shell assignments
    python3 -m amptui.jobs.skynode finish RUN_DIR STATUS                     # node 0: an `end` if none came

The task's one run folder is named from SKYPILOT_TASK_ID, which every node of the task sees and
which a managed job keeps across its recoveries. Node 0 makes it ("auto" decided there, as `amptui
run` decides it, the world from SKYPILOT_NUM_NODES x SKYPILOT_NUM_GPUS_PER_NODE); when it is
already there (the managed job recovered on new machines) the run resumes from its last
checkpoint. The other nodes wait, bounded, until the folder shows on the shared storage.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import sys
import time
from pathlib import Path

from amptui.core.config import values as cfgmod
from amptui.core.errors import UserError
from amptui.core.prepare import preflight
from amptui.core.run import runlock, runs
from amptui.core.run.runfiles import CHECKPOINT_FILE, RunFolder
from amptui.jobs import slurm
from amptui.jobs.spawn import SAFE_PATH

WAIT_S = float(os.environ.get("AMPTUI_SKY_WAIT_S", 600))  # how long a node waits for node 0's folder


def task_env(env: dict[str, str] | os._Environ = os.environ) -> dict[str, str]:
    missing = [k for k in ("SKYPILOT_TASK_ID", "SKYPILOT_NODE_RANK", "SKYPILOT_NUM_NODES") if not env.get(k)]
    if missing:
        raise UserError(f"{', '.join(missing)} not set: this runs inside a SkyPilot task (sky launch TASK.yaml)")
    return dict(env)


def folder_name(run_name: str, task_id: str) -> str:
    """The task's run id: the task's start time when its id holds one (SkyPilot's ids do), the
    preset's name, and a hash of the task id: the same on every node and every recovery."""
    stamp = re.search(r"(\d{4})-(\d{2})-(\d{2})-(\d{2})-(\d{2})-(\d{2})", task_id)
    slug = re.sub(r"[^A-Za-z0-9_.+-]+", "-", run_name).strip("-.")[:40] or "run"
    tail = hashlib.sha1(task_id.encode()).hexdigest()[:6]
    head = f"{''.join(stamp.groups()[:3])}-{''.join(stamp.groups()[3:])}-" if stamp else ""
    return f"{head}{slug}-sky{tail}"


def resumable(folder: RunFolder, cfg: cfgmod.Config) -> bool:
    """Node 0 and the others decide alike: amptui's trainer resumes where a checkpoint is (a
    script's own checkpoints are its own business)."""
    return not cfg.run.script and (folder.checkpoints / CHECKPOINT_FILE).is_file()


def prepare(runs_dir: Path, endpoint: str, preset_toml: str, env=os.environ) -> dict[str, str]:
    env = task_env(env)
    rank = int(env["SKYPILOT_NODE_RANK"])
    cfg = cfgmod.build_config(cfgmod.parse_toml(preset_toml, "the task's preset"), source="the task's preset")
    folder = RunFolder(runs_dir / folder_name(cfg.run.name, env["SKYPILOT_TASK_ID"]))
    if rank == 0 and not folder.config.is_file():
        make(folder, cfg, endpoint, env)
    elif rank == 0:
        print(f"amptui: {folder.path} is there already (the managed job recovered): "
              + ("resuming from its last checkpoint" if resumable(folder, folder.load_config())
                 else "no checkpoint in it, so the run starts again from step 0"), file=sys.stderr)
    else:
        wait_for(folder)
    resume = resumable(folder, folder.load_config())
    log = folder.output_log if rank == 0 else folder.path / "torchrun" / f"node{rank}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    return {"RUN_DIR": str(folder.path), "RESUME": "--resume" if resume else "", "LOG": str(log), "SAFE": SAFE_PATH}


def make(folder: RunFolder, cfg: cfgmod.Config, endpoint: str, env: dict[str, str]) -> None:
    from amptui.jobs.launch import measured_slow_dtypes

    world = {"dist.nnodes": int(env["SKYPILOT_NUM_NODES"]),
             "dist.nproc_per_node": max(1, int(env.get("SKYPILOT_NUM_GPUS_PER_NODE") or 0)),
             "dist.rdzv_endpoint": endpoint}
    cfg = preflight.resolve(cfg.with_overrides(world, source="the SkyPilot task"), slow_dtypes=measured_slow_dtypes)
    try:
        folder.path.mkdir(parents=True)
    except FileExistsError:
        pass
    except OSError as exc:
        raise UserError(f"cannot create the run folder {folder.path}: {exc.strerror or exc}") from None
    task_id = env["SKYPILOT_TASK_ID"]
    runs.write_new(folder, cfg, f"# amptui run {folder.name}: SkyPilot task {task_id}, resolved on its first node")
    command = ["sky", f"task {task_id}"]
    runs.write_launch_info(folder.path, os.getppid(), command)  # the run section's shell runs the run
    with runlock.acquire(folder.path) as lock:
        lock.describe(os.getppid(), command)


def wait_for(folder: RunFolder, wait_s: float | None = None) -> None:
    """Until node 0's config.toml shows here (shared storage may lag); bounded."""
    deadline = time.monotonic() + (WAIT_S if wait_s is None else wait_s)
    while not folder.config.is_file():
        if time.monotonic() > deadline:
            raise UserError(f"{folder.config} did not appear within {WAIT_S:.0f} s: node 0 failed before making "
                            "the run folder, or this node does not share the runs folder with it")
        time.sleep(0.5)


def main(argv: list[str]) -> int:
    try:
        if len(argv) == 3 and argv[0] == "prepare":
            told = prepare(Path(argv[1]), argv[2], sys.stdin.read(1024 * 1024))
            print("\n".join(f"{key}={shlex.quote(value)}" for key, value in told.items()))
            return 0
        if len(argv) == 3 and argv[0] == "finish" and argv[2].lstrip("-").isdigit():
            slurm.finish(Path(argv[1]), int(argv[2]), job=f"SkyPilot task {os.environ.get('SKYPILOT_TASK_ID', '?')}")
            return 0
    except UserError as exc:
        print(f"amptui: error: {exc}", file=sys.stderr)
        return exc.exit_code
    print("usage: python -m amptui.jobs.skynode prepare RUNS_DIR HEAD:PORT < PRESET.toml | finish RUN_DIR STATUS",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
