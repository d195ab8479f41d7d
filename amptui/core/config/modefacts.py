"""The plain values a precision mode (core/modes/) is asked about: what the script hooks
saw a loop do (`LoopFacts`), what a run is beyond its Precision (`RunFacts`: its device, how it is
distributed, the dtypes measured slow here), where a config asks for a precision (`Asked`), and
what a mode answers about a run (`Note`: a warning, with a code each audience words its own way).
No torch, no Config: the callers (preflight, tune, the script hooks) gather these."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from amptui.core.config.dtypes import narrow, wide, wide_dtype


@dataclass(frozen=True)
class LoopFacts:
    """What the script hooks saw a loop do, as plain values (telemetry gathers them with torch)."""

    autocast: tuple[str, str] | None = None      # the first enabled autocast with gradients on: (device, dtype)
    fsdp_policy: dict[str, str] | None = None    # an FSDP2-sharded model's policy (telemetry/fsdp_policy.py)
    param_dtype: str | None = None               # the dtype of its models' floating-point parameters
    # what a mode's own look at the models found, by mode name (e.g. the recipe of torchao's converted linears)
    seen: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RunFacts:
    """A run's setting beyond its precision, for a mode's warnings and refusals."""

    device: str = "auto"                     # run.device as the config says it ("cpu", "cuda", "auto")
    dist: str = "none"                       # dist.mode
    script: bool = False                     # a script's own loop: the hooks watch it, amptui converts nothing
    slow: Mapping[str, str] | None = None    # {dtype: why} measured slow on this CPU; None: not measured


@dataclass(frozen=True)
class Asked:
    """An [amp.layers] rule that asks for a precision, in its own words: `said`
    ('amp.layers."blocks.*" = "fp8-rowwise"') and how to drop it (`off`). A rule names variants
    ("fp8"), so a refusal offers a variant there; the run's own keys are said by the mode."""

    said: str
    off: str = "drop that rule"


@dataclass(frozen=True)
class Note:
    """A legal but surprising setup, said by the mode that owns it. `code` names the rule, so the
    script hooks and tune can word it for their audience and the launch prints `text`."""

    code: str
    text: str


# the rule codes (the script hooks' and tune's own words hang on them)
SCALER_UNNEEDED = "scaler_unneeded"    # a GradScaler on a dtype with float32's range
SCALER_NO_AUTOCAST = "scaler_no_autocast"
UNDERFLOW = "underflow"                # a narrow dtype without a GradScaler
SLOW_ON_CPU = "slow_on_cpu"            # a narrow dtype on the CPU


def cpu_narrow_advice(dtype: str, slow: Mapping[str, str] | None) -> str:
    """Which format is fast on this CPU for a run asking `dtype`, as measured (`slow`: see RunFacts)."""
    wide = wide_dtype()
    if slow is None:
        return f"most CPUs compute {dtype} slowly; {wide} is usually a CPU's fast format (`amptui doctor` measures it)"
    said = f"{dtype} is slow on this CPU ({slow[dtype]})" if dtype in slow else f"most CPUs compute {dtype} slowly"
    if wide in slow:
        return f"{said}, and so is {wide} ({slow[wide]}): float32 (amp.autocast=false) is its fast format"
    return f"{said}; {wide} is this CPU's fast format"


def dtype_notes(autocast: bool, dtype: str, scaler: bool, run: RunFacts) -> list[Note]:
    """The GradScaler and dtype rules of a run computing in `dtype` (PrecisionMode.warnings' default)."""
    notes = []
    if scaler and not autocast:
        notes.append(Note(SCALER_NO_AUTOCAST, "GradScaler without autocast: gradients are float32 and cannot "
                                              "overflow, so the scaler only adds work"))
    elif scaler and wide(dtype):
        notes.append(Note(SCALER_UNNEEDED, f"GradScaler with {dtype}: {dtype} has float32's range, so loss "
                                           "scaling is not needed"))
    if autocast and narrow(dtype) and not scaler:
        notes.append(Note(UNDERFLOW, f"{dtype} autocast without a GradScaler: small gradients may underflow to zero"))
    if autocast and narrow(dtype) and run.device == "cpu":
        notes.append(Note(SLOW_ON_CPU, f"{dtype} autocast on the CPU: " + cpu_narrow_advice(dtype, run.slow)))
    return notes
