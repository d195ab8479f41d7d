"""log.mlflow with the tracking server down (issue 50 item 8): a refused connection or a server that
accepts and never answers costs set-up and the step loop nothing -- every MLflow call runs on the
mirror's own thread -- is said once, and the run ends as it would without MLflow, its end waiting at
most CLOSE_S for the mirror. Loopback stand-ins (support/webstub.py). The time to the first step
with each is measured in benchmarks/mlflow_down.py."""

from __future__ import annotations

import importlib.util

import pytest
from support.cli import amptui
from support.records import events, only_run
from support.webstub import hanging

# found, not imported: importing MLflow takes seconds, and collection (every xdist worker's) would pay them
pytestmark = pytest.mark.skipif(importlib.util.find_spec("mlflow") is None,
                                reason="mlflow is not installed (pip install 'amptui[mlflow]')")

TINY = ["--set", "run.max_steps=4", "--set", "log.every=2", "--set", "data.train_samples=256",
        "--set", "data.val_samples=64", "--set", "log.mlflow=true"]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_run_with_mlflow_at_a_hanging_server_completes_and_says_so_once(runs_dir):
    with hanging() as url:
        proc = amptui("run", "quickstart", *TINY, env={"MLFLOW_TRACKING_URI": url}, timeout=250)
    assert proc.returncode == 0, proc.stderr
    run_dir = only_run(runs_dir)
    assert [r["status"] for r in events(run_dir) if r["kind"] == "end"] == ["completed"]
    assert [r["step"] for r in events(run_dir) if r["kind"] == "step"] == [2, 4]
    log = (run_dir / "output.log").read_text()  # the trainer's own output
    assert log.count("log.mlflow") == 1 and "did not answer" in log, log[-2000:]
