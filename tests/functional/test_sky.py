"""`amptui sky`: the SkyPilot task it writes (parsed as YAML, checked by SkyPilot's own schema where
skypilot is installed and always against the keys SkyPilot's task reference documents), its
refusals and warnings, and its run section executed by bash with stand-ins for SkyPilot's
variables: two loopback "nodes" (CPU, gloo) complete one run; a recovered task resumes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import one_clear_line

from amptui.jobs import sky, skynode

yaml = pytest.importorskip("yaml")  # the test extra has pyyaml (skypilot reads tasks with it)

# SkyPilot's task YAML reference (docs.skypilot.co, reference/yaml-spec): the keys a task may hold.
TASK_KEYS = {"name", "workdir", "num_nodes", "resources", "envs", "secrets", "volumes", "file_mounts", "setup",
             "run", "config", "service", "pool"}
RESOURCE_KEYS = {"infra", "cloud", "region", "zone", "accelerators", "accelerator_args", "cpus", "memory",
                 "instance_type", "use_spot", "disk_size", "disk_tier", "network_tier", "ports", "labels",
                 "image_id", "any_of", "ordered", "job_recovery", "autostop"}
STORAGE_KEYS = {"name", "source", "store", "mode", "persistent", "config"}
STORAGE_MODES = {"MOUNT", "COPY", "MOUNT_CACHED"}


def task_of(cli, *args: str) -> dict:
    return yaml.safe_load(cli("sky", *args, check=True).stdout)


def test_the_done_when_task_has_the_nodes_gpus_setup_shared_runs_and_torchrun(cli, runs_dir):
    task = task_of(cli, "quickstart", "--nodes", "2", "--gpus", "H100:8")
    assert task["num_nodes"] == 2 and task["resources"] == {"accelerators": "H100:8"}
    assert "python3 -m pip install" in task["setup"]  # amptui installed as it is here
    run = task["run"]
    mount = task["file_mounts"]["/amptui-runs"]
    assert mount["mode"] == "MOUNT_CACHED" and mount["name"].startswith("amptui-runs-")
    assert task["envs"]["AMPTUI_RUNS_DIR"] == "/amptui-runs"
    for words in ('HEAD_IP=$(echo "$SKYPILOT_NODE_IPS" | head -n1)', '--nnodes "$SKYPILOT_NUM_NODES"',
                  '--node_rank "$SKYPILOT_NODE_RANK"', "--rdzv_backend static", '--master_addr "$HEAD_IP"',
                  "SKYPILOT_NUM_GPUS_PER_NODE", "-m amptui.trainer \"$RUN_DIR\" $RESUME"):
        assert words in run, words
    assert not runs_dir.exists()  # writing the task makes nothing here


def test_the_task_uses_only_keys_skypilot_documents(cli):
    task = task_of(cli, "quickstart", "--nodes", "2", "--gpus", "H100:8", "--bucket", "s3://team-runs/amptui")
    assert set(task) <= TASK_KEYS and set(task["resources"]) <= RESOURCE_KEYS
    assert isinstance(task["num_nodes"], int) and all(isinstance(v, str) for v in task["envs"].values())
    assert all(isinstance(task[k], str) for k in ("name", "setup", "run"))
    for target, mount in task["file_mounts"].items():
        assert target.startswith(("/", "~/"))
        if isinstance(mount, dict):
            assert set(mount) <= STORAGE_KEYS and mount["mode"] in STORAGE_MODES
    assert task["file_mounts"]["/amptui-runs"] == {"source": "s3://team-runs/amptui", "mode": "MOUNT_CACHED"}


def test_skypilots_own_schema_accepts_the_task(cli, tmp_path):
    pytest.importorskip("sky", reason="skypilot is not installed (pip install skypilot)")
    from sky import Task
    from sky.utils import common_utils, schemas

    for args in (["quickstart", "--gpus", "H100:8"], ["quickstart", "--gpus", "cpu", "--runs-dir", "/mnt/shared/runs"],
                 ["--script", str(write_script(tmp_path)), "--gpus", "A100:4", "--", "--epochs", "3"]):
        out = tmp_path / "task.yaml"
        cli("sky", *args, "--nodes", "2", "-o", str(out), check=True)
        common_utils.validate_schema(yaml.safe_load(out.read_text()), schemas.get_task_schema(), "invalid task: ")
        task = Task.from_yaml(str(out))
        assert task.num_nodes == 2


def write_script(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir(exist_ok=True)
    script = folder / "train.py"
    script.write_text("import sys\nprint('args', sys.argv[1:])\n")
    return script


def test_a_script_task_uploads_its_folder_and_passes_its_arguments(cli, tmp_path):
    script = write_script(tmp_path)
    task = task_of(cli, "--script", str(script), "--gpus", "A100:4", "--", "--epochs", "3", "--name", "a b")
    assert task["workdir"] == str(script.parent)
    assert "-m amptui.trainer.scriptrun \"$RUN_DIR\" train.py --epochs 3 --name 'a b'" in task["run"]


def test_a_script_tasks_header_names_the_script_and_says_whose_precision(cli, tmp_path):
    """Issue 51 (small): the header said "amptui:  on 2 node(s)" and a preset's amp.dtype comment."""
    script = write_script(tmp_path)
    text = cli("sky", "--script", str(script), "--gpus", "A100:4", "--nodes", "2", check=True).stdout
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert header[0].startswith("# amptui: train.py on 2 node(s)")
    said = next(line for line in header if line.startswith("# precision: "))
    assert "amp.dtype" not in said and "the script's own" in said
    applied = cli("sky", "--script", str(script), "--gpus", "A100:4", "--set", "run.apply_amp=bf16", check=True).stdout
    assert "# precision: bf16, applied by amptui" in applied


