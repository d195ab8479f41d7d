"""Issue 51's small items, each as a user meets it: short dtype names in --set, a did-you-mean for a
mistyped preset, the "float16 is slow here" note for a script's float16 on a CPU. In process."""

from __future__ import annotations

import pytest
from support.cli import one_clear_line

from amptui.core.config import presets
from amptui.core.config import values as config
from amptui.core.errors import UserError


@pytest.mark.parametrize("key, short, full", [("amp.dtype", "bf16", "bfloat16"), ("amp.dtype", "fp16", "float16"),
                                              ("amp.reduce_dtype", "fp32", "float32")])
def test_set_takes_the_short_dtype_names_every_table_shows(key, short, full):
    cfg = config.build_config({}, config.parse_set([f"{key}={short}"]))
    assert getattr(cfg.amp, key.partition(".")[2]) == full


def test_a_short_name_that_is_no_dtype_is_still_refused_naming_the_key(cli, runs_dir):
    line = one_clear_line(cli("run", "quickstart", "--set", "amp.dtype=bf8", "--runs-dir", str(runs_dir)))
    assert "amp.dtype must be one of" in line and "'bf8'" in line


def test_a_mistyped_preset_gets_a_did_you_mean():
    with pytest.raises(UserError, match="no preset named 'quickstrat': did you mean 'quickstart'"):
        presets.find_preset("quickstrat")
    with pytest.raises(UserError) as far:
        presets.find_preset("zzzzzz")
    assert "did you mean" not in str(far.value) and "known: quickstart" in str(far.value)


def test_a_scripts_float16_on_a_cpu_gets_the_slow_here_note(runs_dir):
    from support.scripthooks import record_script

    _, recs, error = record_script(runs_dir, "plain_fp32.py", "--dtype", "float16", "--steps", "2", log_every=1)
    assert error is None
    said = {r.get("code"): r["message"] for r in recs if r["kind"] == "warning"}
    assert "slow_on_cpu" in said and "float16 autocast on the CPU" in said["slow_on_cpu"], said
    assert "amp.autocast" not in said["slow_on_cpu"]  # a script has no preset keys: the loop's words
    _, recs, _ = record_script(runs_dir, "plain_fp32.py", "--steps", "2", log_every=1)
    assert not [r for r in recs if r.get("code") == "slow_on_cpu"]  # float32: nothing to say


@pytest.fixture(scope="module")
def state_outside_tests():
    """What a module fixture (one that starts real runs before any test's `isolated` applies) writes to."""
    import os

    return os.environ.get("XDG_STATE_HOME"), os.environ.get("XDG_CONFIG_HOME")


def test_the_suite_never_writes_into_the_users_state_folder(state_outside_tests):
    """Issue 51 (small): module fixtures' runs recorded their folders in the user's real
    ~/.local/state/amptui/runs-folders.json; outside a test's own folders the session has its own."""
    import os
    from pathlib import Path

    home = Path(os.path.expanduser("~")).resolve()
    for folder in state_outside_tests:
        where = Path(folder or "~").expanduser().resolve()
        assert folder and not where.is_relative_to(home / ".local") and not where.is_relative_to(home / ".config"), folder
