"""The repository, its package, and the canned runs, presets and event files under tests/fixtures, and the
training scripts under tests/scripts: named here so a test finds them wherever its tier's folder is."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
PACKAGE = REPO / "amptui"
FIXTURES = REPO / "tests" / "fixtures"
SCRIPTS = REPO / "tests" / "scripts"
