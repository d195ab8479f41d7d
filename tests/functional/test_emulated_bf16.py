"""On a CPU without bfloat16 instructions (no AVX512-BF16, no AMX) torch emulates bfloat16 autocast,
several times slower than float32: the toggles summary, `amptui run`'s start line and the A/B
table say so. This machine may well have the instructions, so a mock stands in for the CPU's
/proc/cpuinfo flags (and only for them); the runs are real."""

from __future__ import annotations

import pytest
from support.dashboard import async_test, until

from amptui.dashboard.app import make_app
from amptui.dashboard.widgets.toggles import TogglesPanel
from amptui.machine import cpu as cpu_features
from amptui.machine import hardware

WITHOUT_BF16 = {"fpu", "sse2", "avx2", "avx512f", "f16c"}   # a common cloud Intel CPU
WITH_AVX512_BF16 = WITHOUT_BF16 | {"avx512_bf16"}
WITH_AMX = WITHOUT_BF16 | {"amx_tile", "amx_bf16"}


@pytest.fixture
def fake_flags(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # no measured rates: the flags decide

    def install(flags: set[str]) -> None:
        monkeypatch.setattr(cpu_features, "read_cpuinfo", lambda path="/proc/cpuinfo": ("Fake CPU", set(flags)))
    return install


def test_only_bfloat16_autocast_on_a_cpu_without_the_instructions_is_emulated(fake_flags):
    fake_flags(WITHOUT_BF16)
    assert hardware.emulated_dtype_notice("cpu", True, "bfloat16") == hardware.EMULATED_BF16_NOTICE
    assert hardware.emulated_dtype_notice("cpu", False, "bfloat16") is None      # autocast off: fp32
    assert hardware.emulated_dtype_notice("cpu", True, "float16") is None
    assert hardware.emulated_dtype_notice("cuda", True, "bfloat16") is None
    for native in (WITH_AVX512_BF16, WITH_AMX):
        fake_flags(native)
        assert hardware.emulated_dtype_notice("cpu", True, "bfloat16") is None
    fake_flags(set())  # /proc/cpuinfo unreadable: no claim either way
    assert hardware.emulated_dtype_notice("cpu", True, "bfloat16") is None


@async_test
async def test_toggles_summary_says_bfloat16_is_emulated(tmp_path, fake_flags):
    fake_flags(WITHOUT_BF16)
    app = make_app(tmp_path / "runs")
    async with app.run_test(size=(110, 34)) as pilot:
        toggles = app.screen.query_one(TogglesPanel)
        summary, speed = toggles.query_one("#toggle-summary"), toggles.query_one("#toggle-speed")
        toggles.query_one("#t-amp-dtype").value = "bfloat16"   # by name: obeyed, and warned of
        await until(pilot, lambda: "autocast bfloat16" in str(summary.render()))
        assert "autocast bfloat16 · 1 process on cpu" in str(summary.render())
        assert speed.display and str(speed.render()) == "⚠ bfloat16 is slow on this CPU"
        assert "no AVX512-BF16 or AMX instructions" in str(speed.tooltip)
        toggles.query_one("#t-amp-autocast").value = False     # autocast off: float32, nothing emulated
        await until(pilot, lambda: "fp32" in str(summary.render()))
        assert not speed.display and summary.tooltip is None
