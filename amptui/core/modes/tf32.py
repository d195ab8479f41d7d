"""tf32: float32 without autocast, CUDA matmuls and convolutions on TF32 tensor cores (amp.tf32)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from amptui.core.config.dtypes import TF32
from amptui.core.modes.base import PrecisionMode

if TYPE_CHECKING:
    from amptui.core.config.precision import Precision
    from amptui.core.config.values import Config


class Tf32(PrecisionMode):
    name = TF32
    order = 10
    keys = ("amp.tf32",)

    def variants(self) -> list[str]:
        return [TF32]

    def parse(self, variant: str, base: Precision) -> Precision | None:
        return self.own(base.with_shared(autocast=False, scaler=False)) if variant == TF32 else None

    def claims(self, cfg: Config, base: Precision) -> bool:
        return not base.autocast and cfg.amp.tf32 is True

    def read(self, record: Mapping[str, Any], base: Precision) -> Precision | None:
        return self.own(base) if record.get("tf32") and not base.autocast else None

    def read_words(self, head: str, parts: list[str], base: Precision) -> Precision | None:
        return self.own(base) if head == "fp32" and parts == ["TF32"] else None

    def tf32(self, p: Precision) -> bool:
        return True

    def short(self, p: Precision) -> str:
        return TF32

    def words(self, p: Precision) -> str:
        return "fp32 + TF32"

    def record(self, p: Precision) -> dict[str, Any]:
        return {"tf32": True}

    def overrides(self, p: Precision) -> dict[str, object]:
        return {"amp.tf32": True}


MODE = Tf32()
