"""pure (`bf16-pure`): parameters, gradients and optimizer state in a wide 16-bit dtype (bfloat16),
no float32 master copy: what many large-model fine-tunes do to halve their memory. Autocast stays
on in that dtype (it casts the batch's float32 inputs at the model's ops); the trainer casts the
model and, with `amp.stochastic_round`, steps it with an optimizer whose update is rounded
stochastically into the parameters' dtype (amptui/trainer/modes/pure.py). Only `amp.mode = "pure"`
picks it; the script hooks recognise a loop whose model was cast (`model.to(torch.bfloat16)`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from amptui.core.config.dtypes import DTYPES, dtype_by_short, narrow, wide, wide_dtype
from amptui.core.modes.base import PrecisionMode, dtype_short

if TYPE_CHECKING:
    from amptui.core.config.modefacts import Asked, LoopFacts, RunFacts
    from amptui.core.config.precision import Precision
    from amptui.core.config.values import Config

NAME = "pure"
ROUNDED = "sr"  # the variant suffix that rounds the update stochastically ("bf16-pure+sr")


@dataclass(frozen=True)
class Kept:
    """The mode's option: the optimizer's update rounded stochastically (else to nearest)."""

    stochastic_round: bool = False


class Pure(PrecisionMode):
    name = NAME
    order = 30
    keys = ("amp.stochastic_round",)
    chosen_by_name = True
    master_copy = False

    def variants(self) -> list[str]:
        return [n for d in DTYPES.values() if not d.needs_scaler
                for n in (f"{d.short}-{NAME}", f"{d.short}-{NAME}+{ROUNDED}")]

    def tune_variants(self) -> list[str]:
        return [f"{d.short}-{NAME}" for d in DTYPES.values() if not d.needs_scaler]

    def parse(self, variant: str, base: Precision) -> Precision | None:
        head, plus, extra = variant.partition("+")
        short, _, suffix = head.rpartition("-")
        d = dtype_by_short(short)
        if d is None or d.needs_scaler or suffix != NAME or (plus and extra != ROUNDED):
            return None
        return self.own(base.with_shared(autocast=True, dtype=d.name, scaler=False), Kept(bool(plus)))

    def configure(self, cfg: Config, base: Precision) -> Precision:
        """Autocast on in the kept dtype ("auto": the wide one on any device); a GradScaler only when asked."""
        dtype = wide_dtype() if cfg.amp.dtype == "auto" else base.dtype
        scaler = base.scaler if cfg.amp.grad_scaler != "auto" else narrow(dtype)
        return self.own(base.with_shared(autocast=True, dtype=dtype, scaler=scaler),
                        Kept(bool(cfg.amp.stochastic_round)))

    def read(self, record: Mapping[str, Any], base: Precision) -> Precision | None:
        said = record.get(NAME)
        if not isinstance(said, Mapping):
            return None
        return self.own(base, Kept(bool(said.get("stochastic_round"))))

    def read_words(self, head: str, parts: list[str], base: Precision) -> Precision | None:
        dtype, kept, rest = head.partition(" parameters and optimizer state, no float32 master copy")
        if parts or not kept or rest not in ("", ", stochastic rounding") or dtype not in DTYPES:
            return None
        return self.own(base.with_shared(autocast=True, dtype=dtype), Kept(bool(rest)))

    def autocast_dtype(self, p: Precision) -> str | None:
        return p.dtype

    def refusal(self, p: Precision, run: RunFacts, asked: Asked | None = None) -> str | None:
        if run.script:  # a script keeps its own parameters: the hooks only watch it
            return None
        said = f"amp.mode = \"{NAME}\""
        if not wide(p.dtype):
            return (f"{said} with amp.dtype = \"{p.dtype}\": without a float32 master copy the parameters need "
                    f"float32's range; use --set amp.dtype={wide_dtype()}")
        if run.dist in ("fsdp", "dp"):
            return (f"{said} with dist.mode = \"{run.dist}\": amptui keeps 16-bit parameters on one process or "
                    "under DDP; use dist.mode=ddp")
        if p.layers:
            return f"{said} with [amp.layers]: every parameter is {p.dtype}, no layer can differ; drop [amp.layers]"
        return None

    def detect(self, facts: LoopFacts) -> dict[str, Any]:
        """A loop whose models' parameters are a wide 16-bit dtype (the script cast its model)."""
        if facts.param_dtype is None or not wide(facts.param_dtype):
            return {}
        return {"amp.mode": NAME, "amp.autocast": True, "amp.dtype": facts.param_dtype}

    def short(self, p: Precision) -> str:
        return f"{dtype_short(p.dtype)}-{NAME}" + (f"+{ROUNDED}" if p.options.stochastic_round else "")

    def words(self, p: Precision) -> str:
        return (f"{p.dtype} parameters and optimizer state, no float32 master copy"
                + (", stochastic rounding" if p.options.stochastic_round else ""))

    def record(self, p: Precision) -> dict[str, Any]:
        return {NAME: {"stochastic_round": p.options.stochastic_round}}

    def overrides(self, p: Precision) -> dict[str, object]:
        return {"amp.mode": NAME, "amp.stochastic_round": p.options.stochastic_round}


MODE = Pure()