def test_the_setup_installs_amptui_as_it_was_installed(monkeypatch):
    class Dist:
        version = "1.2.3"

        def __init__(self, direct):
            self.direct = direct

        def read_text(self, name):
            return json.dumps(self.direct) if self.direct is not None else None

    cases = [(None, "amptui{extras}==1.2.3"),
             ({"url": "https://github.com/o/amptui", "vcs_info": {"vcs": "git", "commit_id": "abc123"}},
              "amptui{extras} @ git+https://github.com/o/amptui@abc123"),
             ({"url": "https://example.org/amptui-1.2.3.whl", "archive_info": {}},
              "amptui{extras} @ https://example.org/amptui-1.2.3.whl")]
    for direct, requirement in cases:
        monkeypatch.setattr(sky.metadata, "distribution", lambda name, d=direct: Dist(d))
        source = sky.install_source()
        assert (source.requirement, source.local_path) == (requirement, None)
    here = sky.install_source  # this checkout, installed editable: uploaded and installed from there
    monkeypatch.undo()
    if here().local_path is not None:
        assert here().requirement.startswith("$HOME/amptui-src")


@pytest.mark.parametrize("args, says", [
    (["no-such-preset", "--gpus", "H100:8"], "no-such-preset"),
    (["quickstart", "--gpus", "H100:lots"], "--gpus"),
    (["quickstart", "--gpus", "H100:8", "--nodes", "0"], "--nodes 0"),
    (["quickstart", "--gpus", "H100:8", "--set", "dist.nnodes=4"], "dist.nnodes"),
    (["quickstart", "--gpus", "H100:8", "--set", "dist.mode=dp"], "dist.mode"),
    (["quickstart", "--gpus", "H100:8", "--set", "amp.nope=1"], "amp.nope"),
    (["quickstart", "--gpus", "H100:8", "--runs-dir", "runs"], "--runs-dir"),
    (["quickstart", "--gpus", "H100:8", "--runs-dir", "/r", "--bucket", "b"], "--bucket"),
    (["quickstart", "--gpus", "H100:8", "--bucket", "b; rm -rf ~"], "--bucket"),
    (["--script", "missing.py", "--gpus", "H100:8"], "missing.py"),
    (["quickstart", "--gpus", "H100:8", "--port", "0"], "--port"),
])
def test_bad_input_is_one_line_and_writes_nothing(cli, tmp_path, args, says):
    out = tmp_path / "task.yaml"
    assert says in one_clear_line(cli("sky", *args, "-o", str(out)))
    assert not out.exists()


def test_a_node_local_runs_folder_is_warned_about_as_slurm_does(cli):
    for path, folder in (("/tmp/runs", "/tmp"), ("~/runs", "~")):
        proc = cli("sky", "quickstart", "--gpus", "H100:8", "--runs-dir", path, check=True)
        assert f"amptui: warning: --runs-dir {path} is under {folder}, which each node has its own of" in proc.stderr
        task = yaml.safe_load(proc.stdout)
        assert "file_mounts" not in task or "/amptui-runs" not in task["file_mounts"]
    assert "warning" not in cli("sky", "quickstart", "--gpus", "H100:8", "--runs-dir", "/mnt/nfs/runs", check=True).stderr


def test_the_run_folder_is_named_alike_on_every_node_and_recovery():
    task_id = "sky-managed-2026-11-27-19-30-01-123456_train_3-0"
    name = skynode.folder_name("quickstart", task_id)
    assert name.startswith("20261127-193001-quickstart-sky") and name == skynode.folder_name("quickstart", task_id)
    assert skynode.folder_name("quickstart", "other") != name


def test_outside_a_task_the_node_step_says_so(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "amptui.jobs.skynode", "prepare", str(tmp_path), "h:1"],
                          input="", capture_output=True, text=True, env={**os.environ, "PATH": os.environ["PATH"]})
    assert proc.returncode == 2 and "SKYPILOT_TASK_ID" in proc.stderr and "Traceback" not in proc.stderr
