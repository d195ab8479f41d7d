"""Precision as a value: autocast on/off, the autocast dtype, GradScaler on/off (and the FSDP
policy's reduce dtype, TF32).

Everything that names a precision (A/B variants, presets' "auto" resolution, the `start`
record, runs/compare, alarms, doctor, the dashboard) goes through `Precision`; what a value means
(its names, words, what the trainer applies) is answered by its precision mode
(core/config/modes.py). A new reduced-precision autocast dtype is one `Dtype` entry in `DTYPES`
(core/config/dtypes.py); a new way to train is one mode. No torch here: core stays importable
without it (the trainer maps `Dtype.name` to a torch dtype with `getattr(torch, name)`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from amptui.core.config import modes
from amptui.core.config.dtypes import (  # noqa: F401 - re-exported: the names every caller imports from here
    DTYPES,
    FULL,
    FULL_DTYPE,
    REDUCE,
    TF32,
    Dtype,
    auto_dtype,
    dtype_by_short,
    dtype_range,
    narrow,
    narrow_dtype,
    wide,
    wide_dtype,
)

if TYPE_CHECKING:  # config imports this module (its schema names the dtypes)
    from amptui.core.config.values import Config


# the keys a Precision decides ([amp.layers]: per-module precision, what a plan A/B varies)
PRECISION_KEYS = ("amp.autocast", "amp.dtype", "amp.grad_scaler", "amp.tf32", "amp.reduce_dtype", "amp.float8", "amp.layers")
# A run whose precision nobody has seen: a script before its loop's first step (or run with its hooks
# off): never a config default. Runs lists, JSON and the dashboard say it through `precision_or_unseen`.
UNSEEN = "not seen"


def precision_or_unseen(said: str | None) -> str:
    """A run's precision as shown (a variant name, or words): UNSEEN when nothing says it yet."""
    return said or UNSEEN


