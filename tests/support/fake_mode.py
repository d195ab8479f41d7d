"""A made-up precision mode (norms kept in float32) and its runtime: the one file a new mode takes and its
runtime's, as docs/development.md describes."""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from amptui.core import modes
from amptui.trainer import modes as runtime

# --- the one file a new mode takes: its mode ... -------------------------------------------------

@dataclass(frozen=True)
class Kept:
    """The mode's own options value: the dtype its norms are kept in."""

    dtype: str = "float32"


class NormsFp32(modes.PrecisionMode):
    """float16 autocast with a GradScaler, the norms kept in float32: a mode of its own name
    (amp.mode = "fp16-norms") with its own options, no field of another mode's borrowed."""

    name = "fp16-norms"
    chosen_by_name = True

    def variants(self):
        return ["fp16-norms"]

    def tune_variants(self):
        return ["fp16-norms"]

    def parse(self, variant, base):
        return self.own(base.with_shared(autocast=True, dtype="float16", scaler=True), Kept()) \
            if variant == "fp16-norms" else None

    def configure(self, cfg, base):
        return self.own(base, Kept())

    def read(self, record, base):
        return self.own(base, Kept(record["norms"]["dtype"])) if "norms" in record else None

    def autocast_dtype(self, p):
        return p.dtype

    def short(self, p):
        return "fp16-norms"

    def words(self, p):
        return f"autocast float16, norms in {p.options.dtype}"

    def record(self, p):
        return {"norms": {"dtype": p.options.dtype}}

    def refusal(self, p, run, asked=None):
        if run.dist == "dp":
            return "fp16-norms keeps each replica's norms in float32 itself: not under DataParallel (use dist.mode=ddp)"
        return None

    def warnings(self, p, run):
        said = [modes.Note("norms_cpu", "fp16-norms on the CPU: the float32 norms cast every step")] \
            if run.device == "cpu" else []
        return [*super().warnings(p, run), *said]  # and the dtype rules every float16 mode shares


# --- ... and its runtime ---------------------------------------------------------------------------

@dataclass(frozen=True)
class NormsKept(runtime.Conversion):
    norms: list[str]

    def record(self):
        return {"kept": list(self.norms)}

    def note(self, device):
        return f"{len(self.norms)} norms kept in float32"


class NormsRuntime(runtime.ModeRuntime):
    record_key = "norms"
    steps = 0

    def convert(self, model, precision, cfg, device, scope):
        norms = [name for name, m in model.named_modules() if isinstance(m, nn.LayerNorm)]
        for name in norms:
            model.get_submodule(name).float()
        return NormsKept(norms)

    def after_optimizer_step(self, model, done):
        NormsRuntime.steps += 1
