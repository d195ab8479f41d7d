"""`log.mlflow = true`: the step series, epoch figures, numerics summaries, precision and config of
a run land in the MLflow tracking store MLFLOW_TRACKING_URI names (a sqlite file here), from
amptui's trainer and from a script under `amptui run --script`; without MLflow, one line names the
extra."""

from __future__ import annotations

import sys

import pytest
from support.cli import one_clear_line

from amptui.core.config import values as config
from amptui.core.errors import UserError


def test_without_mlflow_the_run_is_refused_in_one_line_naming_the_extra(cli, monkeypatch, runs_dir):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # importlib.util.find_spec says None: not installed
    line = one_clear_line(cli("run", "quickstart", "--set", "log.mlflow=true"))
    assert "pip install 'amptui[mlflow]'" in line and "log.mlflow" in line
    assert not runs_dir.exists()


def test_a_monitor_without_mlflow_says_so_once_and_trains_on(monkeypatch, tmp_path, capsys):
    from amptui.telemetry.mirrors import mirror_sinks

    monkeypatch.setitem(sys.modules, "mlflow", None)
    monkeypatch.setitem(sys.modules, "mlflow.tracking", None)
    cfg = config.build_config({}, {"log.mlflow": True})
    assert mirror_sinks(cfg, tmp_path, rank=0) == [] and mirror_sinks(cfg, tmp_path, rank=1) == []
    err = capsys.readouterr().err
    assert err.count("pip install 'amptui[mlflow]'") == 1


def test_the_schema_has_log_mlflow_and_a_script_may_set_it():
    from amptui.core.config.scriptsets import check_script_sets

    assert config.build_config({}, {"log.mlflow": True}).log.mlflow is True
    check_script_sets({"log.mlflow": True})  # no UserError
    with pytest.raises(UserError, match="log.mlflow"):
        config.build_config({}, {"log.mlflow": "yes"})