@dataclass(frozen=True)
class Precision:
    autocast: bool
    dtype: str          # the autocast dtype (kept when autocast is off: the preset still names one)
    scaler: bool
    tf32: bool = False  # without autocast, amp.tf32 = true: float32 on TF32 tensor cores (CUDA)
    # dist.mode = "fsdp": the dtype gradients are reduced in, and `autocast`/`dtype` name the
    # MixedPrecisionPolicy's param_dtype (no autocast context); None: not an FSDP policy
    reduce: str | None = None
    float8: str = "off"  # amp.float8: torchao's recipe for the linears (on top of autocast), "off" without
    # [amp.layers]: (module-name pattern, layer variant), first match wins (core/config/layers.py)
    layers: tuple[tuple[str, str], ...] = ()
    # what the rules did to a built model: (layer variant, how many layers run in it instead of the
    # run's precision), in first-seen order; None: not known yet (no model built), or no rules
    mix: tuple[tuple[str, int], ...] | None = None

    def _key(self) -> tuple:
        """What tells two precisions apart: every field, normalised here and only here: without
        autocast the dtype a preset still names is unused (float32 computes)."""
        return (self.autocast, self.dtype if self.autocast else FULL, self.scaler, self.tf32,
                self.reduce, self.float8, self.layers, self.mix or None)

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
        said = cls(bool(amp.autocast), dtype, bool(scaler), tf32=amp.tf32 is True, reduce=reduce,
                   float8=getattr(amp, "float8", "off"), layers=tuple(getattr(amp, "layers", {}).items()))
        return said.mode.normalise(said)  # what the mode that owns it ignores, dropped

    @classmethod
    def from_variant(cls, name: str) -> "Precision":
        """"fp32", "fp16", "fp16+scaler", "bf16", "bf16+scaler" (any DTYPES short name), and for
        FSDP policies "bf16+reduce" / "fp16+reduce+scaler" (reduce in the compute dtype): any name
        a precision mode knows (modes.MODES); ValueError else."""
        fields = modes.parse_variant(name)
        if fields is None:
            raise ValueError(name)
        return cls(**fields)

    @classmethod
    def from_record(cls, value: Any) -> "Precision | None":
        """The `start` record's `precision`: the structured form, or the words older runs wrote."""
        if isinstance(value, Mapping):
            try:
                dtype = str(value["dtype"])
                fsdp = value.get("fsdp")
                reduce = str(fsdp["reduce_dtype"]) if isinstance(fsdp, Mapping) and "reduce_dtype" in fsdp else None
                float8 = value.get("float8")
                recipe = str(float8.get("recipe", "off")) if isinstance(float8, Mapping) else "off"
                rules, mix = _layers_of(value.get("layers"))
                return cls(bool(value["autocast"]), dtype, bool(value["grad_scaler"]), bool(value.get("tf32", False)),
                           reduce=reduce, float8=recipe, layers=rules, mix=mix)
            except (KeyError, TypeError, ValueError):
                return None
        if isinstance(value, str) and value:
            return cls._from_words(value)
        return None

    @classmethod
    def _from_words(cls, words: str) -> "Precision | None":
        """`words` read back: "fp32", "autocast D" or "FSDP P params, R reduce", then any of
        " + TF32", " + float8 RECIPE", " + GradScaler" (what older runs wrote instead of the dict)."""
        base, *parts = words.split(" + ")
        scaler, tf32, recipe = "GradScaler" in parts, "TF32" in parts, "off"
        mix = []
        for part in parts:
            if (layer := _read_mix_part(part)) is not None:
                mix.append(layer)
            elif part.startswith("float8 "):
                recipe = part.removeprefix("float8 ")
            elif part not in ("GradScaler", "TF32"):
                return None
        low, dtype, reduce = False, next(iter(DTYPES)), None
        if base.startswith("FSDP ") and base.endswith(" reduce") and " params, " in base:
            param, _, reduce = base.removeprefix("FSDP ").removesuffix(" reduce").partition(" params, ")
            low = param != FULL
            dtype = param if low else dtype
        elif base.startswith("autocast "):
            low, dtype = True, base.removeprefix("autocast ")
        elif base != "fp32":
            return None
        return cls(low, dtype, scaler, tf32=tf32 and not low, reduce=reduce, float8=recipe, mix=tuple(mix) or None)

    # --- said as ... -------------------------------------------------------------------------

    @property
    def reduced(self) -> str:
        """The dtype the forward pass computes in: FULL without autocast."""
        return self.dtype if self.autocast else FULL

    @property
    def mode(self) -> modes.PrecisionMode:
        """The precision mode that answers for this value."""
        return modes.mode_of(self)

    @property
    def short(self) -> str:
        """Variant name: fp32, bf16, fp16+scaler (the names `amptui ab` uses); with [amp.layers] the
        layers in another precision follow: "bf16 + 2 float8 rowwise layers"."""
        return _with_layers(self, self.mode.short(self) + ("+scaler" if self.scaler else ""))

    @property
    def words(self) -> str:
        """"fp32", "autocast bfloat16", "autocast float16 + GradScaler", "fp32 + GradScaler"; an FSDP
        policy: "FSDP bfloat16 params, float32 reduce" (the shards and the optimizer stay float32)."""
        return _with_layers(self, self.mode.words(self) + (" + GradScaler" if self.scaler else ""))

    @property
    def mixed(self) -> bool:
        """Whether [amp.layers] puts some of the model's layers in another precision than the run's."""
        return bool(self.layers)

    @property
    def autocast_dtype(self) -> str | None:
        """The dtype the trainer's autocast context runs in; None: no autocast context (an FSDP
        policy computes in its param_dtype itself)."""
        return self.mode.autocast_dtype(self)

    @property
    def fsdp_policy(self) -> dict[str, str] | None:
        """An FSDP run's MixedPrecisionPolicy in dtype names: param (all-gathered and computed in),
        reduce (gradients reduced in) and sharded (what each rank keeps: parameters, optimizer)."""
        return self.mode.fsdp_policy(self)

    def as_record(self) -> dict[str, Any]:
        """The `start` record's `precision` field (`tf32` only when asked for; `fsdp`: an FSDP run's policy).
        Its dtype is what the forward computes in: float32 without autocast (never the preset's unused one)."""
        record: dict[str, Any] = {"autocast": self.autocast, "dtype": self.reduced, "grad_scaler": self.scaler,
                                  "short": self.short, "words": self.words}
        if self.tf32:
            record["tf32"] = True
        if self.layers:
            record["layers"] = {"rules": [list(r) for r in self.layers],
                                **({"mix": {v: n for v, n in self.mix}} if self.mix is not None else {})}
        return {**record, **self.mode.record(self)}

    def overrides(self) -> dict[str, object]:
        """The preset keys (dotted) that give this precision (without autocast the preset's dtype stays)."""
        keys: dict[str, object] = {"amp.autocast": self.autocast}
        if self.autocast:
            keys["amp.dtype"] = self.dtype
        keys["amp.grad_scaler"] = self.scaler
        if self.layers:
            keys["amp.layers"] = dict(self.layers)
        return {**keys, **self.mode.overrides(self)}


