"""Advice agrees with the tool's own measurements and dialogs say what will really happen: where
the measured rates (the cache `amptui doctor` and the launcher write) say bfloat16 is slow on this
CPU, no warning sells bfloat16 as the fast format or says "try bfloat16" as a speed-up; the tune
dialog says which toggles its trials really keep."""

from __future__ import annotations

import pytest
from support.machine import cpu_rates_here
from support.records import events


@pytest.mark.slow  # a real trainer, two steps
def test_float16_on_a_cpu_is_advised_against_by_what_was_measured(cli, runs_dir, tmp_path, monkeypatch):
    cpu_rates_here(tmp_path, monkeypatch, bfloat16=0.001)
    cli("run", "scaler-lab", "--set", "run.max_steps=2", "--set", "log.tensorboard=false", check=True)
    (run_dir,) = runs_dir.iterdir()
    said = [r["message"] for r in events(run_dir) if r["kind"] == "warning" and "float16 autocast on the CPU" in
            r["message"]]
    assert said == ["float16 autocast on the CPU: float16 is slow on this CPU (measured 1 GFLOP/s, float32 85), and "
                    "so is bfloat16 (measured 1 GFLOP/s, float32 85): float32 (amp.autocast=false) is its fast "
                    "format"], said
