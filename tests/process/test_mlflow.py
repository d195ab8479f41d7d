"""`log.mlflow = true`: the step series, epoch figures, numerics summaries, precision and config of
a run land in the MLflow tracking store MLFLOW_TRACKING_URI names (a sqlite file here), from
amptui's trainer and from a script under `amptui run --script`; without MLflow, one line names the
extra."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import amptui
from support.paths import SCRIPTS
from support.records import events, only_run

TINY = ["--set", "run.max_steps=6", "--set", "log.every=2", "--set", "data.train_samples=256",
        "--set", "data.val_samples=64", "--set", "run.epochs=2"]
SCRIPT = SCRIPTS / "float32_args.py"


def tracking(tmp_path: Path) -> tuple[str, object]:
    pytest.importorskip("mlflow", reason="mlflow is not installed (pip install 'amptui[mlflow]')")
    pytest.importorskip("sqlalchemy", reason="a sqlite tracking store needs sqlalchemy")
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    return uri, MlflowClient(uri)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_quickstart_run_leaves_every_logged_step_in_mlflow(runs_dir, tmp_path):
    uri, client = tracking(tmp_path)
    amptui("run", "quickstart", "--set", "log.mlflow=true", "--set", "amp.dtype=float16",
           "--set", "amp.grad_scaler=true", "--set", "numerics.every=2", *TINY,
           env={"MLFLOW_TRACKING_URI": uri}, check=True, timeout=200)
    run_dir = only_run(runs_dir)
    steps = [r for r in events(run_dir) if r["kind"] == "step"]
    [run] = client.search_runs(["0"])
    assert run.info.run_name == run_dir.name and run.info.status == "FINISHED"
    for metric, field in (("loss", "loss"), ("loss_scale", "scale"), ("lr", "lr"), ("skipped_total", "skipped_total")):
        history = sorted(client.get_metric_history(run.info.run_id, metric), key=lambda m: m.step)
        assert [(m.step, pytest.approx(m.value)) for m in history] == [(s["step"], s[field]) for s in steps], metric
    assert {"samples_per_s", "memory_rss_mib", "epoch_train_loss", "numerics_min_headroom_log2"} <= set(run.data.metrics)
    assert run.data.params["amp.dtype"] == "float16" and run.data.params["run.max_steps"] == "6"
    assert run.data.tags["amptui_run_id"] == run_dir.name and "float16" in run.data.tags["amptui_precision"]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_script_run_logs_to_mlflow_too(runs_dir, tmp_path):
    uri, client = tracking(tmp_path)
    amptui("run", "--script", str(SCRIPT), "--set", "log.mlflow=true", "--set", "log.every=2", "--", "--steps", "4",
           env={"MLFLOW_TRACKING_URI": uri}, check=True, timeout=200)
    run_dir = only_run(runs_dir)
    [run] = client.search_runs(["0"])
    history = client.get_metric_history(run.info.run_id, "loss")
    assert sorted(m.step for m in history) == [s["step"] for s in events(run_dir) if s["kind"] == "step"] == [2, 4]