def _layers_of(said: Any) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, int], ...] | None]:
    """A record's precision.layers: (rules, mix); ((), None) without one."""
    if not isinstance(said, Mapping):
        return (), None
    rules = tuple((str(p), str(v)) for p, v in said.get("rules", ()))
    mix = said.get("mix")
    return rules, tuple((str(v), int(n)) for v, n in mix.items()) if isinstance(mix, Mapping) else None


# --- [amp.layers] in words (the rules themselves: core/config/layers.py) ------------------------------

def layer_variants() -> list[str]:
    """The variants one layer can take: every mode's variant that is a compute precision of its own
    (no GradScaler, FSDP reduction or TF32 switch: those stay the run's): fp32, fp16, bf16, fp8, ..."""
    return [n for m in modes.MODES for n in m.variants()
            if not (p := Precision.from_variant(n)).scaler and p.reduce is None and not p.tf32]


def scope_word(variant: str) -> str:
    """A layer variant as a mixed run says it: "float8 rowwise", "fp32" (its mode's word)."""
    p = Precision.from_variant(variant)
    return p.mode.scope_word(p)


def _with_layers(p: Precision, base: str) -> str:
    """A run's name with its layers: "bf16 + 2 float8 rowwise layers"; before the model is built
    (the rules known, not yet what they match): "bf16 + amp.layers"."""
    if p.mix:
        return base + "".join(f" + {n} {scope_word(v)} layer{'s' if n != 1 else ''}" for v, n in p.mix if n)
    return f"{base} + amp.layers" if p.layers and p.mix is None else base


def _read_mix_part(part: str) -> tuple[str, int] | None:
    """One " + " part of a mixed run's words back: "2 float8 rowwise layers" -> ("fp8-rowwise", 2)."""
    count, _, rest = part.partition(" ")
    word = rest.removesuffix("s").removesuffix(" layer")
    if not count.isdigit() or not rest.startswith(word + " layer"):
        return None
    variant = next((v for v in layer_variants() if scope_word(v) == word), None)
    return (variant, int(count)) if variant else None


def listing(group: str | None = None) -> list[tuple[str, str]]:
    """Every variant the modes offer, with its words, in the order offered: [("fp32", "fp32"),
    ("bf16", "autocast bfloat16"), ...]; `group` ("", "fsdp", "float8"): only that group's. What
    help texts and docs list (a new mode's variants follow with no edit)."""
    return [(n, Precision.from_variant(n).words) for m in modes.MODES if group is None or m.group == group
            for n in m.variants()]


def variant_names() -> list[str]:
    """fp32, tf32 (CUDA only), then each dtype without and with a GradScaler: the names `--variants`
    takes on any dist.mode (every mode's but the FSDP-only ones)."""
    return [n for m in modes.MODES if not m.group for n in m.variants()]


def fsdp_variant_names() -> list[str]:
    """The FSDP-only variants: a policy that also reduces gradients in its compute dtype."""
    return [n for m in modes.MODES if m.group == "fsdp" for n in m.variants()]


def float8_variant_names() -> list[str]:
    """torchao's float8 recipes on top of bf16 autocast: fp8 (tensorwise), fp8-rowwise, mxfp8."""
    return [n for m in modes.MODES if m.group == "float8" for n in m.variants()]
