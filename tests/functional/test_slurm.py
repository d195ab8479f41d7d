"""`amptui slurm`: the sbatch script it writes (in process), its refusals, the job's own steps
(prepare, finish), and one job end to end on a stand-in cluster: `sbatch`, `srun` and `scontrol`
are small shell scripts on PATH that run the job's two "nodes" as local processes (gloo, CPU)."""

from __future__ import annotations

import json
import re
import stat

import pytest
from support.cli import one_clear_line
from support.records import events

from amptui.core import cluster
from amptui.jobs import slurm
from amptui.jobs.spawn import SAFE_PATH


def test_the_script_is_one_task_per_node_with_the_job_as_rendezvous(cli, runs_dir):
    proc = cli("slurm", "quickstart", "--nodes", "3", "--gpus-per-node", "4", "--cpus-per-node", "48", "--partition", "gpu",
               "--time", "02:00:00", "--set", "amp.dtype=bfloat16", check=True)
    script = proc.stdout
    assert script.startswith("#!/bin/bash\n")
    for line in ("#SBATCH --nodes=3", "#SBATCH --ntasks-per-node=1", "#SBATCH --gpus-per-node=4",
                 "#SBATCH --partition=gpu", "#SBATCH --cpus-per-task=48", "#SBATCH --time=02:00:00", "#SBATCH --job-name=amptui-quickstart"):
        assert line in script.splitlines()
    assert 'HEAD_NODE=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)' in script
    assert f"RUNS_DIR={runs_dir.resolve()} " in script  # the runs folder, absolute: every node finds it
    flat = script.replace("\\\n", " ")
    assert re.search(r"srun --nodes=3 --ntasks-per-node=1 --cpus-per-task=48 .*\$TORCHRUN\" +--nnodes 3 --nproc_per_node 4 "
                     r"--node_rank \"\$SLURM_NODEID\" +--rdzv_backend static --master_addr \"\$HEAD_NODE\" "
                     r"--master_port \"\$RDZV_PORT\" --rdzv_id \"\$SLURM_JOB_ID\"", flat), flat
    assert f'--no-python "$PYTHON" -u {SAFE_PATH} -m amptui.trainer "$RUN_DIR"' in flat
    assert 'dtype = "bfloat16"' in script and 'mode = "ddp"' in script  # the preset, as given, inside
    assert not runs_dir.exists()  # printing the script makes nothing


def test_c10d_rendezvous_on_request(cli):
    script = cli("slurm", "quickstart", "--rendezvous", "c10d", "--gpus-per-node", "0", check=True).stdout
    flat = script.replace("\\\n", " ")
    assert '--rdzv_backend c10d --rdzv_endpoint "$HEAD_NODE:$RDZV_PORT" --rdzv_id "$SLURM_JOB_ID"' in flat
    assert "--node_rank" not in flat
    assert "#SBATCH --gpus-per-node" not in script  # CPU nodes: no GPUs asked of SLURM
    assert "--nproc_per_node 1" in flat


@pytest.mark.parametrize("args, says", [
    (["no-such-preset"], "no-such-preset"),
    (["quickstart", "--set", "amp.nope=1"], "amp.nope"),
    (["quickstart", "--set", "run.max_steps=lots"], "run.max_steps"),
    (["quickstart", "--set", "dist.nnodes=4"], "--nodes"),
    (["quickstart", "--set", "dist.mode=dp"], "dist.mode"),
    (["quickstart", "--nodes", "0"], "--nodes 0"),
    (["quickstart", "--set", "run.script='train.py'"], "run.script"),
    (["quickstart", "--gpus-per-node", "-1"], "--gpus-per-node"),
    (["quickstart", "--cpus-per-node", "0"], "--cpus-per-node"),
    (["quickstart", "--partition", "gpu; rm -rf ~"], "--partition"),
    (["quickstart", "--port", "70000"], "--port"),
])
def test_bad_input_is_one_line_and_writes_nothing(cli, tmp_path, args, says):
    out = tmp_path / "job.sh"
    assert says in one_clear_line(cli("slurm", *args, "-o", str(out)))
    assert not out.exists()


def test_submit_without_sbatch_says_so_and_writes_nothing(cli, tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    out = tmp_path / "job.sh"
    line = one_clear_line(cli("slurm", "quickstart", "-o", str(out), "--submit", env={"PATH": str(empty)}))
    assert "sbatch is not on PATH" in line
    assert not out.exists()


def test_o_writes_an_executable_script(cli, tmp_path):
    out = tmp_path / "job.sh"
    proc = cli("slurm", "quickstart", "-o", str(out), check=True)
    assert f"wrote {out}" in proc.stdout
    assert out.read_text().startswith("#!/bin/bash") and out.stat().st_mode & stat.S_IXUSR


def test_slurm_identity_and_the_node_order_warning():
    env = {"SLURM_JOB_ID": "77", "SLURM_NODEID": "1", "SLURM_JOB_NUM_NODES": "2", "SLURMD_NODENAME": "gpu-b"}
    assert cluster.slurm_identity(env) == {"job_id": "77", "node_id": 1, "nodes": 2, "host": "gpu-b"}
    assert cluster.slurm_identity({}) is None
    assert "SLURM node 1 (gpu-b), not on node 0" in cluster.node_order_warning(0, env)
    assert cluster.node_order_warning(1, env) is None  # only rank 0 says it
    assert cluster.node_order_warning(0, {**env, "SLURM_NODEID": "0"}) is None


def test_a_job_that_failed_before_its_ranks_ended_ends_failed(cli, runs_dir, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "91")
    run_dir = slurm.prepare(runs_dir, '[run]\nname = "quickstart"\n[data]\ntrain_samples = 64\n')
    assert (run_dir / "config.toml").read_text().startswith("# amptui run ")
    slurm.finish(run_dir, 0)
    assert not (run_dir / "events.jsonl").exists()  # a clean exit leaves the ranks' records alone
    slurm.finish(run_dir, 3)
    end = events(run_dir)[-1]
    assert end["kind"] == "end" and end["status"] == "failed" and "status 3" in end["error"]["message"]
    [listed] = json.loads(cli("runs", "--format", "json", check=True).stdout)
    assert listed["status"] == "failed"
