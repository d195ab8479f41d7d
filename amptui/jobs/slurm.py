"""A SLURM job that runs a preset under torchrun on N nodes, one task per node.

`amptui slurm` writes the script (`job_script`); the job itself calls back into this module twice:

    python -m amptui.jobs.slurm prepare RUNS_DIR < preset.toml   # on the first node: the run folder
    python -m amptui.jobs.slurm finish RUN_DIR STATUS            # after srun: an `end` if none came

The run folder is made when the job starts, not when the script is written: "auto" settings
(device, dtype, backend, workers) are decided on a compute node, not on the login node, as
`amptui run` decides them there (a dtype measured slow on that node falls back to float32), and
the data is checked where it will be read. Every node's ranks write into that one folder on shared
storage (rank 0 `events.jsonl`, the others `events.rank<N>.jsonl`), so the run lists, watches and
compares like any other.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from amptui.core.config import values as cfgmod
from amptui.core.config.presets import Preset
from amptui.core.errors import ConfigError, UserError
from amptui.core.prepare import preflight
from amptui.core.run import runlock, runs
from amptui.core.run.runstate import fold
from amptui.core.stream.events import EventReader, EventWriter, primary_events_file
from amptui.core.stream.records import End, ErrorInfo
from amptui.jobs import clusterfile
from amptui.jobs.spawn import SAFE_PATH

# Keys the job sets itself, from the command's options (each node's rank comes from SLURM).
OWN_KEYS = {"dist.nnodes": "--nodes", "dist.nproc_per_node": "--gpus-per-node",
            "dist.node_rank": "SLURM_NODEID", "dist.rdzv_endpoint": "the first node of the job"}
HEREDOC_END = "AMPTUI_PRESET"
RENDEZVOUS = ("static", "c10d")
# Folders each node has its own of: a runs folder or a Python there is not what the other nodes see.
NODE_LOCAL = ("/tmp", "/var/tmp", "/dev/shm")


@dataclass
class JobSpec:
    nodes: int = 2
    gpus_per_node: int = 1      # 0: CPU nodes, one process each
    partition: str | None = None
    time: str | None = None
    cpus_per_node: int | None = None  # the one task's CPUs: all the node's processes and their data loaders
    port: int = 29500
    rendezvous: str = "static"  # static keeps node 0 = global rank 0; c10d orders nodes by host name
    runs_dir: Path = Path("runs")

    @property
    def procs_per_node(self) -> int:
        return max(1, self.gpus_per_node)


def job_config(preset: Preset, overrides: dict, spec: JobSpec) -> cfgmod.Config:
    """The preset with its --set values and the job's shape, checked against the schema (one
    ConfigError naming the key); not resolved: "auto" is decided on the compute node."""
    for key, option in OWN_KEYS.items():
        if key in overrides:
            raise ConfigError(f"--set {key}: amptui slurm sets it from {option}")
    mode = overrides.get("dist.mode", "ddp")
    if mode not in cfgmod.TORCHRUN_MODES:
        raise ConfigError(f"--set dist.mode={mode}: amptui slurm runs torchrun across the nodes "
                          f"(dist.mode = {' or '.join(cfgmod.TORCHRUN_MODES)})")
    cfg = preset.config({**overrides, "dist.mode": mode, "dist.nnodes": spec.nodes,
                         "dist.nproc_per_node": spec.procs_per_node})
    if cfg.run.script:
        raise UserError(f"run.script = {cfg.run.script!r}: amptui slurm runs presets with amptui's trainer; run "
                        "your own script under srun/torchrun with amptui.Monitor in it (docs/your-own-code.md)")
    return cfg


def check_spec(spec: JobSpec) -> None:
    if spec.nodes < 1:
        raise UserError(f"--nodes {spec.nodes}: give at least 1 node")
    if spec.gpus_per_node < 0:
        raise UserError(f"--gpus-per-node {spec.gpus_per_node}: give 0 (CPU nodes) or more")
    if spec.cpus_per_node is not None and spec.cpus_per_node < 1:
        raise UserError(f"--cpus-per-node {spec.cpus_per_node}: give at least 1")
    if not 0 < spec.port < 65536:
        raise UserError(f"--port {spec.port}: expected a port from 1 to 65535")
    for option, value in (("--partition", spec.partition), ("--time", spec.time)):
        if value is not None and (not value.isprintable() or not value or any(c.isspace() or c in "\"'\\$`#" for c in value)):
            raise UserError(f"{option} {value!r}: expected one word, as sbatch takes it")
    if spec.rendezvous not in RENDEZVOUS:
        raise UserError(f"--rendezvous {spec.rendezvous}: expected static or c10d")


def node_local(path: str | Path) -> str | None:
    """The node-local folder (NODE_LOCAL) `path` lies in, as written or resolved; None if none."""
    for candidate in (Path(path).absolute(), Path(path).resolve()):
        for folder in NODE_LOCAL:
            if candidate == Path(folder) or Path(folder) in candidate.parents:
                return folder
    return None


def node_local_warnings(spec: JobSpec, python: str | None = None) -> list[str]:
    """Why the job may not find its runs folder or its Python on the other nodes: each lies in a
    folder every node has its own of (/tmp, /var/tmp, /dev/shm)."""
    python = python or sys.executable
    said = []
    runs_dir = spec.runs_dir.resolve()
    if folder := node_local(runs_dir):
        said.append(f"the runs folder {runs_dir} is under {folder}, which each node has its own of: the "
                    "other nodes cannot write into it and the run is not seen from here; give --runs-dir "
                    "on storage every node shares")
    if folder := node_local(python):
        said.append(f"the job's Python {python} is under {folder}, which each node has its own of: the "
                    "compute nodes may not have it; run amptui slurm from an environment on shared storage")
    return said


def precision_words(cfg: cfgmod.Config) -> str:
    """The job's precision as the script says it: "auto on each node" where amp.dtype is auto."""
    if cfg.amp.dtype == "auto":
        return ("amp.dtype auto: chosen on the compute node as `amptui run` chooses it there (a dtype "
                "measured slow on that node falls back to float32)")
    return f"amp.dtype {cfg.amp.dtype}" + ("" if cfg.amp.autocast else " (autocast off: float32)")


