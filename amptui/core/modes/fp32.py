"""fp32: float32 throughout, the reference every A/B and tune compares against."""

from __future__ import annotations

from typing import TYPE_CHECKING

from amptui.core.modes.base import PrecisionMode, scaler_split

if TYPE_CHECKING:
    from amptui.core.config.precision import Precision
    from amptui.core.config.values import Config


class Full(PrecisionMode):
    name = "fp32"
    order = 0
    per_layer = True

    def variants(self) -> list[str]:
        return ["fp32"]

    def parse(self, variant: str, base: Precision) -> Precision | None:
        split = scaler_split(variant)
        if split is None or split[0] != "fp32":
            return None
        return self.own(base.with_shared(autocast=False, scaler=split[1]))

    def claims(self, cfg: Config, base: Precision) -> bool:
        return True  # what a config is when nothing more specific asks

    def short(self, p: Precision) -> str:
        return "fp32"

    def words(self, p: Precision) -> str:
        return "fp32"


MODE = Full()
