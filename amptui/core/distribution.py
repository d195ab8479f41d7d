"""How a run was spread over processes, for the run lists (`amptui runs`, the dashboard's Runs)
and compare: its dist mode, world size and, for FSDP, the MixedPrecisionPolicy it ran with.

    dist = dist_of("fsdp", 2, {"param_dtype": "bfloat16", ...})  # `runs --format json`'s "dist"
    precision_label("bf16", dist)                                # "bf16 FSDP x2"

The precision short name already says an FSDP policy's dtypes ("bf16": bfloat16 params, float32
reduce; "bf16+reduce": bfloat16 reduce too; the shards and optimizer stay float32), so the label
adds only how the run was distributed: an FSDP run no longer reads as a plain "fp32" or "bf16".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from amptui.core.config.precision import precision_or_unseen

MODE_NAMES = {"dp": "DP", "ddp": "DDP", "fsdp": "FSDP"}  # dist.mode "none" (one process) says nothing


def dist_of(mode: Any, world_size: Any, policy: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """{"mode", "world_size"} (and "policy" for FSDP: param / reduce / sharded dtypes, None when
    not known), or None for a one-process run."""
    if mode not in MODE_NAMES:
        return None
    size = world_size if isinstance(world_size, int) and not isinstance(world_size, bool) and world_size > 0 else 1
    out: dict[str, Any] = {"mode": mode, "world_size": size}
    if mode == "fsdp":
        out["policy"] = dict(policy) if policy else None
    return out


def start_policy(start: Mapping[str, Any] | None) -> dict[str, str] | None:
    """The start record's FSDP policy (`precision.fsdp`), its dtype names only; None when it has none."""
    precision = (start or {}).get("precision")
    fsdp = precision.get("fsdp") if isinstance(precision, Mapping) else None
    if not isinstance(fsdp, Mapping):
        return None
    return {str(k): v for k, v in fsdp.items() if isinstance(v, str)} or None


def with_start(dist: dict[str, Any] | None, start: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """`dist` (from config.toml) corrected by what the start record says ran: its world size and policy."""
    if dist is None or not start:
        return dist
    policy = start_policy(start) or dist.get("policy")
    return dist_of(dist["mode"], start.get("world_size", dist["world_size"]), policy)


def of_run(mode: Any, config: Any, world_size: Any, start: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """dist_of for a run read from its records: `mode` from config.toml, else the start record's `config`."""
    said = config.get("dist") if isinstance(config, Mapping) else None
    mode = mode or (said.get("mode") if isinstance(said, Mapping) else None)
    return dist_of(mode, world_size, start_policy(start))


def dist_label(dist: Mapping[str, Any] | None) -> str:
    """"FSDP x2", "DDP x4", "DP"; "" for a one-process run."""
    if not dist or dist.get("mode") not in MODE_NAMES:
        return ""
    name = MODE_NAMES[dist["mode"]]
    return name if dist["mode"] == "dp" else f"{name} x{dist.get('world_size', 1)}"


def precision_label(precision: str, dist: Mapping[str, Any] | None) -> str:
    """A run list's precision cell: "bf16 FSDP x2", "fp32 DDP x2", "fp16+scaler"."""
    return precision_labels(precision, dist)[0]


def precision_labels(precision: str, dist: Mapping[str, Any] | None) -> list[str]:
    """precision_label, then shorter forms for a narrow column, longest first: "bf16+reduce FSDP
    x2", "bf16+reduce FSDP", "bf16+reduce" (the variant name matters most; the details line says the rest).
    An empty precision (not seen yet: a script before its first step) is said as UNSEEN."""
    precision = precision_or_unseen(precision)
    label = dist_label(dist)
    if not label:
        return [precision]
    name = MODE_NAMES.get(str((dist or {}).get("mode")), "")
    return list(dict.fromkeys([f"{precision} {label}", f"{precision} {name}", precision]))
