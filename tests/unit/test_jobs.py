"""Background work (amptui/jobs): the --detach line, A/B groups and how an A/B ends. Fast, in
process; the processes themselves are tested where they are started (test_dashboard_app's A/B
tests, test_trainer_runs' detach test, test_tune's dashboard test)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from amptui.jobs import detached
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
