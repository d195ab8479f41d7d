"""float8: torchao's float8 training on top of autocast (amp.float8): the linears chosen by the
trainer (trainer/modes/float8.py) are swapped for float8 ones, with tensorwise or rowwise scales or
MXFP8. Under dist.mode = "fsdp" (tensorwise: refused otherwise) it is on top of the FSDP policy
instead of autocast: the policy's dtypes, float8 in the linears."""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from amptui.core.modes import fsdp
from amptui.core.modes.base import NumericsProbe, PrecisionMode, dtype_short

if TYPE_CHECKING:
    from amptui.core.config.modefacts import Asked, LoopFacts, RunFacts
    from amptui.core.config.precision import Precision
    from amptui.core.config.values import Config

# amp.float8's recipes (torchao), each with its variant name; every one runs on top of bfloat16 autocast
RECIPES: dict[str, str] = {"tensorwise": "fp8", "rowwise": "fp8-rowwise", "mxfp8": "mxfp8"}
AUTOCAST = "bfloat16"  # the autocast dtype amp.float8's recipes run on top of
EXTRA = "pip install 'amptui[fp8]'"  # the install line of the mode's `extra`
SQNR_ALARM_DB = 10.0  # a float8 layer whose GEMM output is under this many dB above its rounding error
TENSORS = ("input", "weight", "grad_output")


@dataclass(frozen=True)
class Recipe:
    """The mode's options: torchao's recipe, and the FSDP policy it runs on (None: autocast)."""

    recipe: str
    policy: fsdp.Policy | None = None
    tf32: bool = False  # without autocast or a policy: float32 on TF32 tensor cores around the float8 linears


def _part(entry: Mapping[str, Any], tensor: str) -> Mapping[str, Any]:
    """An entry's `{format, amax, scale, underflow}` of one tensor; {} when a damaged line holds no mapping there."""
    part = entry.get(tensor)
    return part if isinstance(part, Mapping) else {}


def recipe_of(p: Precision) -> str:
    """A precision's float8 recipe: "off" when it is not float8's."""
    return p.options.recipe if p.mode_name == MODE.name else "off"


class Sqnr(NumericsProbe):
    """Per converted linear (telemetry/probes/float8.py): the SQNR in dB of its float8 GEMM's output
    against the same GEMM in float32, the amax and scale of its input, weight and grad-output, and
    the share of their values that underflow to zero. Healthy float8 layers keep 20-35 dB."""

    key = "float8"
    figure = "sqnr_db"
    title = "float8 SQNR (dB)"
    unit = "dB SQNR vs float32"
    bands = ((0.0, "inf/NaN"), (SQNR_ALARM_DB, f"<{SQNR_ALARM_DB:g}"), (15.0, "<15"), (20.0, "<20"), (math.inf, "20+"))
    alarm_code = "float8_sqnr"

    def cell(self, entry: Mapping[str, Any]) -> float | None:
        """-inf when its input, weight or grad-output held inf/NaN (the entry's amax is null then)."""
        sqnr = super().cell(entry)
        if sqnr is None and any(_part(entry, t).get("amax", 0) is None for t in TENSORS):
            return -math.inf
        return sqnr

    def value_words(self, value: float) -> str:
        return f"{value:.1f} dB"

    def headline(self, latest: Mapping[str, Mapping[str, Any]]) -> str:
        recipes = sorted({str(x.get("recipe")) for x in latest.values()})
        return f"float8 {', '.join(recipes)}: {len(latest)} linears"

    def alarm(self, entry: Mapping[str, Any], step: int) -> str | None:
        """A linear whose GEMM output lost too much (under SQNR_ALARM_DB) or whose input, weight or
        grad-output was inf/NaN."""
        name, recipe, sqnr = entry.get("name", "?"), entry.get("recipe", "?"), entry.get("sqnr_db")
        broken = [t for t in TENSORS if _part(entry, t).get("amax", 0) is None]
        if (sqnr is None and not broken) or (sqnr is not None and sqnr >= SQNR_ALARM_DB):
            return None
        said = (f"{name}'s float8 {recipe} GEMM output is {sqnr:.1f} dB above its rounding error at step "
                f"{step} (healthy float8 layers: 20-35 dB)" if sqnr is not None else
                f"{name}'s float8 {recipe} {' and '.join(broken)} held inf/NaN at step {step}")
        rowwise = ", or scale per row: amp.float8 = \"rowwise\" instead of tensorwise" if recipe == "tensorwise" else ""
        return f"{said}: keep it in high precision with amp.float8_skip = [\"{name}\"]{rowwise}"

    def table(self, latest: Mapping[str, Mapping[str, Any]]) -> tuple[str, tuple[str, ...], list[tuple[str, ...]], str]:
        """Latest sample per linear: SQNR, the lowest over the run, the input's amax and scale, the
        underflow shares."""
        def share(t: Mapping[str, Any]) -> str:
            value = t.get("underflow")
            return f"{100 * value:.1f}" if isinstance(value, (int, float)) else "-"

        def figure(value: Any, spec: str) -> str:
            return format(value, spec) if isinstance(value, (int, float)) else "-"

        header = ("float8 layer", "SQNR dB", "lowest", "in amax", "in scale", "underflow % in/w/go")
        rows: list[tuple[str, ...]] = [(name, figure(x.get("sqnr_db"), ".1f"), figure(x.get("lowest_sqnr_db"), ".1f"),
                 figure(_part(x, "input").get("amax"), ".3g"), figure(_part(x, "input").get("scale"), ".3g"),
                 "/".join(share(_part(x, t)) for t in TENSORS))
                for name, x in latest.items()]
        legend = ("SQNR: the float8 GEMM's output against the same GEMM in float32, in dB (20-35 is usual; "
                  "under 10 the layer's output is mostly rounding error); underflow: non-zero values that round to "
                  "zero in float8, of input / weight / grad-output")
        recipes = sorted({str(x.get("recipe")) for x in latest.values()})
        return f"float8 ({', '.join(recipes)}), latest sample:", header, rows, legend