def torchrun_path() -> str:
    """The torchrun beside this Python (the venv's), else the one on the job's PATH."""
    beside = Path(sys.executable).parent / "torchrun"
    return str(beside) if beside.is_file() else "torchrun"


def job_script(cfg: cfgmod.Config, spec: JobSpec, command: list[str]) -> str:
    """The sbatch script: one task per node, each running torchrun for that node's processes;
    checked whole and its preset read back (clusterfile) before anyone writes it."""
    check_spec(spec)
    preset_toml, meant = clusterfile.preset_toml(cfg)
    if any(line.strip() == HEREDOC_END for line in preset_toml.splitlines()):
        raise UserError(f"the preset contains a line {HEREDOC_END!r}, which ends the job's embedded preset")
    name = re.sub(r"[^A-Za-z0-9_.+-]+", "-", cfg.run.name).strip("-.")[:40] or "run"  # one word for sbatch
    runs_dir = spec.runs_dir.resolve()
    q = shlex.quote
    sbatch = [f"--job-name=amptui-{name}", f"--nodes={spec.nodes}", "--ntasks-per-node=1"]
    if spec.gpus_per_node:
        sbatch.append(f"--gpus-per-node={spec.gpus_per_node}")
    cpus = [f"--cpus-per-task={spec.cpus_per_node}"] if spec.cpus_per_node else []
    sbatch += cpus + [f"--partition={spec.partition}"] * bool(spec.partition) + [f"--time={spec.time}"] * bool(spec.time)
    if spec.rendezvous == "static":  # node K of the job is torchrun's node K: node 0 holds global rank 0
        rendezvous = ('--node_rank "$SLURM_NODEID" \\\n    --rdzv_backend static --master_addr "$HEAD_NODE" '
                      '--master_port "$RDZV_PORT" --rdzv_id "$SLURM_JOB_ID"')
    else:  # torchrun orders the nodes by host name: node 0 need not hold global rank 0
        rendezvous = '\\\n    --rdzv_backend c10d --rdzv_endpoint "$HEAD_NODE:$RDZV_PORT" --rdzv_id "$SLURM_JOB_ID"'
    lines = [
        "#!/bin/bash",
        f"# amptui: preset {name} on {spec.nodes} node(s) x {spec.procs_per_node} process(es), torchrun with "
        f"{spec.rendezvous} rendezvous",
        "# written by: " + clusterfile.comment(shlex.join(command)),  # a line break must not end the comment
        "# submit with: sbatch THIS_FILE",
        "# precision: " + precision_words(cfg),
        *(f"#SBATCH {line}" for line in sbatch),
        *([] if cpus else ["# (no --cpus-per-node given: the one task per node gets the cluster's default CPUs, for all "
                           "of its processes and their data loaders)"]),
        "",
        "set -euo pipefail",
        "",
        f"RUNS_DIR={q(clusterfile.word(str(runs_dir), '--runs-dir'))}  # on storage every node shares: the run's "
        "folder is made here",
        f"PYTHON={q(clusterfile.word(sys.executable, 'this Python'))}  # a Python with amptui and torch, on every node",
        f"TORCHRUN={q(clusterfile.word(torchrun_path(), 'torchrun'))}",
        f"RDZV_PORT={spec.port}",
        'HEAD_NODE=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)',
        "export RUNS_DIR PYTHON TORCHRUN RDZV_PORT HEAD_NODE PYTHONUNBUFFERED=1",
        "export TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE='[rank ${rank}] '  # each output line names its rank",
        "",
        "# The run folder, made once on this (the first) node from the preset below; \"auto\" is decided here.",
        f'RUN_DIR=$("$PYTHON" {SAFE_PATH} -m amptui.jobs.slurm prepare "$RUNS_DIR" <<\'{HEREDOC_END}\'',
        preset_toml.rstrip("\n"),
        HEREDOC_END,
        ")",
        "export RUN_DIR",
        "# The run's lock, held by this script while the job lives: `amptui runs` anywhere says running.",
        'exec 9<>"$RUN_DIR/lock"',
        'flock -n 9 || echo "amptui: cannot lock $RUN_DIR/lock (a file system without flock?): the run may list as '
        'killed until it ends" >&2',
        'echo "amptui: job $SLURM_JOB_ID runs $RUN_DIR; follow it with: amptui --runs-dir $RUNS_DIR watch '
        '$(basename "$RUN_DIR")"',
        "",
        "# One task per node; torchrun there starts the node's processes ($SLURM_NODEID is each node's own).",
        "status=0",
        f"srun --nodes={spec.nodes} --ntasks-per-node=1 {' '.join(cpus) + ' ' if cpus else ''}--kill-on-bad-exit=1 "
        "bash -c 'exec \"$TORCHRUN\" \\",
        f"    --nnodes {spec.nodes} --nproc_per_node {spec.procs_per_node} {rendezvous} \\",
        f"    --max_restarts {cfg.dist.max_restarts} --log_dir \"$RUN_DIR/torchrun/node$SLURM_NODEID\" --tee 3 \\",
        # torchrun's own -m would put the working folder first on the ranks' path (jobs/spawn.py SAFE_PATH)
        f"    --no-python \"$PYTHON\" -u {SAFE_PATH} -m amptui.trainer \"$RUN_DIR\"' 2>&1 | tee -a \"$RUN_DIR/output.log\" "
        "|| status=$?",
        f'"$PYTHON" {SAFE_PATH} -m amptui.jobs.slurm finish "$RUN_DIR" "$status"',
        'exit "$status"',
    ]
    text = clusterfile.check_text("\n".join(lines) + "\n", "the job script")
    clusterfile.check_preset(text, HEREDOC_END, meant, "the job script")
    return text


