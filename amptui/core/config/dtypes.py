"""The reduced-precision dtypes amptui can autocast to, as a table (`DTYPES`): a new autocast
dtype is one `Dtype` entry. No torch here: the trainer maps `Dtype.name` to a torch dtype with
`getattr(torch, name)`. (How a run uses them, a precision mode, is amptui/core/modes/.)"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dtype:
    name: str          # torch's name: torch.<name>
    short: str         # in variant names: "fp16", "bf16"
    needs_scaler: bool  # grad_scaler = "auto" turns the GradScaler on for it (a narrow exponent range)
    auto_on: tuple[str, ...] = ()  # device types where amp.dtype = "auto" picks it
    cpu_flags: tuple[str, ...] = ()  # x86 /proc/cpuinfo flags, any of which computes it natively (else emulated)
    cpu_isa: str = ""              # those instructions in words, for the "emulated on this CPU" notice
    cpu_notice: bool = True        # a launch warns when this CPU emulates it (float16: the autocast mode's
                                   # own CPU advice says so instead, see core/modes/autocast.py)
    max_finite: float = 0.0        # the largest finite value (range headroom is measured to it)
    smallest_normal: float = 0.0   # below it values lose precision, then underflow to zero


# The reduced-precision dtypes amptui can autocast to. Order: how they are offered.
DTYPES: dict[str, Dtype] = {d.name: d for d in (
    Dtype("float16", "fp16", needs_scaler=True, auto_on=("cuda",), cpu_flags=("avx512_fp16", "amx_fp16"),
          cpu_isa="AVX512-FP16 or AMX-FP16", cpu_notice=False, max_finite=65504.0, smallest_normal=2.0 ** -14),
    Dtype("bfloat16", "bf16", needs_scaler=False, auto_on=("cpu",),
          cpu_flags=("amx_bf16", "avx512_bf16"), cpu_isa="AVX512-BF16 or AMX",
          max_finite=3.3895313892515355e38, smallest_normal=2.0 ** -126),
)}
FULL = "float32"                      # what runs without autocast
FULL_DTYPE = Dtype(FULL, "fp32", needs_scaler=False, max_finite=3.4028234663852886e38, smallest_normal=2.0 ** -126)
REDUCE = "reduce"  # variant suffix: an FSDP policy that reduces gradients in its compute dtype ("bf16+reduce")
TF32 = "tf32"  # the variant: float32 without autocast, CUDA matmuls and convolutions on TF32 tensor cores


def dtype_range(name: str) -> Dtype:
    """The entry that knows `name`'s range: a DTYPES dtype, else float32's (what runs without autocast)."""
    return DTYPES.get(name, FULL_DTYPE)


def auto_dtype(device_type: str) -> str:
    """amp.dtype = "auto": the dtype whose `auto_on` names this device type (bfloat16 for others)."""
    for d in DTYPES.values():
        if device_type in d.auto_on:
            return d.name
    return "bfloat16"


def dtype_by_short(short: str) -> Dtype | None:
    return next((d for d in DTYPES.values() if d.short == short), None)


# --- the questions the rest of amptui asks about a dtype name (never `== "bfloat16"` elsewhere:
# tests/functional/test_dtype_literals.py holds every other module to that) --------------------------------

def narrow(name: str) -> bool:
    """A reduced dtype whose range needs loss scaling (float16): small gradients underflow without a GradScaler."""
    known = DTYPES.get(name)
    return known is not None and known.needs_scaler


def wide(name: str) -> bool:
    """A reduced dtype with float32's range (bfloat16): a GradScaler buys it nothing."""
    known = DTYPES.get(name)
    return known is not None and not known.needs_scaler


def wide_dtype() -> str:
    """The reduced dtype advice names as the range fix ("use bfloat16"): the first wide one."""
    return next(d.name for d in DTYPES.values() if not d.needs_scaler)


def narrow_dtype() -> str:
    """The reduced dtype a GradScaler is for (float16): the first narrow one."""
    return next(d.name for d in DTYPES.values() if d.needs_scaler)