class Float8(PrecisionMode):
    name = "float8"
    order = 50
    group = "float8"
    offered_with = "with the fp8 extra (torchao)"
    keys = ("amp.float8", "amp.float8_skip")
    per_layer = True
    tune_last = True
    toggle = "amp.float8"
    extra = "fp8"
    probe = Sqnr()
    planned = True
    gemm_capability = (8, 9)  # Ada, Hopper, Blackwell (MXFP8's 10.0: trainer/modes/float8.py NATIVE_CAPABILITY)

    def variants(self) -> list[str]:
        return list(RECIPES.values())

    def tune_variants(self) -> list[str]:
        return [RECIPES["rowwise"]]  # torchtitan's accurate recipe (tune tries it last, compiled)

    def parse(self, variant: str, base: Precision) -> Precision | None:
        recipe = next((r for r, v in RECIPES.items() if v == variant), None)
        if recipe is None:
            return None
        return self.own(base.with_shared(autocast=True, dtype=AUTOCAST, scaler=False), Recipe(recipe))

    def claims(self, cfg: Config, base: Precision) -> bool:
        return cfg.amp.float8 != "off"

    def configure(self, cfg: Config, base: Precision) -> Precision:
        said = fsdp.policy_of(cfg, base)
        return self.own(base, Recipe(cfg.amp.float8, said, tf32=said is None and not base.autocast and cfg.amp.tf32 is True))

    def read(self, record: Mapping[str, Any], base: Precision) -> Precision | None:
        said = record.get("float8")
        if not isinstance(said, Mapping):
            return None
        policy = fsdp.policy_read(record, base)
        return self.own(base, Recipe(str(said.get("recipe", "off")), policy,
                                     tf32=policy is None and bool(record.get("tf32")) and not base.autocast))

    def read_words(self, head: str, parts: list[str], base: Precision) -> Precision | None:
        mine = [p for p in parts if p.startswith("float8 ")]
        if len(mine) != 1:
            return None
        rest = [p for p in parts if p not in mine]
        recipe = mine[0].removeprefix("float8 ")
        if (read := fsdp.policy_read_words(head, rest, base)) is not None:
            return self.own(read[0], Recipe(recipe, read[1]))
        if head.startswith("autocast ") and not rest:
            return self.own(base, Recipe(recipe))
        if head == "fp32" and rest in ([], ["TF32"]):
            return self.own(base, Recipe(recipe, tf32=bool(rest)))
        return None

    def autocast_dtype(self, p: Precision) -> str | None:
        return p.dtype if p.autocast and p.options.policy is None else None

    def fsdp_policy(self, p: Precision) -> dict[str, str] | None:
        return fsdp.policy(p, p.options.policy) if p.options.policy is not None else None

    def tf32(self, p: Precision) -> bool:
        return p.options.tf32 or (p.options.policy is not None and p.options.policy.tf32)

    def missing(self) -> str | None:
        if importlib.util.find_spec("torchao") is None:
            return f"float8 training needs torchao, which is not installed: {EXTRA}"
        return None

    def refusal(self, p: Precision, run: RunFacts, asked: Asked | None = None) -> str | None:
        """torchao (the fp8 extra) and amptui's own trainer on one process, DDP, or FSDP with tensorwise
        scales (its weights all-gathered in float8, torchtitan's recipe)."""
        if run.script:  # a script converts its own model: the hooks only watch it
            return None
        recipe = p.options.recipe
        said, off = (asked.said, asked.off) if asked else (f"amp.float8 = \"{recipe}\"", "--set amp.float8=off")
        tensorwise = f"{RECIPES['tensorwise']} (tensorwise)" if asked else "amp.float8=tensorwise"
        if missing := self.missing():
            return f"{said}: {missing} (or {off})"
        if run.dist == "dp":
            return (f"{said} with dist.mode = \"dp\": amptui converts float8 linears for one process, DDP "
                    f"or FSDP; use dist.mode=ddp, or {off}")
        if run.dist == "fsdp" and recipe != "tensorwise":
            return (f"{said} with dist.mode = \"fsdp\": amptui shards float8 linears with tensorwise scales "
                    f"only (FSDP2's float8 all-gather, torchtitan's recipe); use {tensorwise}, or dist.mode=ddp")
        return None

    def detect(self, facts: LoopFacts) -> dict[str, Any]:
        return {"amp.float8": facts.seen[self.name]} if facts.seen.get(self.name) else {}

    def short(self, p: Precision) -> str:
        recipe, policy = p.options.recipe, p.options.policy
        name = RECIPES.get(recipe, f"float8-{recipe}")
        reduce = fsdp.policy_short(p, policy)
        if p.autocast and p.dtype == AUTOCAST:
            return name + reduce
        return (dtype_short(p.dtype) if p.autocast else "fp32") + "+" + name + reduce

    def words(self, p: Precision) -> str:
        policy = p.options.policy
        base = fsdp.policy_words(p, policy) if policy is not None else f"autocast {p.dtype}" if p.autocast else \
            "fp32 + TF32" if p.options.tf32 else "fp32"
        return base + f" + float8 {p.options.recipe}"

    def scope_word(self, p: Precision) -> str:
        return f"float8 {p.options.recipe}"

    def record(self, p: Precision) -> dict[str, Any]:
        policy = p.options.policy
        return {**(fsdp.policy_record(p, policy) if policy is not None else {}),
                **({"tf32": True} if p.options.tf32 else {}), "float8": {"recipe": p.options.recipe}}

    def conversion_note(self, record: Mapping[str, Any]) -> str | None:
        """What converted, and where torchao emulated it, that its speed says nothing (the values
        are rounded to float8 exactly, the matmuls run in high precision)."""
        said = record.get(self.name)
        if not isinstance(said, Mapping) or "converted" not in said:
            return None
        headline = said.get("headline")  # [amp.layers] may mix recipes: the run's own words for them
        text = str(headline) if isinstance(headline, str) else \
            f"float8 {said.get('recipe')}: {said.get('converted')} of {said.get('linears')} linears"
        if said.get("emulated"):
            text += "; emulated (no float8 GEMM on this device): numerics are real, speed is not"
        return text

    def overrides(self, p: Precision) -> dict[str, object]:
        policy = p.options.policy
        return {**(fsdp.policy_overrides(policy) if policy is not None else {}), "amp.float8": p.options.recipe}


MODE = Float8()