# --- inside the job ------------------------------------------------------------------------------

def prepare(runs_dir: Path, preset_toml: str) -> Path:
    """Resolve the embedded preset on this node and make the run folder (config.toml, run.json
    naming the job script's process here). Returns the folder."""
    cfg = cfgmod.build_config(cfgmod.parse_toml(preset_toml, "the job's preset"), source="the job's preset")
    from amptui.jobs.launch import measured_slow_dtypes

    cfg = preflight.resolve(cfg, slow_dtypes=measured_slow_dtypes)  # as `amptui run` on this node
    folder = runs.create_folder(runs_dir, cfg.run.name)
    job = os.environ.get("SLURM_JOB_ID", "?")
    runs.write_new(folder, cfg, f"# amptui run {folder.name}: preset {cfg.run.name!r}, SLURM job {job}, resolved "
                                "on its first node")
    # The job script (this process's parent) runs the run: it takes the lock next (flock in bash),
    # so readers anywhere on the shared storage see a live writer until the job ends.
    command = ["sbatch", f"job {job}"]
    runs.write_launch_info(folder.path, os.getppid(), command)
    with runlock.acquire(folder.path) as lock:
        lock.describe(os.getppid(), command)
    return folder.path


def finish(run_dir: Path, status: int, job: str | None = None) -> None:
    """After srun (or a SkyPilot task's torchrun, `job` naming it): a failed job whose ranks wrote
    no `end` (torchrun failed, a node vanished) ends `failed` here, so the run does not stay
    `running`."""
    path = primary_events_file(run_dir)
    session = fold(EventReader(path).read()) if path.exists() else None
    if status == 0 or (session is not None and session.ended):
        return
    started = session.session_t if session is not None else None
    launcher = "torchrun" if job else "srun/torchrun"
    job = job or f"SLURM job {os.environ.get('SLURM_JOB_ID', '?')}"
    error = ErrorInfo("SlurmJobFailed" if launcher == "srun/torchrun" else "JobFailed",
                      f"{launcher} exited with status {status} before the run ended ({job}; see output.log)", None)
    with EventWriter(path, rank=0) as writer:
        writer.write(End(status="failed", total_time_s=(time.time() - started) if started else None,
                         steps=max(session.step, session.session_step) if session is not None else 0,
                         final_loss=session.loss if session is not None else None, error=asdict(error)))


def main(argv: list[str]) -> int:
    try:
        if len(argv) == 2 and argv[0] == "prepare":
            print(prepare(Path(argv[1]), sys.stdin.read(1024 * 1024)))
            return 0
        if len(argv) == 3 and argv[0] == "finish" and argv[2].lstrip("-").isdigit():
            finish(Path(argv[1]), int(argv[2]))
            return 0
    except UserError as exc:
        print(f"amptui: error: {exc}", file=sys.stderr)
        return exc.exit_code
    print("usage: python -m amptui.jobs.slurm prepare RUNS_DIR < PRESET.toml | finish RUN_DIR STATUS",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
