"""`amptui ab --interleave` (issue 43): the variants' trainers run side by side and take turns, one step
record at a time, so their timed windows alternate and a drift of the machine falls on all alike.
The turn file's rules in process; the A/B itself with real trainers (slow); refusals in one line."""

from __future__ import annotations

import json
import os

import pytest
from support.paths import SCRIPTS

from amptui.core.run.runs import list_runs


@pytest.mark.slow
def test_a_script_ab_takes_turns_too(cli, runs_dir):
    """Issue 51 item 2: script users could not --interleave; amptui's hooks now hand the turn on at each
    step record of the script's own loop, so its variants' windows alternate as a preset's do."""

    script = SCRIPTS / "plain_fp32.py"
    done = cli("ab", "--script", str(script), "--variants", "fp32,bf16", "--interleave", "--set", "log.every=2",
               "--", "--steps", "8")
    assert done.returncode == 0, done.stderr
    assert "speed-up from windows measured alternately (ab --interleave): " in done.stdout
    runs = list_runs(runs_dir)
    assert [info.status for info in runs] == ["completed", "completed"]
    steps = []
    for variant, info in enumerate(runs):
        recs = [json.loads(line) for line in (info.path / "events.jsonl").read_text().splitlines()]
        assert recs[0]["kind"] == "start" and recs[0]["interleaved"] is True
        steps += [(rec["t"], variant) for rec in recs if rec.get("kind") == "step"]
    order = [variant for _, variant in sorted(steps)]
    assert len(order) == 8 and order in ([0, 1] * 4, [1, 0] * 4), order  # never two windows of one in a row


TINY = ["--set", "model.width=32", "--set", "data.batch_size=16", "--set", "data.train_samples=256",
        "--set", "run.max_steps=12", "--set", "log.every=2"]


@pytest.mark.slow
def test_an_interleaved_ab_alternates_the_variants_windows_and_computes_the_speedup(cli, runs_dir):
    done = cli("ab", "mlp-recipe", "--interleave", "--variants", "fp32,bf16", *TINY)
    assert done.returncode == 0, done.stderr
    assert "speed-up from windows measured alternately (ab --interleave): " in done.stdout
    runs = list_runs(runs_dir)
    assert [info.status for info in runs] == ["completed", "completed"]
    steps, timed_s, times = [], 0.0, []  # (time, variant) of every step record; the windows' timed seconds
    for variant, info in enumerate(runs):
        for line in (info.path / "events.jsonl").read_text().splitlines():
            rec = json.loads(line)
            times.append(rec["t"])
            if rec.get("kind") == "step":
                steps.append((rec["t"], variant))
                timed_s += rec["step_time_ms"] / 1000 * 2  # log.every = 2 steps a window
    # the turns spent waiting are off the step clocks: both runs' timed windows fit in the time
    # both took (counted, the waiting would double it)
    assert timed_s <= max(times) - min(times)
    order = [variant for _, variant in sorted(steps)]
    assert len(order) == 12  # 6 windows each, one record per turn
    assert order in ([0, 1] * 6, [1, 0] * 6), order  # strictly in turn: never two windows of one variant in a row
    rows = json.loads(cli("compare", "--last-ab", "--format", "json", check=True).stdout)
    assert [r["precision"].split()[-1] for r in rows] == ["fp32", "bfloat16"]  # the A/B's order: fp32 first
    assert order[0] == [info.run_id for info in runs].index(rows[0]["run_id"])  # ... and first to train
    assert rows[0]["speedup"] == 1.0 and rows[1]["speedup"] > 0
    later = cli("compare", "--last-ab", check=True).stdout  # recorded in the runs: compare says it too
    assert "speed-up from windows measured alternately (ab --interleave): " in later


@pytest.mark.slow
def test_an_interleaved_variant_that_fails_hands_on_its_turn_and_the_ab_ends(cli, runs_dir):
    """A trainer that raises while holding the turn retires itself: the other variant trains on,
    and the A/B ends naming both failures instead of waiting for ever (pytest-timeout would say so)."""
    done = cli("ab", "mlp-recipe", "--interleave", "--variants", "fp32,bf16", *TINY, "--set", "debug.fail_at_step=3")
    assert done.returncode == 1
    assert "variant(s) fp32, bf16 failed: " in done.stderr
    runs = list_runs(runs_dir)
    assert sorted(info.status for info in runs) == ["failed", "failed"]
    assert [info.step for info in runs] == [3, 3]  # each failed once step 3, in its second turn, was done


def _planted_group(runs_dir):
    """A group made as `ab --detach` makes it, for its driver (`ab --group ID`) to run here."""
    from amptui.core.run.runs import launch_identity
    from amptui.jobs import groups

    return groups.create(runs_dir, "mlp-recipe", "mlp-recipe", {}, "fp32,bf16", lambda g: launch_identity(os.getpid()))


@pytest.mark.slow
@pytest.mark.parametrize("plant", ["link", "fifo"])
def test_an_interleaved_ab_with_a_planted_turn_file_leaves_its_target_untouched(cli, runs_dir, tmp_path, plant):
    """Issue 50.5/50.9 end to end: a link (to a victim file) or a FIFO planted as the group's turn file
    before its driver starts: the victim keeps its bytes, the A/B completes with no traceback."""
    group = _planted_group(runs_dir)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    planted = group.path.with_suffix(".turn")
    if plant == "link":
        planted.symlink_to(victim)
    else:
        os.mkfifo(planted)
    done = cli("ab", "mlp-recipe", "--interleave", "--variants", "fp32,bf16", *TINY, "--group", group.group_id)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert victim.read_text() == "precious\n"
    assert [info.status for info in list_runs(runs_dir)] == ["completed", "completed"]
