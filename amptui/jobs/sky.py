"""A SkyPilot task that runs a preset (or the user's script) under torchrun on N nodes.

`amptui sky` writes the task YAML (`task_yaml`), as `sky launch` / `sky jobs launch` take it:
`num_nodes`, `resources.accelerators`, a `setup` that installs amptui as it is installed here
(`install_source`), the runs folder on storage every node shares (a bucket in `file_mounts`, or
a path the user names), and a `run` section that starts torchrun on every node with static
rendezvous from SkyPilot's variables: node rank SKYPILOT_NODE_RANK, the first of
SKYPILOT_NODE_IPS as the rendezvous host, SKYPILOT_NUM_NODES nodes of SKYPILOT_NUM_GPUS_PER_NODE
processes. Inside the task each node calls back into skynode.py, which makes (or, after a
managed job's recovery, reopens) the one run folder of the task.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import re
import shlex
import socket
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from amptui.core.config import values as cfgmod
from amptui.core.config.precision import Precision
from amptui.core.config.presets import Preset
from amptui.core.errors import ConfigError, UserError
from amptui.core.modes import PrecisionMode
from amptui.jobs import clusterfile, slurm

OWN_KEYS = {"dist.nnodes": "--nodes (SKYPILOT_NUM_NODES)", "dist.nproc_per_node": "--gpus (SKYPILOT_NUM_GPUS_PER_NODE)",
            "dist.node_rank": "SKYPILOT_NODE_RANK", "dist.rdzv_endpoint": "the first of SKYPILOT_NODE_IPS"}
BUCKET_MOUNT = "/amptui-runs"   # where a runs bucket is mounted on every node
SOURCE_MOUNT = "~/amptui-src"   # where a local amptui checkout is uploaded to (file_mounts)
HEREDOC_END = "AMPTUI_PRESET"
BUCKET_SCHEMES = ("s3://", "gs://", "r2://", "cos://", "oci://", "https://", "nebius://", "cw://")
# A node's home (and what lies under it) is its own: a runs folder there is not shared.
NODE_HOME = ("~", "$HOME")


@dataclass
class SkySpec:
    nodes: int = 2
    accelerator: str | None = None   # "H100"; None: CPU nodes, one process each
    gpus_per_node: int = 0
    runs_dir: str | None = None       # a path on the nodes that every node shares
    bucket: str | None = None         # or a bucket (name or URL) mounted at BUCKET_MOUNT
    port: int = 29500
    script: str | None = None         # the user's script, relative to `workdir`
    workdir: Path | None = None       # uploaded to ~/sky_workdir, where setup and run start
    script_args: list[str] = field(default_factory=list)

    @property
    def nodes_runs_dir(self) -> str:
        return self.runs_dir if self.runs_dir else BUCKET_MOUNT


def parse_gpus(text: str) -> tuple[str | None, int]:
    """`--gpus H100:8` -> ("H100", 8); "H100" -> ("H100", 1); "cpu" -> (None, 0)."""
    if text.strip().lower() in ("cpu", "none", "0"):
        return None, 0
    name, _, count = text.partition(":")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name) or (count and not count.isdigit()) or count == "0":
        raise UserError(f"--gpus {text}: expected TYPE:COUNT as SkyPilot names them (e.g. H100:8, A100-80GB:4), "
                        "or cpu for CPU nodes")
    return name, int(count or 1)


def check_spec(spec: SkySpec) -> None:
    if spec.nodes < 1:
        raise UserError(f"--nodes {spec.nodes}: give at least 1 node")
    if not 0 < spec.port < 65536:
        raise UserError(f"--port {spec.port}: expected a port from 1 to 65535")
    if spec.runs_dir and spec.bucket:
        raise UserError("--runs-dir and --bucket both name the runs folder: give one of them")
    if spec.runs_dir is not None and not (spec.runs_dir.startswith(("/", "~/")) or spec.runs_dir.startswith("$HOME/")):
        raise UserError(f"--runs-dir {spec.runs_dir}: give the folder's path on the nodes, absolute (e.g. a shared "
                        "volume's /mnt/shared/runs)")
    if spec.bucket is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.:/@+-]*", spec.bucket):
        raise UserError(f"--bucket {spec.bucket}: expected a bucket name (made by SkyPilot when missing) or URL "
                        "(s3://..., gs://...)")
    if spec.runs_dir is not None:
        clusterfile.word(spec.runs_dir, "--runs-dir")
    if spec.script is not None:
        clusterfile.word(spec.script, "--script")
    for value in spec.script_args:
        clusterfile.word(value, "a script argument")


def default_bucket() -> str:
    """A bucket name of this user's own (SkyPilot makes it on first use and reuses it after)."""
    who = re.sub(r"[^a-z0-9-]+", "-", getpass.getuser().lower()).strip("-") or "user"
    tail = hashlib.sha1(f"{getpass.getuser()}@{socket.gethostname()}".encode()).hexdigest()[:6]
    return f"amptui-runs-{who[:20]}-{tail}"


