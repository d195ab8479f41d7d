"""A script run's precision is what its loop was seen to do, never a config default: before the
loop's first step (or with the hooks off, for good) config.toml says no precision and every reader
(`amptui runs` table and JSON, the dashboard's run list, `compare`) says "not seen"; once the
hooks see the first step it is the loop's ("fp16+scaler"). And `amptui run PRESET --script` is
refused: a preset's keys would be silently ignored. The slow tests start the real command on
tests/scripts/gated.py (never imports amptui), which waits for a file before its first step."""

from __future__ import annotations

import json

import pytest
from support.cli import amptui, started
from support.paths import SCRIPTS
from support.records import only_run
from support.waits import wait_until

from amptui.core.config import values as cfgmod
from amptui.core.config.precision import UNSEEN

pytestmark = pytest.mark.timeout(180)
GATED = SCRIPTS / "gated.py"


def listed(cli) -> dict[str, dict]:
    return {r["run_id"]: r for r in json.loads(cli("runs", "--format", "json", check=True).stdout)}


# --- real processes -------------------------------------------------------------------------------

def wait_listed(run_id: str, done, timeout: float = 90) -> dict:
    def listed() -> dict | None:
        found = {r["run_id"]: r for r in json.loads(amptui("runs", "--format", "json", check=True).stdout)}.get(run_id)
        return found if found and done(found) else None

    return wait_until(listed, timeout, f"{run_id} listed as expected ({timeout:.0f} s)", step=0.3)


@pytest.mark.slow
def test_a_script_waiting_before_its_first_step_lists_not_seen_then_its_loops_precision(runs_dir, isolated):
    gate = isolated / "gate"
    run_id = started(amptui("run", "--detach", "--script", str(GATED), "--", str(gate), check=True).stdout)["run_id"]
    run_dir = runs_dir / run_id
    try:
        waiting = wait_listed(run_id, lambda r: r["status"] == "running")
        assert (waiting["precision"], waiting["precision_words"]) == ("", ""), waiting
        row = next(line for line in amptui("runs", check=True).stdout.splitlines() if line.startswith(run_id))
        assert UNSEEN in row and "bf16" not in row, row
        assert "amp" not in cfgmod.read_toml(run_dir / "config.toml")
    finally:
        gate.write_text("go")
    done = wait_listed(run_id, lambda r: r["status"] != "running")
    assert done["status"] == "completed" and done["step"] == 3, done
    assert (done["precision"], done["precision_words"]) == ("fp16+scaler", "autocast float16 + GradScaler")
    assert cfgmod.read_toml(run_dir / "config.toml")["amp"]["dtype"] == "float16"


@pytest.mark.slow
def test_with_the_hooks_off_the_precision_stays_not_seen(runs_dir, isolated):
    (isolated / "gate").write_text("open")
    amptui("run", "--script", str(GATED), "--", str(isolated / "gate"), env={"AMPTUI_SCRIPT_HOOKS": "0"}, check=True)
    run_dir = only_run(runs_dir)
    [info] = json.loads(amptui("runs", "--format", "json", check=True).stdout)
    assert info["status"] == "completed" and (info["precision"], info["precision_words"]) == ("", ""), info
    assert UNSEEN in amptui("runs", check=True).stdout
    assert "amp" not in cfgmod.read_toml(run_dir / "config.toml")
