"""Where a process runs on a cluster: its SLURM job and node, as the start record names them.

Standard library only: read from the environment SLURM (srun) and torchrun give each process.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping


def slurm_identity(env: Mapping[str, str] | None = None) -> dict | None:
    """{job_id, node_id, nodes, host} for a process of a SLURM job, else None. `node_id` is
    SLURM_NODEID (the node's index in the job); `host` the node's name as SLURM knows it."""
    env = os.environ if env is None else env
    job = env.get("SLURM_JOB_ID")
    if not job:
        return None
    return {"job_id": job, "node_id": _int(env.get("SLURM_NODEID")), "nodes": _int(env.get("SLURM_JOB_NUM_NODES")),
            "host": env.get("SLURMD_NODENAME") or socket.gethostname()}


def node_order_warning(rank: int, env: Mapping[str, str] | None = None) -> str | None:
    """For global rank 0: a warning when it is not on the job's node 0 (torchrun's c10d
    rendezvous orders the nodes by host name), since users look for rank 0's records there."""
    slurm = slurm_identity(env)
    if rank != 0 or slurm is None or slurm["node_id"] in (None, 0):
        return None
    return (f"global rank 0 runs on SLURM node {slurm['node_id']} ({slurm['host']}), not on node 0: torchrun's "
            "c10d rendezvous orders nodes by host name; `amptui slurm` with its default static rendezvous keeps "
            "node 0 = rank 0")


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and value.strip().isdigit() else None
