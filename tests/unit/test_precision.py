"""Precision as a value: every "auto" decided, variant names, the `start` record's forms, the short
and long names; and a new dtype is one DTYPES entry (variants, A/B, config, alarms, notices follow)."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from amptui.core import modes
from amptui.core.config import precision as precmod
from amptui.core.config import values as config
from amptui.core.config import variants as ab
from amptui.core.config.precision import DTYPES, Dtype, Precision, auto_dtype, variant_names
from amptui.core.errors import ConfigError, UserError
from amptui.core.modes.float8 import Recipe, recipe_of
from amptui.core.modes.fsdp import Policy
from amptui.machine import cpu as cpu_features
from amptui.machine import dtype_speed
from amptui.telemetry.alarms import ScaleAlarms


def _values(autocast, dtype, scaler, device="auto"):
    return config.build_config({}, {"amp.autocast": autocast, "amp.dtype": dtype, "amp.grad_scaler": scaler,
                                    "run.device": device})


# --- from_config: every "auto" combination on each device type ----------------------------------

@pytest.mark.parametrize("device_type", ["cpu", "cuda"])
@pytest.mark.parametrize("autocast, dtype, scaler",
                         list(itertools.product([True, False], ["auto", "float16", "bfloat16"], ["auto", True, False])))
def test_from_config_decides_every_auto(device_type, autocast, dtype, scaler):
    got = Precision.from_config(_values(autocast, dtype, scaler), device_type)
    want_dtype = dtype if dtype != "auto" else {"cuda": "float16", "cpu": "bfloat16"}[device_type]
    want_scaler = scaler if scaler != "auto" else (autocast and want_dtype == "float16")
    assert got == Precision(autocast, want_dtype, want_scaler)
    assert got.reduced == (want_dtype if autocast else "float32")
    assert Precision.from_record(got.as_record()) == got


def test_from_config_reads_the_device_from_the_config():
    assert Precision.from_config(_values(True, "auto", "auto", "cuda")).short == "fp16+scaler"
    assert Precision.from_config(_values(True, "auto", "auto", "cpu")).short == "bf16"
    assert Precision.from_config(_values(True, "auto", "auto", "auto")).short == "bf16"   # "auto" counts as cpu
    assert (auto_dtype("cuda"), auto_dtype("cpu"), auto_dtype("mps")) == ("float16", "bfloat16", "bfloat16")


# --- names ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("precision, short, words", [
    (Precision(False, "float16", False), "fp32", "fp32"),
    (Precision(False, "bfloat16", True), "fp32+scaler", "fp32 + GradScaler"),
    (Precision(True, "float16", False), "fp16", "autocast float16"),
    (Precision(True, "float16", True), "fp16+scaler", "autocast float16 + GradScaler"),
    (Precision(True, "bfloat16", False), "bf16", "autocast bfloat16"),
    (Precision(True, "bfloat16", True), "bf16+scaler", "autocast bfloat16 + GradScaler"),
    (Precision(True, "float8_e5m2", False), "float8_e5m2", "autocast float8_e5m2"),  # unknown: no KeyError
])
def test_short_and_words(precision, short, words):
    assert (precision.short, precision.words) == (short, words)
    assert precision.as_record() == {"autocast": precision.autocast, "dtype": precision.reduced,  # float32 without autocast
                                     "grad_scaler": precision.scaler, "short": short, "words": words,
                                     "mode": "autocast" if precision.autocast else "fp32"}


def test_every_variant_round_trips_through_a_config():
    assert variant_names() == ["fp32", "tf32", "fp16", "fp16+scaler", "bf16", "bf16+scaler", "bf16-pure", "bf16-pure+sr"]
    for name in variant_names():
        p = Precision.from_variant(name)
        assert p.short == name
        resolved = Precision.from_config(config.build_config({}, p.overrides()), "cuda")
        assert resolved.short == name and (resolved.autocast, resolved.scaler) == (p.autocast, p.scaler)
        if p.autocast:
            assert resolved == p
    for bad in ("fp4", "fp8+scaler", "bf16+", "bf16+cast", "", "+scaler"):
        with pytest.raises(ValueError):
            Precision.from_variant(bad)


@pytest.mark.parametrize("record, want", [
    ("autocast float16 + GradScaler", Precision(True, "float16", True)),
    ("autocast bfloat16", Precision(True, "bfloat16", False)),
    ("fp32", Precision(False, "float16", False)),
    ("fp32 + GradScaler", Precision(False, "float16", True)),
    ("fp32 + TF32", Precision(False, "float16", False, "tf32")),
    ({"autocast": False, "dtype": "float16", "grad_scaler": False, "tf32": True, "short": "tf32"},
     Precision(False, "float16", False, "tf32")),
    ({"autocast": False, "dtype": "float32", "grad_scaler": False, "mode": "tf32"}, Precision(False, "float16", False, "tf32")),
    ({"autocast": True, "dtype": "bfloat16", "grad_scaler": False, "short": "bf16", "words": "autocast bfloat16"},
     Precision(True, "bfloat16", False)),
    ({"autocast": False, "dtype": "float16", "grad_scaler": False}, Precision(False, "float16", False)),
    ({"autocast": True}, None),
    ("", None),
    ("something else", None),
    (None, None),
    (3, None),
])
def test_from_record_reads_the_structured_and_the_old_string_forms(record, want):
    assert Precision.from_record(record) == want


# --- a new precision mode is one module of amptui/core/modes -------------------------------------

class HalfAndTf32(modes.PrecisionMode):
    """A made-up mode: float16 autocast, float32 matmuls outside it on TF32 (its trainer side, a
    runtime, is tests/unit/test_fake_mode.py's subject). Its own name picks it (amp.mode), no field it squats on."""

    name = "fp16-tf32"
    chosen_by_name = True

    def variants(self):
        return ["fp16-tf32"]

    def parse(self, variant, base):
        return self.own(base.with_shared(autocast=True, dtype="float16", scaler=True)) if variant == "fp16-tf32" else None

    def autocast_dtype(self, p):
        return p.dtype

    def tf32(self, p):
        return True

    def detect(self, facts):
        return {"amp.mode": self.name} if facts.autocast == ("cuda", "float16") else {}

    def short(self, p):
        return "fp16-tf32"

    def words(self, p):
        return "autocast float16, TF32 outside it"

    def record(self, p):
        return {"tf32_outside": True}


def test_a_new_precision_mode_is_one_entry(monkeypatch):
    monkeypatch.setattr(modes, "MODES", [*modes.MODES, HalfAndTf32()])
    assert variant_names()[-1] == "fp16-tf32" and "fp16-tf32" in ab.VARIANTS
    p = Precision.from_variant("fp16-tf32")
    assert isinstance(p.mode, HalfAndTf32)
    assert (p.short, p.words) == ("fp16-tf32+scaler", "autocast float16, TF32 outside it + GradScaler")
    assert (p.autocast_dtype, p.fsdp_policy) == ("float16", None)
    assert p.as_record()["tf32_outside"] is True and Precision.from_record(p.as_record()) == p
    assert p != Precision.from_variant("fp16+scaler")
    assert dict(ab.expand("fp32,fp16-tf32", "cuda"))["fp16-tf32"] == {
        "amp.autocast": True, "amp.dtype": "float16", "amp.grad_scaler": True, "amp.mode": "fp16-tf32"}
    assert Precision.from_config(config.build_config({}, p.overrides()), "cuda") == p
    assert modes.detect(modes.LoopFacts(autocast=("cuda", "float16"))) == {
        "amp.autocast": True, "amp.dtype": "float16", "amp.mode": "fp16-tf32"}
    # the modes that were there answer as before
    assert Precision.from_variant("bf16").mode.name == "autocast"
    assert Precision.from_variant("bf16+reduce").fsdp_policy == {
        "param_dtype": "bfloat16", "reduce_dtype": "bfloat16", "sharded_dtype": "float32"}


# --- a new dtype is one DTYPES entry ---------------------------------------------------------------

FP8 = Dtype("float8_e4m3fn", "fp8", needs_scaler=True, cpu_flags=("amx_fp8",), cpu_isa="AMX-FP8")


@pytest.fixture
def with_fp8(monkeypatch):
    monkeypatch.setitem(precmod.DTYPES, FP8.name, FP8)
    assert DTYPES is precmod.DTYPES


def test_a_new_dtype_is_one_entry(with_fp8, monkeypatch):
    # names and variants
    assert variant_names()[6:8] == ["fp8", "fp8+scaler"]  # after the autocast dtypes, before the modes that follow
    p = Precision.from_variant("fp8+scaler")
    assert p == Precision(True, "float8_e4m3fn", True)
    assert (p.short, p.words) == ("fp8+scaler", "autocast float8_e4m3fn + GradScaler")
    assert Precision.from_record(p.as_record()) == p
    assert Precision.from_record("autocast float8_e4m3fn") == Precision(True, "float8_e4m3fn", False)
    # the A/B takes it, its defaults stay those of the "auto" dtypes
    assert dict(ab.expand("fp32,fp8", "cuda"))["fp8"] == {"amp.autocast": True, "amp.dtype": "float8_e4m3fn",
                                                          "amp.grad_scaler": False}
    assert "fp8+scaler" in ab.VARIANTS and len(ab.VARIANTS) == 10
    assert [n for n, _ in ab.expand(None, "cuda")] == ["fp32", "fp16", "fp16+scaler"]
    with pytest.raises(UserError, match="known: fp32, tf32, fp16, fp16\\+scaler, bf16, bf16\\+scaler, fp8, fp8\\+scaler, bf16-pure"):
        ab.expand("fp4", "cuda")
    # the config accepts it, and grad_scaler = "auto" follows its needs_scaler
    values = config.build_config({"amp": {"dtype": "float8_e4m3fn"}})
    assert Precision.from_config(values, "cuda") == Precision(True, "float8_e4m3fn", True)
    assert "float8_e4m3fn" in config.SCHEMA["amp"]["dtype"].choices
    with pytest.raises(ConfigError, match="one of auto, float16, bfloat16, float8_e4m3fn"):
        config.build_config({"amp": {"dtype": "float8_e5m2"}})
    # a dtype that needs a scaler gets the "try bfloat16" alarm, as float16 does
    alarms = ScaleAlarms(growth_interval=8, dtype="float8_e4m3fn", bf16_available=True)
    events = [{"event": "growth", "step": 1}] + [{"event": "backoff", "step": s, "new_scale": 2.0 ** 10}
                                                 for s in range(2, 13)]
    assert "use_bfloat16" in [a.code for a in alarms.observe(events, 12, 2.0 ** 10, 1.0)]
    # and the emulated-dtype notice reads its cpu_flags
    monkeypatch.setattr(cpu_features, "read_cpuinfo", lambda path="/proc/cpuinfo": ("Fake CPU", {"sse2", "avx2"}))
    notice = dtype_speed.emulated_dtype_notice("cpu", True, "float8_e4m3fn")
    assert notice and notice.startswith("float8_e4m3fn is emulated on this CPU (no AMX-FP8 instructions)")
    monkeypatch.setattr(cpu_features, "read_cpuinfo", lambda path="/proc/cpuinfo": ("Fake CPU", {"sse2", "amx_fp8"}))
    assert dtype_speed.emulated_dtype_notice("cpu", True, "float8_e4m3fn") is None


# --- identity: every field counts, every variant is its own ------------------------------------------

def test_every_variant_is_a_distinct_precision_with_its_own_name():
    names = ab.known_variants()
    precisions = [Precision.from_variant(n) for n in names]
    assert len(set(precisions)) == len(names)  # bf16, fp8, fp8-rowwise and mxfp8 no longer collapse into one
    assert [p.short for p in precisions] == names
    assert Precision.from_variant("bf16") != Precision.from_variant("fp8") != Precision.from_variant("mxfp8")


def test_equality_ignores_only_what_a_run_does_not_use():
    # without autocast the preset's dtype computes nothing: one float32 run whatever it names
    assert Precision(False, "float16", False) == Precision(False, "bfloat16", False)
    assert hash(Precision(False, "float16", False)) == hash(Precision(False, "bfloat16", False))
    # every other field tells two precisions apart: the shared ones, the mode, the mode's options
    base = Precision(True, "bfloat16", False, "float8", Recipe("tensorwise", Policy("float32")))
    for changed in ({"dtype": "float16"}, {"scaler": True}, {"options": Recipe("tensorwise", Policy("bfloat16"))},
                    {"options": Recipe("tensorwise")}, {"options": Recipe("rowwise", Policy("float32"))},
                    {"mode_name": "autocast", "options": None}):
        other = dataclasses.replace(base, **changed)
        assert other != base and len({other, base}) == 2, changed


def _every_precision() -> list[Precision]:
    """Every mode's every setting: shared fields x the mode's options."""
    out = []
    for autocast, dtype, scaler in itertools.product([True, False], DTYPES, [True, False]):
        plain = Precision(autocast, dtype, scaler)
        out.append(plain)
        tf32s = [False] if autocast else [False, True]
        if not autocast:
            out.append(Precision(autocast, dtype, scaler, "tf32"))
        policies = [Policy(r, t) for r in ("float32", *DTYPES) for t in tf32s]
        out += [Precision(autocast, dtype, scaler, "fsdp", policy) for policy in policies]
        out += [Precision(autocast, dtype, scaler, "float8", Recipe(recipe, policy, tf32))
                for recipe in ("tensorwise", "rowwise", "mxfp8") for policy in [None, *policies]
                for tf32 in tf32s if not (tf32 and policy)]
    return out


ALL_PRECISIONS = _every_precision()


@pytest.mark.parametrize("p", ALL_PRECISIONS, ids=lambda p: p.words)
def test_every_precision_round_trips_through_its_record_and_its_words(p):
    """Compared on the records, not with ==: a lost recipe or FSDP policy shows as a differing field."""
    record = p.as_record()
    assert Precision.from_record(record).as_record() == record
    assert Precision.from_record(p.words).as_record() == record  # the string form older runs wrote


def test_fsdp_with_float8_keeps_its_policy_when_read_back():
    words = "FSDP bfloat16 params, float32 reduce + float8 tensorwise"
    p = Precision.from_record(words)
    assert p.fsdp_policy == {"param_dtype": "bfloat16", "reduce_dtype": "float32", "sharded_dtype": "float32"}
    assert (recipe_of(p), p.words) == ("tensorwise", words)
