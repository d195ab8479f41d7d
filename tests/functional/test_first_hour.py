"""Issue 45, a newcomer's first hour: the install note for a CPU-only torch (README, doctor, the
first run), ... Each test asserts what a newcomer reads."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import torch
from support.paths import REPO

from amptui.core.config import presets
from amptui.core.prepare.preflight import GPU_DRIVER_PATHS
from amptui.jobs import launch
from amptui.machine import cputorch

CPU_LINE = "pip install --force-reinstall torch torchvision --index-url https://download.pytorch.org/whl/cpu"
no_gpu_driver = pytest.mark.skipif(any(os.path.exists(p) for p in GPU_DRIVER_PATHS),
                                   reason="asserts what a machine without a CUDA GPU is told")


# --- install: a CPU-only torch ------------------------------------------------------------------

def test_the_readme_gives_the_cpu_line_before_its_first_picture_and_keeps_the_first_command():
    readme = (REPO / "README.md").read_text()
    opening = readme[:readme.index("![")]
    assert "```bash\npython3 -m venv .venv && . .venv/bin/activate && pip install -e . && amptui\n```" in opening
    assert CPU_LINE in opening and opening.index(CPU_LINE) > opening.index("pip install -e . && amptui")


@pytest.fixture
def note_unsaid(isolated):
    """The state folder as on a machine amptui never ran on (conftest's `isolated` counts the note as said)."""
    (Path(os.environ["XDG_STATE_HOME"]) / "amptui" / cputorch.SAID).unlink()


@no_gpu_driver
def test_the_first_run_says_it_once(note_unsaid):
    expected = bool(torch.version.cuda)  # PyPI's Linux wheel: a CUDA build; the CPU wheel: nothing to say
    preset = presets.find_preset("quickstart")
    first: list[str] = []
    launch.resolve_config(preset, {}, notes=first)
    assert any(CPU_LINE in n for n in first) == expected, first
    second: list[str] = []
    launch.resolve_config(preset, {}, notes=second)
    assert not any(CPU_LINE in n for n in second)


# --- help: every variant, from the precision modes ----------------------------------------------

def _names_in(help_text: str) -> set[str]:
    return set(re.findall(r"[\w.+-]+", " ".join(help_text.split())))


def test_ab_help_lists_every_variant_it_takes_float8_included(cli):
    from amptui.core.config.variants import known_variants

    said = _names_in(cli("ab", "--help").stdout)
    assert {"fp8", "fp8-rowwise", "mxfp8"} <= said
    assert set(known_variants()) - said == set()


def test_a_new_precision_mode_is_in_the_help_the_day_it_is_added(cli, monkeypatch):
    from amptui.core import modes

    class Fake(modes.PrecisionMode):  # stands in for a mode amptui does not have yet
        name = "fake"

        def variants(self):
            return ["fake8"]

        def parse(self, variant, base):
            return None

        def short(self, p):
            return "fake8"

        def words(self, p):
            return "fake8"

    monkeypatch.setattr(modes, "MODES", [*modes.MODES, Fake()])
    assert "fake8" in _names_in(cli("ab", "--help").stdout)


def test_tune_help_names_the_precisions_it_tries(cli):
    from amptui.core.config.variants import known_variants
    from amptui.tune.plan import FLOAT8_CANDIDATE, PRECISIONS

    said = _names_in(cli("tune", "--help").stdout)
    tried = {"fp32", *PRECISIONS, FLOAT8_CANDIDATE}
    assert tried <= said and tried <= set(known_variants())