def job_config(preset: Preset | None, overrides: dict, spec: SkySpec) -> cfgmod.Config:
    """The preset (or, for --script, the defaults) with its --set values and the task's shape,
    checked against the schema; not resolved: "auto" is decided on the first node."""
    for key, source in OWN_KEYS.items():
        if key in overrides:
            raise ConfigError(f"--set {key}: amptui sky sets it from {source}")
    mode = overrides.get("dist.mode", "ddp")
    if mode not in cfgmod.TORCHRUN_MODES:
        raise ConfigError(f"--set dist.mode={mode}: amptui sky runs torchrun across the nodes "
                          f"(dist.mode = {' or '.join(cfgmod.TORCHRUN_MODES)})")
    shape = {**overrides, "dist.mode": mode, "dist.nnodes": spec.nodes, "dist.nproc_per_node": max(1, spec.gpus_per_node)}
    if spec.script:
        shape["run.script"] = spec.script
    if preset is None:
        return cfgmod.build_config({}, shape)
    cfg = preset.config(shape)
    if cfg.run.script and not spec.script:
        raise UserError(f"run.script = {cfg.run.script!r}: give the script with --script FILE, so the task uploads it")
    return cfg


def node_local_warnings(spec: SkySpec) -> list[str]:
    """Why the nodes may not share the runs folder: a folder each node has its own of (slurm's
    NODE_LOCAL, or a node's home)."""
    if not spec.runs_dir:
        return []
    path = spec.runs_dir
    home = next((h for h in NODE_HOME if path == h or path.startswith(h + "/")), None)
    folder = home or slurm.node_local(path)
    if folder is None:
        return []
    return [f"--runs-dir {path} is under {folder}, which each node has its own of: the other nodes cannot write "
            "into that run folder; give a path every node shares (a volume, an NFS mount) or --bucket NAME"]


def checkpoint_warnings(cfg: cfgmod.Config) -> list[str]:
    if cfg.run.script or cfg.log.checkpoint_every or cfg.log.checkpoint_every_steps:
        return []
    return ["log.checkpoint_every and log.checkpoint_every_steps are 0: a managed job that recovers after a "
            "preemption starts again from step 0; --set log.checkpoint_every_steps=N keeps its progress"]


# --- how amptui is installed here ------------------------------------------------------------------

@dataclass
class InstallSource:
    requirement: str           # what pip installs on the nodes (before the extras)
    local_path: Path | None    # a checkout to upload (file_mounts) and install from
    how: str                   # said in the setup's comment


