"""`amptui slurm` on a cluster's terms: a runs folder or a Python in a folder each node has its own
of (/tmp, /var/tmp, /dev/shm) is warned about, and the job's precision is chosen on the compute node
as `amptui run` chooses it there, not on the login node."""

from __future__ import annotations

import sys

from support.machine import cpu_rates_here

from amptui.core.config import values as cfgmod
from amptui.jobs import slurm


def test_a_runs_folder_or_python_under_tmp_is_warned_about(cli, tmp_path, monkeypatch):
    proc = cli("slurm", "quickstart", "--runs-dir", "/tmp/amptui-runs", check=True)
    assert proc.stdout.startswith("#!/bin/bash\n")  # the script still comes, on stdout
    assert "amptui: warning: the runs folder /tmp/amptui-runs is under /tmp, which each node has its own of" \
        in proc.stderr and "--runs-dir on storage every node shares" in proc.stderr
    monkeypatch.setattr(sys, "executable", "/tmp/venv/bin/python")
    proc = cli("slurm", "quickstart", "--runs-dir", "/dev/shm/runs", check=True)
    assert "the runs folder /dev/shm/runs is under /dev/shm" in proc.stderr
    assert "the job's Python /tmp/venv/bin/python is under /tmp" in proc.stderr


def test_shared_paths_get_no_warning():
    spec = slurm.JobSpec(runs_dir=slurm.Path("/work/shared/runs"))
    assert slurm.node_local_warnings(spec, "/work/shared/venv/bin/python") == []


def test_the_script_says_auto_precision_is_chosen_on_the_compute_node(cli):
    script = cli("slurm", "quickstart", check=True).stdout
    assert "# precision: amp.dtype auto: chosen on the compute node as `amptui run` chooses it there" in script
    assert 'dtype = "auto"' in script or "dtype" not in script.split("AMPTUI_PRESET")[1]  # auto, unresolved


def test_the_job_resolves_precision_as_amptui_run_does_on_that_node(runs_dir, tmp_path, monkeypatch):
    """On a node whose bfloat16 measured slow, the job's run falls back to float32 like `amptui run`."""
    cpu_rates_here(tmp_path, monkeypatch, bfloat16=0.001)
    run_dir = slurm.prepare(runs_dir, '[run]\nname = "quickstart"\n[data]\ntrain_samples = 64\n')
    resolved = cfgmod.build_config(cfgmod.read_toml(run_dir / "config.toml"), source="config.toml")
    assert resolved.run.device == "cpu"
    assert (resolved.amp.autocast, resolved.amp.dtype) == (False, "bfloat16"), resolved.amp
