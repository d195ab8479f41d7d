"""`amp.dtype = "auto"` means what is fast and safe on this machine: where the CPU computes its auto
dtype (bfloat16) slowly, automatic precision falls back to float32 with one line saying why and
how to force AMP; explicit settings are obeyed. Measured rates outrank the CPU's flags. This
machine's own CPU never decides: the flags (/proc/cpuinfo) and the measured rates (the peak cache
file) are stood in for every test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.dashboard import async_test, until

from amptui.core.config.presets import find_preset
from amptui.core.config.resolve import auto_fallback_note, auto_overrides
from amptui.dashboard.app import make_app
from amptui.dashboard.widgets.toggles import TogglesPanel
from amptui.jobs import launch
from amptui.machine import cpu as cpu_features
from amptui.machine import dtype_speed, peaks

X86 = {"fpu", "sse2", "avx2", "avx512f", "f16c"}
CLAIMS_BF16 = X86 | {"avx512_bf16"}          # what this kind of box reports, emulated or not
EMULATED = {"float32": 0.085, "bfloat16": 0.001, "float16": 0.0012}   # measured on such a box
NATIVE = {"float32": 0.085, "bfloat16": 0.2, "float16": 0.002}


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """Stand in a CPU: machine(flags, rates) sets its /proc/cpuinfo flags and its measured rates
    (None: never measured); a measurement attempted anyway fails the test."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    peaks.forget_measured_peaks()

    def refuse(*args, **kwargs):
        raise AssertionError("measured although the rates were known")

    monkeypatch.setattr(peaks, "measure_matmul_tflops", refuse)

    def install(flags: set[str], rates: dict[str, float] | None) -> None:
        monkeypatch.setattr(cpu_features, "read_cpuinfo", lambda path="/proc/cpuinfo": ("Fake CPU", set(flags)))
        cache = peaks.peak_cache_path()
        cache.parent.mkdir(parents=True, exist_ok=True)
        entries = {f"Fake CPU (2 threads)|{d}|torch 9.9": r for d, r in (rates or {}).items()}
        cache.write_text(json.dumps({"format": peaks.PEAK_CACHE_FORMAT, "peak_tflops": entries}))
    yield install
    peaks.forget_measured_peaks()


def quickstart(**sets):
    return find_preset("quickstart").config(sets)


# --- the decision --------------------------------------------------------------------------------

@pytest.mark.parametrize("flags, rates, slow", [
    (CLAIMS_BF16, EMULATED, True),    # the flags claim it, the measurement says otherwise: measured wins
    (X86, NATIVE, False),             # no flag, but measured fast
    (X86, None, True),                # no measurement: no AVX512-BF16/AMX flag means emulated
    (CLAIMS_BF16, None, False),
    (set(), None, False),             # flags unreadable and nothing measured: no claim either way
])
def test_measured_rates_outrank_the_flags(machine, flags, rates, slow):
    machine(flags, rates)
    assert ("bfloat16" in dtype_speed.slow_dtypes("cpu")) is slow
    assert dtype_speed.slow_dtypes("cuda") == {}


def test_auto_falls_back_to_float32_and_explicit_settings_are_obeyed():
    slow = {"bfloat16": "measured 0.001 TFLOP/s, float32 0.085"}
    fallback = auto_overrides(quickstart(), "cpu", slow)
    assert (fallback["amp.autocast"], fallback["amp.grad_scaler"]) == (False, False)
    note = auto_fallback_note(quickstart(), "cpu", slow)
    assert note and "float32 (autocast off)" in note and "--set amp.dtype=bfloat16" in note
    assert "measured 0.001 TFLOP/s" in note and "\n" not in note
    # explicit: obeyed, no note
    for sets in ({"amp.dtype": "bfloat16"}, {"amp.grad_scaler": True}, {"amp.autocast": False}):
        cfg = quickstart(**sets)
        assert "amp.autocast" not in auto_overrides(cfg, "cpu", slow) and auto_fallback_note(cfg, "cpu", slow) is None
    assert auto_overrides(quickstart(), "cpu", {})["amp.dtype"] == "bfloat16"
    assert auto_fallback_note(quickstart(), "cuda", slow) is None   # CUDA's auto dtype is float16


