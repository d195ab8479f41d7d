"""fsdp: dist.mode = "fsdp": FSDP2's MixedPrecisionPolicy computes in the param_dtype (`dtype`;
float32 without autocast) and reduces gradients in `reduce`; no autocast context on top of it.
Its helpers (`policy`, `policy_words`, ...) serve the modes that run on top of such a policy too."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from amptui.core.config.dtypes import DTYPES, FULL, REDUCE, TF32, dtype_by_short
from amptui.core.modes.base import SCALER, PrecisionMode, dtype_short

if TYPE_CHECKING:
    from amptui.core.config.modefacts import LoopFacts
    from amptui.core.config.precision import Precision
    from amptui.core.config.values import Config


@dataclass(frozen=True)
class Policy:
    """An FSDP policy's own settings: the dtype gradients are reduced in; TF32 for a float32 policy."""

    reduce: str = FULL
    tf32: bool = False


def policy_of(cfg: Config, base: Precision) -> Policy | None:
    """The config's FSDP policy settings; None: not dist.mode = "fsdp"."""
    if cfg.dist.mode != "fsdp":
        return None
    return Policy(cfg.amp.reduce_dtype, tf32=not base.autocast and cfg.amp.tf32 is True)


def policy(p: Precision, said: Policy) -> dict[str, str]:
    return {"param_dtype": p.reduced, "reduce_dtype": said.reduce, "sharded_dtype": FULL}


def policy_short(p: Precision, said: Policy | None) -> str:
    """"+reduce" when the policy reduces in its compute dtype; "" else."""
    return f"+{REDUCE}" if said is not None and said.reduce != FULL else ""


def policy_words(p: Precision, said: Policy) -> str:
    return f"FSDP {p.reduced} params, {said.reduce} reduce" + (" + TF32" if said.tf32 and not p.autocast else "")


def policy_read(record: Mapping[str, Any], base: Precision) -> Policy | None:
    fsdp = record.get("fsdp")
    if not isinstance(fsdp, Mapping) or "reduce_dtype" not in fsdp:
        return None
    return Policy(str(fsdp["reduce_dtype"]), tf32=bool(record.get("tf32")) and not base.autocast)


def policy_read_words(head: str, parts: list[str], base: Precision) -> tuple[Precision, Policy] | None:
    """"FSDP P params, R reduce" [+ TF32] -> (the shared fields, the policy); None: not a policy's words."""
    if not (head.startswith("FSDP ") and head.endswith(" reduce") and " params, " in head) or \
            parts not in ([], ["TF32"]):
        return None
    param, _, reduce = head.removeprefix("FSDP ").removesuffix(" reduce").partition(" params, ")
    low = param != FULL
    shared = base.with_shared(autocast=low, dtype=param if low else base.dtype)
    return shared, Policy(reduce, tf32=bool(parts) and not low)


def policy_record(p: Precision, said: Policy) -> dict[str, Any]:
    return {"fsdp": policy(p, said), **({"tf32": True} if said.tf32 else {})}


def policy_overrides(said: Policy) -> dict[str, object]:
    return {"amp.reduce_dtype": said.reduce, **({"amp.tf32": True} if said.tf32 else {})}


class FsdpPolicy(PrecisionMode):
    name = "fsdp"
    order = 40
    group = "fsdp"
    offered_with = "with dist.mode=fsdp"
    keys = ("amp.reduce_dtype",)

    def variants(self) -> list[str]:
        return [n for d in DTYPES.values() for n in (f"{d.short}+{REDUCE}", f"{d.short}+{REDUCE}+{SCALER}")]

    def parse(self, variant: str, base: Precision) -> Precision | None:
        head, _, rest = variant.partition(f"+{REDUCE}")
        d = dtype_by_short(head)
        if d is None or rest not in ("", f"+{SCALER}") or f"+{REDUCE}" not in variant:
            return None
        return self.own(base.with_shared(autocast=True, dtype=d.name, scaler=bool(rest)), Policy(d.name))

    def claims(self, cfg: Config, base: Precision) -> bool:
        return cfg.dist.mode == "fsdp"

    def configure(self, cfg: Config, base: Precision) -> Precision:
        return self.own(base, policy_of(cfg, base))

    def read(self, record: Mapping[str, Any], base: Precision) -> Precision | None:
        said = policy_read(record, base)
        return self.own(base, said) if said else None

    def read_words(self, head: str, parts: list[str], base: Precision) -> Precision | None:
        read = policy_read_words(head, parts, base)
        return self.own(*read) if read else None

    def fsdp_policy(self, p: Precision) -> dict[str, str] | None:
        return policy(p, p.options)

    def tf32(self, p: Precision) -> bool:
        return p.options.tf32

    def detect(self, facts: LoopFacts) -> dict[str, Any]:
        found = facts.fsdp_policy
        if found is None:
            return {}
        out: dict[str, Any] = {"dist.mode": "fsdp"}
        if found["reduce_dtype"] in (FULL, *DTYPES):
            out["amp.reduce_dtype"] = found["reduce_dtype"]
        if found["param_dtype"] in DTYPES:  # a reduced param_dtype: the policy computes in it, no autocast
            out.update({"amp.autocast": True, "amp.dtype": found["param_dtype"]})
        return out

    def short(self, p: Precision) -> str:
        name = dtype_short(p.dtype) if p.autocast else TF32 if p.options.tf32 else "fp32"
        return name + policy_short(p, p.options)

    def words(self, p: Precision) -> str:
        return policy_words(p, p.options)

    def record(self, p: Precision) -> dict[str, Any]:
        return policy_record(p, p.options)

    def overrides(self, p: Precision) -> dict[str, object]:
        return policy_overrides(p.options)  # the "+reduce" variants: gradients reduced in the compute dtype


MODE = FsdpPolicy()
