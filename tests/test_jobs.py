"""Background work (amptui/jobs): the --detach line, A/B groups and how an A/B ends. Fast, in
process; the processes themselves are tested where they are started (test_dashboard_app's A/B
tests, test_trainer_runs' detach test, test_tune's dashboard test)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from amptui.core.errors import UserError
from amptui.core.run.runs import launch_identity
from amptui.jobs import detached, groups
from amptui.jobs.ab import Outcome


def test_the_detach_line_is_one_json_object_on_stdout_and_words_on_stderr(capsys):
    detached.announce("run", "started in the background", run_id="r1", run_dir=Path("/x/r1"), pid=7)
    out, err = capsys.readouterr()
    assert out.count("\n") == 1 and json.loads(out) == {"kind": "run", "run_id": "r1", "run_dir": "/x/r1", "pid": 7}
    assert err == "started in the background\n"
    assert detached.read_announcement("noise\n" + out) == json.loads(out)
    assert detached.read_announcement("r1\n") is None


def test_start_reads_the_line_or_the_refusal(monkeypatch):
    replies = iter([(0, '{"kind": "ab", "group_id": "g1"}\n', "note: float32 here\nstarted\n"), (2, "", "amptui: error: an A/B of x is already running\n"),
                    (0, "not json\n", "")])

    def fake_run(command, **kwargs):
        code, out, err = next(replies)
        return subprocess.CompletedProcess(command, code, stdout=out, stderr=err)

    monkeypatch.setattr("amptui.jobs.detached.subprocess.run", fake_run)
    # with the `note:` lines it wrote for a person (the dashboard shows them)
    assert detached.start(["ab", "x", "--detach"]) == ({"kind": "ab", "group_id": "g1", "notes": ["float32 here"]}, None)
    assert detached.start(["ab", "x", "--detach"]) == (None, "an A/B of x is already running")
    assert detached.start(["ab", "x", "--detach"]) == (None, "amptui ab printed no start line")
    with pytest.raises(ValueError):
        detached.start(["ab", "x"])


def test_amptui_args_put_detach_after_the_preset_and_the_overrides_as_toml():
    assert detached.amptui_args("run", "quickstart", {"amp.autocast": False, "data.name": "random"}, "--runs-dir", "r") \
        == ["run", "quickstart", "--detach", "--runs-dir", "r", "--set", "amp.autocast=false", "--set", 'data.name="random"']


@pytest.mark.parametrize("failed, interrupted, state, error, code", [
    ([], False, "done", "", 0),
    (["bf16"], False, "failed", "variant(s) bf16 did not complete", 1),
    (["fp16", "fp16+scaler"], False, "failed", "variant(s) fp16, fp16+scaler did not complete", 1),
    ([], True, "failed", "interrupted after 1 of 3 variants", 130),
])
def test_an_ab_ends_one_way(failed, interrupted, state, error, code):
    outcome = Outcome(total=3, run_dirs=[Path("a")], failed=failed, interrupted=interrupted)
    assert (outcome.state, outcome.error, outcome.exit_code) == (state, error, code)


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
