"""Cancelling a whole A/B (issue 36): after `S` in the dashboard or `amptui stop GROUP`, no further
variant starts and the group ends `stopped`."""

from __future__ import annotations

import os
from pathlib import Path

from amptui.core.config import presets
from amptui.core.run.runs import launch_identity
from amptui.jobs import ab as abjob
from amptui.jobs import groups, launch


def _group(root: Path) -> groups.Group:
    return groups.create(root, "quickstart", "quickstart", {}, None, lambda g: launch_identity(os.getpid()))


def test_a_cancelled_ab_starts_no_further_variant_and_ends_stopped(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    group = _group(root)
    preset = presets.find_preset("quickstart")
    started: list[str] = []

    class Proc:
        pid = os.getpid()

    monkeypatch.setattr(launch, "start", lambda run_dir, **kw: started.append(run_dir.name) or Proc())

    def follow(run_dir, proc, index, name) -> int:
        groups.cancel(root, groups.find(root, group.group_id))  # cancelled while the first variant runs
        return 1  # it ended stopped: not completed

    variants = [("fp32", {"amp.autocast": False}), ("bf16", {"amp.dtype": "bfloat16"})]
    outcome = abjob.run_variants(group, preset, {"run.max_steps": 2}, variants, root, follow)
    assert len(started) == 1 and outcome.failed == []
    saved = groups.find(root, group.group_id)
    assert saved.state == "stopped" and "cancelled after 1 of 2" in saved.error
    assert outcome.exit_code == 130


def test_amptui_stop_takes_an_ab_label_and_cancels_it(cli, tmp_path):
    root = tmp_path / "runs"
    group = _group(root)
    group.update(state="running", variants=["fp32", "bf16"])
    proc = cli("stop", "ab1", "--runs-dir", str(root))
    assert proc.returncode == 0, proc.stderr
    assert "A/B ab1 of quickstart: cancelled" in proc.stdout
    assert groups.find(root, group.group_id).cancel_requested