def test_the_launcher_resolves_auto_to_float32_with_one_note(machine):
    machine(CLAIMS_BF16, EMULATED)
    notes: list[str] = []
    cfg = launch.resolve_config(find_preset("quickstart"), {"run.device": "cpu"}, notes)
    assert (cfg.amp.autocast, cfg.amp.grad_scaler) == (False, False)
    assert len(notes) == 1 and "--set amp.dtype=bfloat16" in notes[0]
    forced = launch.resolve_config(find_preset("quickstart"), {"run.device": "cpu", "amp.dtype": "bfloat16"}, notes)
    assert forced.amp.autocast and forced.amp.dtype == "bfloat16" and len(notes) == 1
    machine(CLAIMS_BF16, NATIVE)
    assert launch.resolve_config(find_preset("quickstart"), {"run.device": "cpu"}).amp.autocast


@pytest.mark.parametrize("script", ["plain.py", "-m pkg.train"])
def test_a_script_run_gets_no_advice_its_loop_ignores(machine, tmp_path, monkeypatch, script):
    """`amptui run --script` / `-m`: the script's own loop (or its Monitor) decides the precision,
    so the fallback note's `--set amp.dtype=bfloat16` would do nothing there: no note."""
    machine(CLAIMS_BF16, EMULATED)
    if script.startswith("-m"):  # a module found from the current folder, as `python -m` finds it
        (tmp_path / "pkg").mkdir()
        (tmp_path / "pkg" / "__init__.py").write_text("")
        (tmp_path / "pkg" / "train.py").write_text("print('training')\n")
        monkeypatch.chdir(tmp_path)
    else:
        script = str(tmp_path / script)
        Path(script).write_text("print('training')\n")
    notes: list[str] = []
    launch.resolve_config(None, {"run.device": "cpu", "run.script": script}, notes)
    assert notes == []


def test_the_launcher_measures_once_when_nothing_was_measured(machine, monkeypatch):
    machine(CLAIMS_BF16, None)
    calls = []

    def fake(device, dtype, budget_s=0.3):
        calls.append(peaks.dtype_name(dtype))
        return EMULATED[peaks.dtype_name(dtype)]

    monkeypatch.setattr(peaks, "measure_matmul_tflops", fake)
    monkeypatch.setattr(cpu_features, "cpu_name", lambda: "Fake CPU")
    cfg = launch.resolve_config(find_preset("quickstart"), {"run.device": "cpu"})
    assert not cfg.amp.autocast and sorted(calls) == ["bfloat16", "float32"]
    peaks.forget_measured_peaks()   # a new process: the cache file answers
    launch.resolve_config(find_preset("quickstart"), {"run.device": "cpu"})
    assert len(calls) == 2


# --- the home screen -----------------------------------------------------------------------------

def speed_line(toggles) -> str:
    speed = toggles.query_one("#toggle-speed")
    return str(speed.render()) if speed.display else ""


@async_test
async def test_home_summary_says_auto_falls_back_and_warns_for_slow_dtypes_at_80_columns(tmp_path, machine):
    machine(CLAIMS_BF16, EMULATED)
    app = make_app(tmp_path / "runs")
    async with app.run_test(size=(80, 24)) as pilot:
        toggles = app.screen.query_one(TogglesPanel)
        summary = toggles.query_one("#toggle-summary")
        await until(pilot, lambda: "fp32" in str(summary.render()))
        assert str(summary.render()).startswith("→ fp32 · 1 process on cpu")
        line = speed_line(toggles)
        assert line == "auto → fp32: bfloat16 is slow on this CPU"
        assert toggles.query_one("#toggle-speed").size.width >= len(line)   # not cut at 80 columns
        assert "--set amp.dtype=bfloat16" in str(toggles.query_one("#toggle-speed").tooltip)
        toggles.query_one("#t-amp-dtype").value = "float16"   # chosen by name: obeyed, and warned of
        await until(pilot, lambda: speed_line(toggles) == "⚠ float16 is slow on this CPU")
        assert "autocast float16" in str(summary.render())
        toggles.query_one("#t-amp-autocast").value = False
        await until(pilot, lambda: speed_line(toggles) == "")
