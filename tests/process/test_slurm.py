"""`amptui slurm`: the sbatch script it writes (in process), its refusals, the job's own steps
(prepare, finish), and one job end to end on a stand-in cluster: `sbatch`, `srun` and `scontrol`
are small shell scripts on PATH that run the job's two "nodes" as local processes (gloo, CPU)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import textwrap

import pytest
from support.cli import amptui
from support.records import events

TINY = ["--set", "run.max_steps=4", "--set", "log.every=2", "--set", "data.train_samples=256",
        "--set", "data.val_samples=64", "--set", "run.device=cpu"]


# --- the stand-in cluster ------------------------------------------------------------------------

STAND_INS = {
    "sbatch": """\
        #!/bin/bash
        # stand-in for sbatch: runs the job here, now, its output in slurm-JOBID.out
        script="${1:-/dev/stdin}"
        nodes=$(sed -n 's/^#SBATCH --nodes=//p' "$script")
        export SLURM_JOB_ID=$((RANDOM + 1000)) SLURM_JOB_NUM_NODES="$nodes"
        export SLURM_JOB_NODELIST="$(seq -s, -f '127.0.0.%g' 1 "$nodes")"
        echo "Submitted batch job $SLURM_JOB_ID"
        bash "$script" > "slurm-$SLURM_JOB_ID.out" 2>&1
        """,
    "scontrol": """\
        #!/bin/bash
        # stand-in for `scontrol show hostnames LIST`
        [ "$1 $2" = "show hostnames" ] && tr , '\\n' <<< "$3"
        """,
    "srun": """\
        #!/bin/bash
        # stand-in for srun: each node of the job is a local process, told its SLURM identity
        nodes=1
        while [[ "$1" == --* ]]; do
          case "$1" in --nodes=*) nodes="${1#--nodes=}" ;; esac
          shift
        done
        pids=()
        for ((k = 0; k < nodes; k++)); do
          SLURM_NODEID=$k SLURM_PROCID=$k SLURM_LOCALID=0 SLURMD_NODENAME="node$k" "$@" &
          pids+=($!)
        done
        status=0
        for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
        exit $status
        """,
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_two_nodes_on_a_stand_in_cluster_complete_one_run(cli, runs_dir, tmp_path):
    bin_dir = tmp_path / "cluster-bin"
    bin_dir.mkdir()
    for name, text in STAND_INS.items():
        (bin_dir / name).write_text(textwrap.dedent(text))
        (bin_dir / name).chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    job = tmp_path / "job.sh"
    c10d = tmp_path / "job-c10d.sh"
    cli("slurm", "quickstart", "--rendezvous", "c10d", "-o", str(c10d), check=True)
    proc = amptui("slurm", "quickstart", "--nodes", "2", "--gpus-per-node", "0", "--port", str(free_port()), *TINY,
                  "-o", str(job), "--submit", env=env, timeout=200)
    job_id = re.search(r"Submitted batch job (\d+)", proc.stdout)
    job_output = "".join(p.read_text() for p in tmp_path.glob("slurm-*.out"))
    assert proc.returncode == 0 and job_id, (proc.stdout, proc.stderr, job_output)
    for script in (job, c10d):  # both rendezvous variants are valid bash
        assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    [run_dir] = [d for d in runs_dir.iterdir() if d.is_dir()]
    assert sorted(f.name for f in run_dir.glob("events*.jsonl")) == ["events.jsonl", "events.rank1.jsonl"]
    starts = {rank: next(r for r in events(run_dir, name) if r["kind"] == "start")
              for rank, name in ((0, "events.jsonl"), (1, "events.rank1.jsonl"))}
    for rank, start in starts.items():  # node K holds global rank K, and says which node it is
        assert start["rank"] == rank and start["world_size"] == 2
        assert start["slurm"] == {"job_id": job_id.group(1), "node_id": rank, "nodes": 2, "host": f"node{rank}"}
    end = events(run_dir)[-1]
    assert end["kind"] == "end" and end["status"] == "completed", end
    assert "[rank 1]" in (run_dir / "output.log").read_text()  # both nodes' output, each line naming its rank
    assert f"runs {run_dir}" in job_output
    [listed] = json.loads(amptui("runs", "--format", "json", check=True).stdout)
    assert (listed["run_id"], listed["status"], listed["world_size"]) == (run_dir.name, "completed", 2)
