"""The preset schema: defaults, validation, `--set` parsing and the built-in presets."""

import subprocess
import sys

import pytest
from support.paths import REPO


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_mypy_names_a_typo_in_a_config_key(tmp_path):
    """Code reading the config is checked: a misspelt key fails `mypy`, not a run an hour in."""
    (tmp_path / "mypy.ini").write_text(f"[mypy]\nmypy_path = {REPO}\nfollow_imports = silent\n"
                                       "ignore_missing_imports = true\ncheck_untyped_defs = true\n")
    (tmp_path / "reads.py").write_text("from amptui.core.config.values import build_config\n\n\ndef f():\n"
                                       "    cfg = build_config()\n    return cfg.amp.dtype, cfg.optim.lrr\n")
    proc = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(tmp_path / "mypy.ini"),
                           "--cache-dir", str(tmp_path / "cache"), str(tmp_path / "reads.py")],
                          capture_output=True, text=True, timeout=540, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert '"OptimConfig" has no attribute "lrr"' in proc.stdout, proc.stdout
    assert proc.stdout.count("error:") == 1, proc.stdout  # cfg.amp.dtype is fine
