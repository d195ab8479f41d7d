"""Advice agrees with the tool's own measurements and dialogs say what will really happen: where
the measured rates (the cache `amptui doctor` and the launcher write) say bfloat16 is slow on this
CPU, no warning sells bfloat16 as the fast format or says "try bfloat16" as a speed-up; the tune
dialog says which toggles its trials really keep."""

from __future__ import annotations

import asyncio

from support.machine import cpu_rates_here

from amptui.tune import plan as T


def test_the_scale_alarms_offer_bfloat16_only_where_it_measured_fast(tmp_path, monkeypatch):
    import torch

    from amptui.telemetry.device import native_bf16

    cpu_rates_here(tmp_path, monkeypatch, bfloat16=0.001)
    assert native_bf16(torch.device("cpu")) is False  # the use_bfloat16 alarm ("try bfloat16") stays quiet


def test_the_scale_alarms_offer_bfloat16_where_it_measured_fast(tmp_path, monkeypatch):
    import torch

    from amptui.telemetry.device import native_bf16

    cpu_rates_here(tmp_path, monkeypatch, bfloat16=0.2)
    assert native_bf16(torch.device("cpu")) is True


def test_the_tune_dialog_says_which_toggles_its_trials_keep(root):
    from support.dashboard import app_for, until
    from support.drawn import drawn_text

    from amptui.dashboard.screens.tune.start import TuneStartModal

    async def scenario():
        app = app_for(root)
        async with app.run_test(size=(100, 30)) as pilot:
            app.push_screen(TuneStartModal("quickstart", {"run.max_steps": 12, "optim.lr": 0.01}))
            await until(pilot, lambda: isinstance(app.screen, TuneStartModal))
            await pilot.pause()
            return " ".join(drawn_text(app.screen.query_one("#tune-start-toggles")).split())

    text = asyncio.run(scenario())
    assert "Your toggles optim.lr=0.01 apply to every trial." in text, text
    assert f"run.max_steps=12 does not: every trial runs {T.TRIAL_STEPS} steps" in text, text
    assert T.toggles_words({}) == "The preset's own settings apply to every trial."
