"""`amptui slurm PRESET`: print (or write, or submit) an sbatch script that runs the preset under
torchrun on N nodes, one task per node (jobs/slurm.py writes it).

Standard library and amptui's core only at import time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from amptui.core.errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("slurm", help="an sbatch script that runs a preset under torchrun on N nodes")
    p.add_argument("preset", metavar="PRESET", help="a built-in or saved preset name, or a path to a .toml file")
    p.add_argument("--nodes", type=int, default=2, metavar="N", help="nodes (default 2), one task each")
    p.add_argument("--gpus-per-node", type=int, default=1, metavar="G",
                   help="GPUs per node, one process each (default 1); 0: CPU nodes, one process each")
    p.add_argument("--cpus-per-node", type=int, metavar="C",
                   help="CPUs for the node's one task, shared by its processes and their data loaders "
                        "(sbatch/srun --cpus-per-task; default: the cluster's)")
    p.add_argument("--partition", metavar="P", help="the SLURM partition (default: the cluster's)")
    p.add_argument("--time", metavar="T", help="the job's time limit, as sbatch takes it (e.g. 02:00:00)")
    p.add_argument("--port", type=int, default=29500, help="the rendezvous port on the first node (default 29500)")
    p.add_argument("--rendezvous", choices=("static", "c10d"), default="static",
                   help="static (default): node K of the job is torchrun's node K, so the first node holds "
                        "global rank 0 and events.jsonl; c10d: torchrun orders the nodes by host name")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a preset key, e.g. --set amp.dtype=bfloat16 (repeatable)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the script to FILE instead of printing it")
    p.add_argument("--submit", action="store_true", help="submit it with sbatch (which must be on PATH)")
    p.add_argument("--runs-dir", metavar="DIR", default=argparse.SUPPRESS,
                   help="the runs folder on storage every node shares (default: this runs folder, as an "
                        "absolute path)")


def handle(args) -> int:
    from amptui.core import safefile
    from amptui.core.config import presets
    from amptui.core.config import values as config
    from amptui.core.run import runs
    from amptui.jobs import slurm

    spec = slurm.JobSpec(nodes=args.nodes, gpus_per_node=args.gpus_per_node, cpus_per_node=args.cpus_per_node,
                         partition=args.partition,
                         time=args.time, port=args.port, rendezvous=args.rendezvous,
                         runs_dir=runs.runs_root(args.runs_dir))
    slurm.check_spec(spec)
    preset = presets.find_preset(args.preset)
    cfg = slurm.job_config(preset, config.parse_set(args.sets), spec)
    script = slurm.job_script(cfg, spec, ["amptui", *args.argv])
    sbatch = shutil.which("sbatch") if args.submit else None
    if args.submit and sbatch is None:
        raise UserError("--submit: sbatch is not on PATH (is this a SLURM login node?); write the script with "
                        "-o FILE and submit it where sbatch is")
    from amptui.cli.prose import say

    for warning in slurm.node_local_warnings(spec):  # after the checks: a refusal stays one line
        say(f"amptui: warning: {warning}", sys.stderr, hang=2)
    if args.output:
        out = Path(args.output)
        try:
            safefile.atomic_write_text(out, script)
            os.chmod(out, 0o755)
        except OSError as exc:
            raise UserError(f"-o {out}: cannot write: {exc.strerror or exc}") from None
        print(f"wrote {out} (submit with: sbatch {out})", file=sys.stderr if sbatch else sys.stdout)
    elif not sbatch:
        print(script, end="")
    if sbatch:
        # sbatch reads the script from stdin when no file is named
        command = [sbatch, str(args.output)] if args.output else [sbatch]
        done = subprocess.run(command, input=None if args.output else script, text=True)
        if done.returncode != 0:
            raise UserError(f"sbatch exited with status {done.returncode} (its message is above)")
        print(f"the run's folder appears in {spec.runs_dir.resolve()} when the job starts (amptui runs --runs-dir "
              f"{spec.runs_dir.resolve()})")
    return 0