def install_source() -> InstallSource:
    """amptui as pip installed it here (PEP 610's direct_url.json): from a checkout (uploaded to
    the nodes), from a VCS URL at its commit, from an archive URL, or from the package index at
    this version."""
    dist = metadata.distribution("amptui")
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "null")
    except (OSError, ValueError):
        direct = None
    version = dist.version
    if isinstance(direct, dict) and isinstance(direct.get("url"), str):
        url = direct["url"]
        vcs = direct.get("vcs_info")
        if isinstance(vcs, dict) and vcs.get("vcs") and vcs.get("commit_id"):
            return InstallSource(f"amptui{{extras}} @ {vcs['vcs']}+{url}@{vcs['commit_id']}", None,
                                 f"from {url} at commit {vcs['commit_id'][:12]}, as here")
        if url.startswith("file://") and isinstance(direct.get("dir_info"), dict):
            path = Path(url[len("file://"):])
            if path.is_dir():
                return InstallSource(f"{SOURCE_MOUNT.replace('~', '$HOME')}{{extras}}", path,
                                     f"from the checkout {path} (uploaded), as here")
        if not url.startswith("file://"):
            return InstallSource(f"amptui{{extras}} @ {url}", None, f"from {url}, as here")
    return InstallSource(f"amptui{{extras}}=={version}", None, f"amptui {version} from the package index, as here")


def extras(cfg: cfgmod.Config) -> list[str]:
    """The extras the config needs on the nodes."""
    wanted = []
    if cfg.log.tensorboard:
        wanted.append("tensorboard")
    if getattr(cfg.log, "mlflow", False):
        wanted.append("mlflow")
    wanted += sorted({m.extra for m in precision_modes(cfg) if m.extra})  # each precision mode's (torchao's)
    return wanted


def precision_modes(cfg: cfgmod.Config) -> list[PrecisionMode]:
    """The precision modes the config trains in: the run's, and each [amp.layers] rule's."""
    return [Precision.from_config(cfg).mode, *(Precision.from_variant(v).mode for v in cfg.amp.layers.values())]


# --- the task ---------------------------------------------------------------------------------------

def setup_section(source: InstallSource, cfg: cfgmod.Config) -> str:
    """Installs amptui as here: the requirement (a URL or path from pip's direct_url.json is a field
    too) one quoted shell word, only the uploaded checkout's leading $HOME left to the shell."""
    chosen = extras(cfg)
    requirement = source.requirement.replace("{extras}", f"[{','.join(chosen)}]" if chosen else "")
    clusterfile.word(requirement, "amptui's install source")
    home = SOURCE_MOUNT.replace("~", "$HOME").split("/")[0]
    pip_arg = (f'"{home}"{shlex.quote(requirement[len(home):])}' if requirement.startswith(home + "/")
               else shlex.quote(requirement))
    return "\n".join([
        "set -euo pipefail",
        "# " + clusterfile.comment(f"amptui {source.how}; torch comes with it (pin a CUDA build here if the image "
                                   "needs one)"),
        f"python3 -m pip install {pip_arg}",
    ]) + "\n"


def run_section(cfg: cfgmod.Config, spec: SkySpec, preset_toml: str) -> str:
    """Every node: its part of the run folder (skynode.py), then torchrun for its processes."""
    if any(line.strip() == HEREDOC_END for line in preset_toml.splitlines()):
        raise UserError(f"the preset contains a line {HEREDOC_END!r}, which ends the task's embedded preset")
    if spec.script:
        worker = f"-m amptui.trainer.scriptrun \"$RUN_DIR\" {clusterfile.shell_join([spec.script, *spec.script_args], 'the script')}"
    else:
        worker = '-m amptui.trainer "$RUN_DIR" $RESUME'
    return "\n".join([
        "set -euo pipefail",
        "export PYTHONUNBUFFERED=1 TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE='[rank ${rank}] '",
        "# The rendezvous host is the first node, which holds global rank 0 and events.jsonl.",
        'HEAD_IP=$(echo "$SKYPILOT_NODE_IPS" | head -n1)',
        "NPROC=$(( SKYPILOT_NUM_GPUS_PER_NODE > 0 ? SKYPILOT_NUM_GPUS_PER_NODE : 1 ))  # CPU nodes: one process",
        "# Node 0 makes the run folder (\"auto\" is decided there) or, when a managed job recovers, reopens",
        "# it to resume from its last checkpoint; the other nodes wait for it. Sets RUN_DIR, RESUME, LOG, SAFE.",
        f'NODE=$(python3 -m amptui.jobs.skynode prepare "$AMPTUI_RUNS_DIR" "$HEAD_IP:$RDZV_PORT" <<\'{HEREDOC_END}\'',
        preset_toml.rstrip("\n"),
        HEREDOC_END,
        ")",
        'eval "$NODE"',
        "status=0",
        'python3 $SAFE -m torch.distributed.run --nnodes "$SKYPILOT_NUM_NODES" --nproc_per_node "$NPROC" --node_rank "$SKYPILOT_NODE_RANK" \\',
        '  --rdzv_backend static --master_addr "$HEAD_IP" --master_port "$RDZV_PORT" --rdzv_id "$SKYPILOT_TASK_ID" \\',
        f'  --max_restarts {cfg.dist.max_restarts} --log_dir "$RUN_DIR/torchrun/node$SKYPILOT_NODE_RANK" --tee 3 \\',
        f'  --no-python python3 -u $SAFE {worker} 2>&1 | tee -a "$LOG" || status=$?',
        'if [ "$SKYPILOT_NODE_RANK" = 0 ]; then python3 -m amptui.jobs.skynode finish "$RUN_DIR" "$status"; fi',
        'exit "$status"',
    ]) + "\n"


