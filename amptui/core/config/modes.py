"""Precision modes: each way amptui can train in reduced precision is one `PrecisionMode`, and
`MODES` lists them. A mode says what the trainer applies (the autocast dtype, the GradScaler,
an FSDP MixedPrecisionPolicy, a module conversion), how the script hooks recognise it in a loop
they watch, the variant names `amptui ab` and `amptui tune` take, and its words for the views.

`Precision` (core/config/precision.py) is the value a run records; every question about it is
answered by the mode that owns it (`mode_of`). No torch here: what a mode does to the model in the
trainer (a conversion, a step hook, its start notes) is its runtime, registered under the mode's
name in amptui/trainer/runtime.py (docs/development.md, "Adding a precision mode").
"""

from __future__ import annotations

import dataclasses
import importlib.util
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from amptui.core.config.dtypes import DTYPES, FLOAT8_AUTOCAST, FLOAT8_RECIPES, FULL, REDUCE, TF32, dtype_by_short
from amptui.core.config.modefacts import Asked, LoopFacts, Note, RunFacts, dtype_notes

if TYPE_CHECKING:  # precision.py imports this module: the value is only named in annotations
    from amptui.core.config.precision import Precision

SCALER = "scaler"  # the variant suffix that adds a GradScaler ("fp16+scaler")


__all__ = ["Asked", "LoopFacts", "Note", "RunFacts"]  # with the modes: what a mode is asked about (modefacts.py)


class PrecisionMode(ABC):
    """One way to train in reduced precision. `owns` picks the mode of a `Precision`; the rest
    answers for a Precision it owns."""

    name: str = ""
    group = ""  # "" offered everywhere; "fsdp": its variants need dist.mode = "fsdp"; "float8": torchao's

    # --- the names `ab` and `tune` take -----------------------------------------------------------

    @abstractmethod
    def variants(self) -> list[str]:
        """Its variant names, in the order they are offered."""

    def tune_variants(self) -> list[str]:
        """The variants `amptui tune` tries after fp32 (the reference), in order; [] none."""
        return []

    @abstractmethod
    def parse(self, variant: str) -> dict[str, Any] | None:
        """A variant's Precision fields (autocast, dtype, scaler, ...), or None: not one of its names."""

    @abstractmethod
    def owns(self, p: Precision) -> bool: ...

    def normalise(self, p: Precision) -> Precision:
        """`p` as a config gives it, with what this mode ignores dropped: by default TF32 under
        autocast (the autocast dtype computes; TF32 is a float32-without-autocast switch)."""
        return dataclasses.replace(p, tf32=False) if p.autocast and p.tf32 else p

    # --- what the trainer applies -----------------------------------------------------------------

    def autocast_dtype(self, p: Precision) -> str | None:
        """The dtype the trainer's autocast context runs in; None: no autocast."""
        return None

    def fsdp_policy(self, p: Precision) -> dict[str, str] | None:
        """An FSDP run's MixedPrecisionPolicy in dtype names; None: not an FSDP policy."""
        return None

    def missing(self) -> str | None:
        """What this mode needs that is not installed, as the line that refuses it; None: nothing."""
        return None

    # (the GradScaler is `p.scaler` in every mode: "+scaler" in a variant, " + GradScaler" in words)

    # --- what it refuses and warns of (preflight, tune and the script hooks ask; none keeps a copy) --

    def refusal(self, p: Precision, run: RunFacts, asked: Asked | None = None) -> str | None:
        """Why a run set up as `run` cannot train in `p`, as the one line that refuses its launch;
        None: it can. `asked`: an [amp.layers] rule asks for `p` (None: the run's own keys do)."""
        return None

    def warnings(self, p: Precision, run: RunFacts) -> list[Note]:
        """Legal but surprising in `p` on `run`: the run goes on, with a warning for each. By default
        the GradScaler and dtype rules every mode that computes in `p.dtype` shares."""
        return dtype_notes(p.autocast, p.dtype, p.scaler, run)

    # --- how the script hooks recognise it ----------------------------------------------------------

    def detect(self, facts: LoopFacts) -> dict[str, Any]:
        """The preset keys (dotted) that say this mode ran in a watched loop; {} when it did not."""
        return {}

    # --- its words for the views ------------------------------------------------------------------

    @abstractmethod
    def short(self, p: Precision) -> str:
        """The variant name (without "+scaler")."""

    @abstractmethod
    def words(self, p: Precision) -> str:
        """In words (without " + GradScaler")."""

    def scope_word(self, p: Precision) -> str:
        """Its name as one layer of a mixed run says it ("bf16 + 2 float8 rowwise layers")."""
        return self.short(p)

    def record(self, p: Precision) -> dict[str, Any]:
        """What it adds to the `start` record's `precision`."""
        return {}

    def overrides(self, p: Precision) -> dict[str, object]:
        """The preset keys (dotted) that give `p`, beyond amp.autocast/amp.dtype/amp.grad_scaler."""
        return {}


