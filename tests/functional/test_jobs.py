"""Background work (amptui/jobs): the --detach line, A/B groups and how an A/B ends. Fast, in
process; the processes themselves are tested where they are started (test_dashboard_app's A/B
tests, test_trainer_runs' detach test, test_tune's dashboard test)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from amptui.core.errors import UserError
from amptui.core.run.runs import launch_identity
from amptui.jobs import groups


def test_a_second_ab_of_a_preset_is_refused_while_one_runs(tmp_path):
    here = lambda group: launch_identity(os.getpid())  # noqa: E731 (this process drives it: alive)
    first = groups.create(tmp_path, "quickstart", "quickstart", {"run.max_steps": 4}, None, here)
    assert first.label == "ab1" and first.state == "checking" and first.active
    with pytest.raises(UserError, match="already running .ab1: 0 runs started"):
        groups.create(tmp_path, "quickstart", "quickstart", {}, None, here)
    other = groups.create(tmp_path, "mlp-recipe", "mlp-recipe", {}, "fp32,bf16", here)  # another preset: fine
    assert other.label == "ab2"
    first.update(state="failed", error="variant(s) bf16 did not complete", runs=["r1", "r2"])
    again = groups.find(tmp_path, first.group_id)
    assert (again.state, again.error, again.runs, again.overrides) == \
        ("failed", "variant(s) bf16 did not complete", ["r1", "r2"], {"run.max_steps": 4})
    groups.create(tmp_path, "quickstart", "quickstart", {}, None, here)  # the first has ended


def test_a_group_whose_driver_is_gone_is_not_running_and_a_damaged_file_is_skipped(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    group = groups.create(tmp_path, "quickstart", "quickstart", {}, None, lambda g: launch_identity(gone.pid))
    assert not group.active
    (tmp_path / groups.GROUPS_DIR / "zz-broken.json").write_text("[1, 2")
    assert [g.group_id for g in groups.groups(tmp_path)] == [group.group_id]


def test_a_group_that_could_not_start_its_driver_ends_failed(tmp_path):
    def broken(group):
        raise OSError("no such interpreter")

    with pytest.raises(OSError):
        groups.create(tmp_path, "quickstart", "quickstart", {}, None, broken)
    (found,) = groups.groups(tmp_path)
    assert found.state == "failed" and "no such interpreter" in found.error
