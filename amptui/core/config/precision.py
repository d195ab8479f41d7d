"""Precision as a value: autocast on/off, the autocast dtype, GradScaler on/off.

Everything that names a precision (A/B variants, presets' "auto" resolution, the `start`
record, runs/compare, alarms, doctor, the dashboard) goes through `Precision`; a new
reduced-precision dtype is one `Dtype` entry in `DTYPES`. No torch here: core stays importable
without it (the trainer maps `Dtype.name` to a torch dtype with `getattr(torch, name)`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:  # config imports this module (its schema names the dtypes)
    from amptui.core.config.values import Config


@dataclass(frozen=True)
class Dtype:
    name: str          # torch's name: torch.<name>
    short: str         # in variant names: "fp16", "bf16"
    needs_scaler: bool  # grad_scaler = "auto" turns the GradScaler on for it (a narrow exponent range)
    auto_on: tuple[str, ...] = ()  # device types where amp.dtype = "auto" picks it
    cpu_flags: tuple[str, ...] = ()  # x86 /proc/cpuinfo flags, any of which computes it natively (else emulated)
    cpu_isa: str = ""              # those instructions in words, for the "emulated on this CPU" notice
    max_finite: float = 0.0        # the largest finite value (range headroom is measured to it)
    smallest_normal: float = 0.0   # below it values lose precision, then underflow to zero


# The reduced-precision dtypes amptui can autocast to. Order: how they are offered.
DTYPES: dict[str, Dtype] = {d.name: d for d in (
    Dtype("float16", "fp16", needs_scaler=True, auto_on=("cuda",), max_finite=65504.0, smallest_normal=2.0 ** -14),
    Dtype("bfloat16", "bf16", needs_scaler=False, auto_on=("cpu",),
          cpu_flags=("amx_bf16", "avx512_bf16"), cpu_isa="AVX512-BF16 or AMX",
          max_finite=3.3895313892515355e38, smallest_normal=2.0 ** -126),
)}
FULL = "float32"                      # what runs without autocast
FULL_DTYPE = Dtype(FULL, "fp32", needs_scaler=False, max_finite=3.4028234663852886e38, smallest_normal=2.0 ** -126)
PRECISION_KEYS = ("amp.autocast", "amp.dtype", "amp.grad_scaler", "amp.tf32", "amp.reduce_dtype")  # the keys a Precision decides
REDUCE = "reduce"  # variant suffix: an FSDP policy that reduces gradients in its compute dtype ("bf16+reduce")
TF32 = "tf32"  # the variant: float32 without autocast, CUDA matmuls and convolutions on TF32 tensor cores
# A run whose precision nobody has seen: a script before its loop's first step (or run with its hooks
# off): never a config default. Runs lists, JSON and the dashboard say it through `precision_or_unseen`.
UNSEEN = "not seen"


def precision_or_unseen(said: str | None) -> str:
    """A run's precision as shown (a variant name, or words): UNSEEN when nothing says it yet."""
    return said or UNSEEN


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