def _scaler_split(variant: str) -> tuple[str, bool] | None:
    """"fp16+scaler" -> ("fp16", True); None for any other "+" suffix."""
    base, plus, extra = variant.partition("+")
    if plus and extra != SCALER:
        return None
    return base, bool(plus)


class Full(PrecisionMode):
    """float32 throughout: the reference every A/B and tune compares against."""

    name = "fp32"

    def variants(self) -> list[str]:
        return ["fp32"]

    def parse(self, variant: str) -> dict[str, Any] | None:
        split = _scaler_split(variant)
        if split is None or split[0] != "fp32":
            return None
        return {"autocast": False, "dtype": next(iter(DTYPES)), "scaler": split[1]}

    def owns(self, p: Precision) -> bool:
        return not p.autocast and not p.tf32

    def short(self, p: Precision) -> str:
        return "fp32"

    def words(self, p: Precision) -> str:
        return "fp32"


class Tf32(PrecisionMode):
    """float32 without autocast, CUDA matmuls and convolutions on TF32 tensor cores (amp.tf32)."""

    name = TF32

    def variants(self) -> list[str]:
        return [TF32]

    def parse(self, variant: str) -> dict[str, Any] | None:
        return {"autocast": False, "dtype": next(iter(DTYPES)), "scaler": False, "tf32": True} if variant == TF32 else None

    def owns(self, p: Precision) -> bool:
        return not p.autocast and p.tf32

    def short(self, p: Precision) -> str:
        return TF32

    def words(self, p: Precision) -> str:
        return "fp32 + TF32"

    def overrides(self, p: Precision) -> dict[str, object]:
        return {"amp.tf32": True}


class Autocast(PrecisionMode):
    """torch.autocast to one of `DTYPES` (fp16 and bf16), with or without a GradScaler."""

    name = "autocast"

    def variants(self) -> list[str]:
        return [n for d in DTYPES.values() for n in (d.short, f"{d.short}+{SCALER}")]

    def tune_variants(self) -> list[str]:
        """Each dtype as it is meant to run (a GradScaler where its range needs one), wide ones first."""
        return [d.short + (f"+{SCALER}" if d.needs_scaler else "") for d in sorted(DTYPES.values(),
                                                                                key=lambda d: d.needs_scaler)]

    def parse(self, variant: str) -> dict[str, Any] | None:
        split = _scaler_split(variant)
        d = dtype_by_short(split[0]) if split else None
        if split is None or d is None:
            return None
        return {"autocast": True, "dtype": d.name, "scaler": split[1]}

    def owns(self, p: Precision) -> bool:
        return p.autocast

    def autocast_dtype(self, p: Precision) -> str | None:
        return p.dtype

    def detect(self, facts: LoopFacts) -> dict[str, Any]:
        if facts.autocast is not None and facts.autocast[1] in DTYPES:
            return {"amp.autocast": True, "amp.dtype": facts.autocast[1]}
        return {"amp.autocast": False}

    def short(self, p: Precision) -> str:
        return DTYPES[p.dtype].short if p.dtype in DTYPES else p.dtype  # a dtype not in the table: its name

    def words(self, p: Precision) -> str:
        return f"autocast {p.dtype}"


