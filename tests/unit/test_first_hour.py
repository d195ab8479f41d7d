"""Issue 45, a newcomer's first hour: the install note for a CPU-only torch (README, doctor, the
first run), ... Each test asserts what a newcomer reads."""

from __future__ import annotations

import pytest
import torch

from amptui.cli import doctor
from amptui.machine import cputorch

CPU_LINE = "pip install --force-reinstall torch torchvision --index-url https://download.pytorch.org/whl/cpu"


def test_doctor_on_a_cuda_build_without_a_gpu_names_the_smaller_cpu_torch():
    report = doctor.collect(bench=False)
    report["gpus"], report["torch"]["cuda_available"] = [], False  # this machine's, as a GPU-less box sees it
    report["torch"]["cuda"] = "12.8"
    text = doctor.render_text(report)
    assert "CPU-only torch is smaller" in text and CPU_LINE in text
    report["torch"]["cuda"] = None  # a CPU build: nothing to say
    assert CPU_LINE not in doctor.render_text(report)


def test_the_installed_cuda_build_is_read_without_importing_torch():
    assert cputorch.installed_cuda_build() == torch.version.cuda


def test_the_eta_follows_the_pace_of_the_last_minute():
    """A run that slows to a third of its pace (the machine got busy) is told at its pace now: 40
    steps left at 3 s a step, not at the whole session's 2 s."""
    from amptui.core.run.runstate import RunState

    state = RunState()
    state.add({"kind": "start", "t": 0.0, "total_steps": 100, "run_id": "r", "preset": "p"})
    for step in range(1, 31):
        state.add({"kind": "step", "t": float(step), "step": step})
    assert state.eta(30.0, session_t=0.0) == pytest.approx(70.0)
    for step in range(31, 61):
        state.add({"kind": "step", "t": 30.0 + 3 * (step - 30), "step": step})
    assert state.eta(120.0, session_t=0.0) == pytest.approx(120.0)
