"""The declared torch range is the tested range: pyproject's lower bound is the torch CI's second
venv runs, and what amptui needs from torch beyond it is detected, not assumed. Runs in both
CI venvs (the older one has no torchvision)."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.slow
def test_small_models_and_synthetic_data_need_no_torchvision():
    """Where torchvision cannot load (the older torch's venv), the presets on amptui's own models
    and data still build: torchvision is imported only by the models and datasets that use it."""
    code = (
        "import sys; sys.modules['torchvision'] = None  # import torchvision -> ImportError\n"
        "from amptui.core.config import values as config\n"
        "from amptui.core.config.presets import find_preset\n"
        "import torch\nfrom amptui.trainer.data import build_train_val\n"
        "from amptui.trainer.models import build_model\n"
        "for name in ('quickstart', 'scaler-lab', 'mlp-recipe'):\n"
        "    cfg = find_preset(name).config({'run.device': 'cpu'})\n"
        "    build_model(cfg.model)\n"
        "    if cfg.data.name == 'synthetic':\n"
        "        build_train_val(cfg, 0, 1, torch.device('cpu'))\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