class FsdpPolicy(PrecisionMode):
    """dist.mode = "fsdp": FSDP2's MixedPrecisionPolicy computes in `dtype` (the param_dtype; float32
    without autocast) and reduces gradients in `reduce`; no autocast context on top of it."""

    name = "fsdp"
    group = "fsdp"

    def variants(self) -> list[str]:
        return [n for d in DTYPES.values() for n in (f"{d.short}+{REDUCE}", f"{d.short}+{REDUCE}+{SCALER}")]

    def parse(self, variant: str) -> dict[str, Any] | None:
        base, _, rest = variant.partition(f"+{REDUCE}")
        d = dtype_by_short(base)
        if d is None or rest not in ("", f"+{SCALER}") or f"+{REDUCE}" not in variant:
            return None
        return {"autocast": True, "dtype": d.name, "scaler": bool(rest), "reduce": d.name}

    def owns(self, p: Precision) -> bool:
        return p.reduce is not None

    def fsdp_policy(self, p: Precision) -> dict[str, str] | None:
        assert p.reduce is not None
        return {"param_dtype": p.reduced, "reduce_dtype": p.reduce, "sharded_dtype": FULL}

    def detect(self, facts: LoopFacts) -> dict[str, Any]:
        policy = facts.fsdp_policy
        if policy is None:
            return {}
        out: dict[str, Any] = {"dist.mode": "fsdp"}
        if policy["reduce_dtype"] in (FULL, *DTYPES):
            out["amp.reduce_dtype"] = policy["reduce_dtype"]
        if policy["param_dtype"] in DTYPES:  # a reduced param_dtype: the policy computes in it, no autocast
            out.update({"amp.autocast": True, "amp.dtype": policy["param_dtype"]})
        return out

    def short(self, p: Precision) -> str:
        name = (DTYPES[p.dtype].short if p.dtype in DTYPES else p.dtype) if p.autocast else TF32 if p.tf32 else "fp32"
        return name + (f"+{REDUCE}" if p.reduce != FULL else "")

    def words(self, p: Precision) -> str:
        return f"FSDP {p.reduced} params, {p.reduce} reduce" + (" + TF32" if p.tf32 and not p.autocast else "")

    def record(self, p: Precision) -> dict[str, Any]:
        return {"fsdp": self.fsdp_policy(p)}

    def overrides(self, p: Precision) -> dict[str, object]:
        return {"amp.reduce_dtype": p.reduce}  # the "+reduce" variants: gradients reduced in the compute dtype