@dataclass(frozen=True)
class Precision:
    autocast: bool
    dtype: str          # the autocast dtype (kept when autocast is off: the preset still names one)
    scaler: bool
    tf32: bool = False  # without autocast, amp.tf32 = true: float32 on TF32 tensor cores (CUDA)
    # dist.mode = "fsdp": the dtype gradients are reduced in, and `autocast`/`dtype` name the
    # MixedPrecisionPolicy's param_dtype (no autocast context); None: not an FSDP policy
    reduce: str | None = None

    def _key(self) -> tuple:
        """What tells two precisions apart: without autocast the dtype a preset still names is unused."""
        return self.autocast, self.dtype if self.autocast else FULL, self.scaler, self.tf32, self.reduce

    def __eq__(self, other: object) -> bool:  # a float32 run is the same whatever autocast dtype its preset names
        return isinstance(other, Precision) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    # --- built from ... ----------------------------------------------------------------------

    @classmethod
    def from_config(cls, cfg: Config, device_type: str | None = None) -> "Precision":
        """From a resolved config; every "auto" decided for `device_type` (default: run.device,
        "auto" counted as cpu)."""
        if device_type is None:
            device_type = "cuda" if cfg.run.device == "cuda" else "cpu"
        amp = cfg.amp
        dtype = amp.dtype
        if dtype == "auto":
            dtype = auto_dtype(device_type)
        scaler = amp.grad_scaler
        if scaler == "auto":
            scaler = bool(amp.autocast) and DTYPES[dtype].needs_scaler
        reduce = getattr(amp, "reduce_dtype", FULL) if cfg.dist.mode == "fsdp" else None
        return cls(bool(amp.autocast), dtype, bool(scaler), tf32=amp.tf32 is True and not amp.autocast, reduce=reduce)

    @classmethod
    def from_variant(cls, name: str) -> "Precision":
        """"fp32", "fp16", "fp16+scaler", "bf16", "bf16+scaler" (any DTYPES short name), and for
        FSDP policies "bf16+reduce" / "fp16+reduce+scaler" (reduce in the compute dtype); ValueError else."""
        if name == TF32:
            return cls(False, next(iter(DTYPES)), False, tf32=True)
        base, *extras = name.split("+")
        reduce = REDUCE in extras
        if extras not in ([], ["scaler"], [REDUCE], [REDUCE, "scaler"]) or (reduce and base == "fp32"):
            raise ValueError(name)
        scaler = "scaler" in extras
        if base == "fp32":
            return cls(False, next(iter(DTYPES)), scaler)
        d = dtype_by_short(base)
        if d is None:
            raise ValueError(name)
        return cls(True, d.name, scaler, reduce=d.name if reduce else None)

    @classmethod
    def from_record(cls, value: Any) -> "Precision | None":
        """The `start` record's `precision`: the structured form, or the words older runs wrote."""
        if isinstance(value, Mapping):
            try:
                dtype = str(value["dtype"])
                fsdp = value.get("fsdp")
                reduce = str(fsdp["reduce_dtype"]) if isinstance(fsdp, Mapping) and "reduce_dtype" in fsdp else None
                return cls(bool(value["autocast"]), dtype, bool(value["grad_scaler"]), bool(value.get("tf32", False)),
                           reduce=reduce)
            except KeyError:
                return None
        if isinstance(value, str) and value:
            base, _, rest = value.partition(" + ")
            scaler = "GradScaler" in rest
            if base.startswith("FSDP ") and base.endswith(" reduce") and " params, " in base:  # self.words's
                param, _, reduce = base.removeprefix("FSDP ").removesuffix(" reduce").partition(" params, ")
                low = param != FULL
                return cls(low, param if low else next(iter(DTYPES)), scaler, reduce=reduce)
            if base.startswith("autocast "):
                return cls(True, base.removeprefix("autocast "), scaler)
            if base == "fp32":
                return cls(False, next(iter(DTYPES)), scaler, tf32="TF32" in rest)
        return None

    # --- said as ... -------------------------------------------------------------------------

    @property
    def reduced(self) -> str:
        """The dtype the forward pass computes in: FULL without autocast."""
        return self.dtype if self.autocast else FULL

    @property
    def short(self) -> str:
        """Variant name: fp32, bf16, fp16+scaler (the names `amptui ab` uses)."""
        name = DTYPES[self.dtype].short if self.autocast and self.dtype in DTYPES else (
            self.dtype if self.autocast else TF32 if self.tf32 else "fp32")
        reduced_low = self.reduce is not None and self.reduce != FULL
        return name + (f"+{REDUCE}" if reduced_low else "") + ("+scaler" if self.scaler else "")

    @property
    def words(self) -> str:
        """"fp32", "autocast bfloat16", "autocast float16 + GradScaler", "fp32 + GradScaler"; an FSDP
        policy: "FSDP bfloat16 params, float32 reduce" (the shards and the optimizer stay float32)."""
        if self.reduce is not None:
            words = f"FSDP {self.reduced} params, {self.reduce} reduce"
        else:
            words = f"autocast {self.dtype}" if self.autocast else "fp32 + TF32" if self.tf32 else "fp32"
        return words + (" + GradScaler" if self.scaler else "")

    @property
    def fsdp_policy(self) -> dict[str, str] | None:
        """An FSDP run's MixedPrecisionPolicy in dtype names: param (all-gathered and computed in),
        reduce (gradients reduced in) and sharded (what each rank keeps: parameters, optimizer)."""
        if self.reduce is None:
            return None
        return {"param_dtype": self.reduced, "reduce_dtype": self.reduce, "sharded_dtype": FULL}

    def as_record(self) -> dict[str, Any]:
        """The `start` record's `precision` field (`tf32` only when asked for; `fsdp`: an FSDP run's policy).
        Its dtype is what the forward computes in: float32 without autocast (never the preset's unused one)."""
        record: dict[str, Any] = {"autocast": self.autocast, "dtype": self.reduced, "grad_scaler": self.scaler,
                                  "short": self.short, "words": self.words}
        if self.tf32:
            record["tf32"] = True
        if self.reduce is not None:
            record["fsdp"] = self.fsdp_policy
        return record

    def overrides(self) -> dict[str, object]:
        """The preset keys (dotted) that give this precision (without autocast the preset's dtype stays)."""
        keys: dict[str, object] = {"amp.autocast": self.autocast}
        if self.autocast:
            keys["amp.dtype"] = self.dtype
        keys["amp.grad_scaler"] = self.scaler
        if self.tf32:
            keys["amp.tf32"] = True
        if self.reduce is not None:  # the "+reduce" variants (FSDP): gradients reduced in the compute dtype
            keys["amp.reduce_dtype"] = self.reduce
        return keys


def variant_names() -> list[str]:
    """fp32, tf32 (CUDA only), then each dtype without and with a GradScaler: the names `--variants` takes."""
    return ["fp32", TF32, *(n for d in DTYPES.values() for n in (d.short, d.short + "+scaler"))]


def fsdp_variant_names() -> list[str]:
    """The FSDP-only variants: a policy that also reduces gradients in its compute dtype."""
    return [n for d in DTYPES.values() for n in (f"{d.short}+{REDUCE}", f"{d.short}+{REDUCE}+scaler")]
