"""autocast: torch.autocast to one of `DTYPES` (fp16 and bf16), with or without a GradScaler."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from amptui.core.config.dtypes import DTYPES, dtype_by_short
from amptui.core.modes.base import SCALER, PrecisionMode, dtype_short, scaler_split

if TYPE_CHECKING:
    from amptui.core.config.modefacts import LoopFacts
    from amptui.core.config.precision import Precision
    from amptui.core.config.values import Config


class Autocast(PrecisionMode):
    name = "autocast"
    order = 20
    per_layer = True

    def variants(self) -> list[str]:
        return [n for d in DTYPES.values() for n in (d.short, f"{d.short}+{SCALER}")]

    def tune_variants(self) -> list[str]:
        """Each dtype as it is meant to run (a GradScaler where its range needs one), wide ones first."""
        return [d.short + (f"+{SCALER}" if d.needs_scaler else "") for d in sorted(DTYPES.values(),
                                                                                key=lambda d: d.needs_scaler)]

    def parse(self, variant: str, base: Precision) -> Precision | None:
        split = scaler_split(variant)
        d = dtype_by_short(split[0]) if split else None
        if split is None or d is None:
            return None
        return self.own(base.with_shared(autocast=True, dtype=d.name, scaler=split[1]))

    def claims(self, cfg: Config, base: Precision) -> bool:
        return base.autocast

    def autocast_dtype(self, p: Precision) -> str | None:
        return p.dtype

    def detect(self, facts: LoopFacts) -> dict[str, Any]:
        if facts.autocast is not None and facts.autocast[1] in DTYPES:
            return {"amp.autocast": True, "amp.dtype": facts.autocast[1]}
        return {"amp.autocast": False}

    def short(self, p: Precision) -> str:
        return dtype_short(p.dtype)

    def words(self, p: Precision) -> str:
        return f"autocast {p.dtype}"


MODE = Autocast()
