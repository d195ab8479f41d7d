"""Precision as a value: the fields every mode shares (autocast on/off, the compute dtype, the
GradScaler), the name of the precision mode that owns it, and that mode's own small frozen
options value (what the mode alone reads: an FSDP policy's reduce dtype, a recipe, ...).

Everything that names a precision (A/B variants, presets' "auto" resolution, the `start`
record, runs/compare, alarms, doctor, the dashboard) goes through `Precision`; what a value means
(its names, words, what the trainer applies) is answered by its precision mode (amptui/core/modes/,
one module per mode). A new reduced-precision autocast dtype is one `Dtype` entry in `DTYPES`
(core/config/dtypes.py); a new way to train is one mode. No torch here: core stays importable
without it (the trainer maps `Dtype.name` to a torch dtype with `getattr(torch, name)`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from amptui.core import modes
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


def precision_keys() -> tuple[str, ...]:
    """The keys a Precision decides ([amp.layers]: per-module precision, what a plan A/B varies):
    the shared ones, then every mode's own."""
    return ("amp.autocast", "amp.dtype", "amp.grad_scaler", "amp.mode", "amp.layers",
            *(k for m in modes.MODES for k in m.keys))


PRECISION_KEYS = precision_keys()
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
    mode_name: str = ""  # the precision mode that owns it ("": the plain one, autocast or fp32)
    options: Any = None  # that mode's own frozen options value (None: it has none)
    # [amp.layers]: (module-name pattern, layer variant), first match wins (core/config/layers.py)
    layers: tuple[tuple[str, str], ...] = ()
    # what the rules did to a built model: (layer variant, how many layers run in it instead of the
    # run's precision), in first-seen order; None: not known yet (no model built), or no rules
    mix: tuple[tuple[str, int], ...] | None = None

    def __post_init__(self) -> None:
        if not self.mode_name:
            object.__setattr__(self, "mode_name", "autocast" if self.autocast else "fp32")

    def _key(self) -> tuple:
        """What tells two precisions apart: every field, normalised here and only here: without
        autocast the dtype a preset still names is unused (float32 computes)."""
        return (self.autocast, self.reduced, self.scaler, self.mode_name, self.options, self.layers, self.mix or None)

    def __eq__(self, other: object) -> bool:  # a float32 run is the same whatever autocast dtype its preset names
        return isinstance(other, Precision) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def with_shared(self, **fields: Any) -> "Precision":
        """This value with shared fields changed (autocast, dtype, scaler): what a mode builds on."""
        return dataclasses.replace(self, **fields)

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
        base = cls(bool(amp.autocast), dtype, bool(scaler), layers=tuple(getattr(amp, "layers", {}).items()))
        named = getattr(amp, "mode", "auto")
        mode = modes.by_name(named) if named != "auto" else None
        if mode is None:  # the most specific mode its keys ask for
            mode = next(m for m in reversed(modes.MODES) if not m.chosen_by_name and m.claims(cfg, base))
        return mode.configure(cfg, base)

    @classmethod
    def from_variant(cls, name: str) -> "Precision":
        """"fp32", "fp16", "fp16+scaler", "bf16", "bf16+scaler" (any DTYPES short name), and for
        FSDP policies "bf16+reduce" / "fp16+reduce+scaler" (reduce in the compute dtype): any name
        a precision mode knows (modes.MODES); ValueError else."""
        base = cls(False, next(iter(DTYPES)), False)
        found = next((p for m in modes.MODES if (p := m.parse(name, base)) is not None), None)  # the first that knows it
        if found is None:
            raise ValueError(name)
        return found

    @classmethod
    def from_record(cls, value: Any) -> "Precision | None":
        """The `start` record's `precision`: the structured form, or the words older runs wrote."""
        if isinstance(value, Mapping):
            try:
                rules, mix = _layers_of(value.get("layers"))
                base = cls(bool(value["autocast"]), str(value["dtype"]), bool(value["grad_scaler"]),
                           layers=rules, mix=mix)
                named = modes.by_name(str(value.get("mode", "")))
                asked = [named] if named is not None else list(reversed(modes.MODES))
                return next((p for m in asked if (p := m.read(value, base)) is not None),
                            base if named is None else named.own(base))
            except (KeyError, TypeError, ValueError, AttributeError):
                return None
        if isinstance(value, str) and value:
            return cls._from_words(value)
        return None

    @classmethod
    def _from_words(cls, words: str) -> "Precision | None":
        """`words` read back: "fp32", "autocast D", or a mode's own, then " + GradScaler" and a
        mixed run's layers; each mode reads the rest of its own (what older runs wrote instead of the dict)."""
        head, *parts = words.split(" + ")
        scaler = "GradScaler" in parts
        mix, rest = [], []
        for part in parts:
            if (layer := _read_mix_part(part)) is not None:
                mix.append(layer)
            elif part != "GradScaler":
                rest.append(part)
        low = head.startswith("autocast ")
        base = cls(low, head.removeprefix("autocast ") if low else next(iter(DTYPES)), scaler, mix=tuple(mix) or None)
        found = next((p for m in reversed(modes.MODES) if (p := m.read_words(head, rest, base)) is not None), None)
        if found is None and not rest and (head == "fp32" or low):
            return base
        return found

    # --- said as ... -------------------------------------------------------------------------

    @property
    def reduced(self) -> str:
        """The dtype the forward pass computes in: FULL without autocast."""
        return self.dtype if self.autocast else FULL

    @property
    def mode(self) -> modes.PrecisionMode:
        """The precision mode that answers for this value: the one it names; a name no mode has (a run
        recorded by a newer amptui): the plain mode of its shared fields."""
        return modes.by_name(self.mode_name) or modes.by_name("autocast" if self.autocast else "fp32") or modes.MODES[0]

    @property
    def short(self) -> str:
        """Variant name: fp32, bf16, fp16+scaler (the names `amptui ab` uses); with [amp.layers] the
        layers in another precision follow: "bf16 + 2 fp8-rowwise layers" (each layer mode's own word)."""
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
        """The `start` record's `precision` field (`mode`: the mode's name; the mode's own fields beside).
        Its dtype is what the forward computes in: float32 without autocast (never the preset's unused one)."""
        record: dict[str, Any] = {"autocast": self.autocast, "dtype": self.reduced, "grad_scaler": self.scaler,
                                  "short": self.short, "words": self.words, "mode": self.mode.name}
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
    """The variants one layer can take: every variant of a mode that may be a layer's own compute
    precision (no GradScaler: that stays the run's): fp32, fp16, bf16, fp8, ..."""
    return [n for m in modes.MODES if m.per_layer for n in m.variants() if not Precision.from_variant(n).scaler]


