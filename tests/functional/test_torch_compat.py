"""The declared torch range is the tested range: pyproject's lower bound is the torch CI's second
venv runs, and what amptui needs from torch beyond it is detected, not assumed. Runs in both
CI venvs (the older one has no torchvision)."""

from __future__ import annotations

import re

from support.paths import REPO


def declared_lower_bound() -> str:
    text = (REPO / "pyproject.toml").read_text()
    return re.search(r'"torch>=([0-9.]+)"', text).group(1)


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.match(r"[0-9.]+", version).group(0).strip(".").split("."))


def test_the_lower_bound_is_the_torch_ci_tests():
    ci = (REPO / ".ci" / "run").read_text()
    oldest = re.search(r'OLDEST_TORCH="([^"]+)"', ci).group(1)
    assert version_tuple(oldest)[:2] == version_tuple(declared_lower_bound())[:2]


def test_the_installed_torch_is_in_the_declared_range():
    import torch

    assert version_tuple(torch.__version__) >= version_tuple(declared_lower_bound())
