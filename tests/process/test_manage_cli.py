"""Housekeeping from the command line: `amptui presets delete`, `amptui runs delete` and `amptui
export`. A mistake is one line, exit 2, nothing changed; saved presets and run folders are data
(no link followed out of them); a running run is never deleted."""

from __future__ import annotations

import pytest
from support.canned import canned_run

pytestmark = pytest.mark.timeout(60)


# --- runs delete -------------------------------------------------------------------------------------

@pytest.fixture
def three_runs(runs_dir):
    return [canned_run(runs_dir, f"20261124-0600{i}0-canned-000{i}", ms_per_step=10.0, batch=8, peak=2**20, acc=0.5)
            for i in range(3)]


@pytest.mark.slow
def test_a_shortened_id_is_asked_about_on_a_terminal_naming_the_full_id(three_runs, runs_dir):
    from support.adversarial_runops import answer_on_terminal

    a, b, _ = three_runs
    code, drawn = answer_on_terminal(["runs", "delete", a.name, "0001", "--runs-dir", str(runs_dir)], "n")
    assert code == 2 and f"delete 2 runs: {a.name}, {b.name}? ('0001' names {b.name}) [y/N]" in drawn, drawn
    assert "nothing deleted" in drawn and a.is_dir() and b.is_dir()
    code, drawn = answer_on_terminal(["runs", "delete", "0001", "--runs-dir", str(runs_dir)], "y")
    assert code == 0 and f"delete run {b.name}?" in drawn and f"deleted run {b.name}" in drawn, drawn
    assert a.is_dir() and not b.exists()