def task(cfg: cfgmod.Config, spec: SkySpec, source: InstallSource) -> dict:
    """The task as SkyPilot's YAML holds it (keys in the order its docs list them)."""
    check_spec(spec)
    preset_toml, meant = clusterfile.preset_toml(cfg)
    name = re.sub(r"[^a-z0-9-]+", "-", f"amptui-{cfg.run.name}".lower()).strip("-")[:60]
    doc: dict = {"name": name}
    if spec.workdir is not None:
        doc["workdir"] = str(spec.workdir)
    doc["num_nodes"] = spec.nodes
    if spec.accelerator:
        doc["resources"] = {"accelerators": f"{spec.accelerator}:{spec.gpus_per_node}"}
    doc["envs"] = {"AMPTUI_RUNS_DIR": spec.nodes_runs_dir, "RDZV_PORT": str(spec.port)}
    mounts: dict = {}
    if not spec.runs_dir:
        bucket = spec.bucket or default_bucket()
        # MOUNT_CACHED: appends (events.jsonl, output.log) go through a local cache, uploaded behind
        store = {"source": bucket} if bucket.startswith(BUCKET_SCHEMES) else {"name": bucket}
        mounts[BUCKET_MOUNT] = {**store, "mode": "MOUNT_CACHED"}
    if source.local_path is not None:
        mounts[SOURCE_MOUNT] = str(source.local_path)
    if mounts:
        doc["file_mounts"] = mounts
    doc["setup"] = setup_section(source, cfg)
    doc["run"] = run_section(cfg, spec, preset_toml)
    clusterfile.check_preset(doc["run"] + "\n", HEREDOC_END, meant, "the task's run")
    return doc


def task_yaml(doc: dict, header: list[str]) -> str:
    """YAML text of `doc`: mappings as blocks, multi-line strings as literal blocks (`|`), other
    strings double-quoted (clusterfile.yaml_quoted), numbers plain; comments first. Checked
    whole and parsed back (clusterfile) before anyone writes it."""
    lines = [f"# {clusterfile.comment(line)}" for line in header]
    _emit(doc, 0, lines)
    text = clusterfile.check_text("\n".join(lines) + "\n", "the task")
    clusterfile.check_yaml(text, doc, "the task")
    return text


def _emit(mapping: dict, indent: int, out: list[str]) -> None:
    pad = " " * indent
    for key, value in mapping.items():
        label = key if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) else clusterfile.yaml_quoted(key)
        if isinstance(value, dict):
            out.append(f"{pad}{label}:")
            _emit(value, indent + 2, out)
        elif isinstance(value, str) and "\n" in value:
            out.append(f"{pad}{label}: |")
            out.extend(f"{pad}  {line}" if line else "" for line in value.rstrip("\n").split("\n"))
        elif isinstance(value, bool) or not isinstance(value, (int, str)):
            raise TypeError(f"{key}: {value!r} is not written into a task")
        else:
            out.append(f"{pad}{label}: {value if isinstance(value, int) else clusterfile.yaml_quoted(value)}")