class Float8(PrecisionMode):
    """torchao's float8 training on top of autocast (amp.float8): the linears chosen by the trainer
    (trainer/float8.py) are swapped for float8 ones, with tensorwise or rowwise scales or MXFP8.
    Under dist.mode = "fsdp" (tensorwise: preflight refuses the others) it is on top of the FSDP
    policy instead of autocast, as FsdpPolicy is: the policy's dtypes, float8 in the linears."""

    name = "float8"
    group = "float8"
    EXTRA = "pip install 'amptui[fp8]'"

    def variants(self) -> list[str]:
        return list(FLOAT8_RECIPES.values())

    def tune_variants(self) -> list[str]:
        return [FLOAT8_RECIPES["rowwise"]]  # torchtitan's accurate recipe (tune tries it last, compiled)

    def parse(self, variant: str) -> dict[str, Any] | None:
        recipe = next((r for r, v in FLOAT8_RECIPES.items() if v == variant), None)
        if recipe is None:
            return None
        return {"autocast": True, "dtype": FLOAT8_AUTOCAST, "scaler": False, "float8": recipe}

    def owns(self, p: Precision) -> bool:
        return p.float8 != "off"

    def autocast_dtype(self, p: Precision) -> str | None:
        return p.dtype if p.autocast and p.reduce is None else None

    def fsdp_policy(self, p: Precision) -> dict[str, str] | None:
        return FsdpPolicy().fsdp_policy(p) if p.reduce is not None else None

    def missing(self) -> str | None:
        if importlib.util.find_spec("torchao") is None:
            return f"float8 training needs torchao, which is not installed: {self.EXTRA}"
        return None

    def refusal(self, p: Precision, run: RunFacts, asked: Asked | None = None) -> str | None:
        """torchao (the fp8 extra) and amptui's own trainer on one process, DDP, or FSDP with tensorwise
        scales (its weights all-gathered in float8, torchtitan's recipe)."""
        if run.script:  # a script converts its own model: the hooks only watch it
            return None
        said, off = (asked.said, asked.off) if asked else (f"amp.float8 = \"{p.float8}\"", "--set amp.float8=off")
        tensorwise = f"{FLOAT8_RECIPES['tensorwise']} (tensorwise)" if asked else "amp.float8=tensorwise"
        if missing := self.missing():
            return f"{said}: {missing} (or {off})"
        if run.dist == "dp":
            return (f"{said} with dist.mode = \"dp\": amptui converts float8 linears for one process, DDP "
                    f"or FSDP; use dist.mode=ddp, or {off}")
        if run.dist == "fsdp" and p.float8 != "tensorwise":
            return (f"{said} with dist.mode = \"fsdp\": amptui shards float8 linears with tensorwise scales "
                    f"only (FSDP2's float8 all-gather, torchtitan's recipe); use {tensorwise}, or dist.mode=ddp")
        return None

    def detect(self, facts: LoopFacts) -> dict[str, Any]:
        return {"amp.float8": facts.float8} if facts.float8 else {}

    def short(self, p: Precision) -> str:
        name = FLOAT8_RECIPES.get(p.float8, f"float8-{p.float8}")
        reduce = f"+{REDUCE}" if p.reduce not in (None, FULL) else ""
        if p.autocast and p.dtype == FLOAT8_AUTOCAST:
            return name + reduce
        return ((DTYPES[p.dtype].short if p.dtype in DTYPES else p.dtype) if p.autocast else "fp32") + "+" + name + reduce

    def words(self, p: Precision) -> str:
        base = FsdpPolicy().words(p) if p.reduce is not None else f"autocast {p.dtype}" if p.autocast else \
            "fp32 + TF32" if p.tf32 else "fp32"
        return base + f" + float8 {p.float8}"

    def scope_word(self, p: Precision) -> str:
        return f"float8 {p.float8}"

    def record(self, p: Precision) -> dict[str, Any]:
        return {**(FsdpPolicy().record(p) if p.reduce is not None else {}), "float8": {"recipe": p.float8}}

    def overrides(self, p: Precision) -> dict[str, object]:
        return {**(FsdpPolicy().overrides(p) if p.reduce is not None else {}), "amp.float8": p.float8}


# Every precision mode, in the order their variants are offered and a variant name is looked up.
MODES: list[PrecisionMode] = [Full(), Tf32(), Autocast(), FsdpPolicy(), Float8()]


def mode_of(p: Precision) -> PrecisionMode:
    """The mode that owns `p`: the most specific first (float8 and FSDP over autocast)."""
    return next(m for m in reversed(MODES) if m.owns(p))


def parse_variant(name: str) -> dict[str, Any] | None:
    """A variant name's Precision fields, from the first mode that knows it; None: no mode does."""
    return next((fields for m in MODES if (fields := m.parse(name)) is not None), None)


def tune_variants() -> list[str]:
    """What `amptui tune` tries after fp32, every mode's in MODES order (float8's: tried last)."""
    return [n for m in MODES for n in m.tune_variants()]


def detect(facts: LoopFacts) -> dict[str, Any]:
    """Every mode's reading of a watched loop, merged in MODES order (a later, more specific mode wins)."""
    out: dict[str, Any] = {}
    for m in MODES:
        out.update(m.detect(facts))
    return out