def scope_word(variant: str) -> str:
    """A layer variant as a mixed run says it: "fp32", "bf16" (its mode's word)."""
    p = Precision.from_variant(variant)
    return p.mode.scope_word(p)


def _with_layers(p: Precision, base: str) -> str:
    """A run's name with its layers: "bf16 + 2 fp8-rowwise layers" (each layer mode's own word); before the model is built
    (the rules known, not yet what they match): "bf16 + amp.layers"."""
    if p.mix:
        return base + "".join(f" + {n} {scope_word(v)} layer{'s' if n != 1 else ''}" for v, n in p.mix if n)
    return f"{base} + amp.layers" if p.layers and p.mix is None else base


def _read_mix_part(part: str) -> tuple[str, int] | None:
    """One " + " part of a mixed run's words back: "2 bf16 layers" -> ("bf16", 2)."""
    count, _, rest = part.partition(" ")
    word = rest.removesuffix("s").removesuffix(" layer")
    if not count.isdigit() or not rest.startswith(word + " layer"):
        return None
    variant = next((v for v in layer_variants() if scope_word(v) == word), None)
    return (variant, int(count)) if variant else None


def listing(group: str | None = None) -> list[tuple[str, str]]:
    """Every variant the modes offer, with its words, in the order offered: [("fp32", "fp32"),
    ("bf16", "autocast bfloat16"), ...]; `group` ("", or a mode's group, "fsdp"): only that group's.
    What help texts and docs list (a new mode's variants follow with no edit)."""
    return [(n, Precision.from_variant(n).words) for m in modes.MODES if group is None or m.group == group
            for n in m.variants()]


def variant_names() -> list[str]:
    """fp32, tf32 (CUDA only), then each dtype without and with a GradScaler, ...: the names
    `--variants` takes on any dist.mode (every mode's but those of a group, which need more)."""
    return [n for m in modes.MODES if not m.group for n in m.variants()]


def group_variant_names(group: str) -> list[str]:
    """The variants of the modes of `group` ("fsdp": a policy that also reduces gradients in its compute dtype)."""
    return [n for m in modes.MODES if m.group == group for n in m.variants()]


def fsdp_variant_names() -> list[str]:
    """The FSDP-only variants: a policy that also reduces gradients in its compute dtype."""
    return group_variant_names("fsdp")


def grouped_variants() -> list[tuple[str, list[str]]]:
    """(what they need, in words; the variants) for each group of modes beyond the plain ones, in offered order."""
    said: dict[str, list[str]] = {}
    for m in modes.MODES:
        if m.group:
            said.setdefault(m.offered_with or m.group, []).extend(m.variants())
    return list(said.items())
