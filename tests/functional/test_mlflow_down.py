"""log.mlflow with the tracking server down (issue 50 item 8): a refused connection or a server that
accepts and never answers costs set-up and the step loop nothing -- every MLflow call runs on the
mirror's own thread -- is said once, and the run ends as it would without MLflow, its end waiting at
most CLOSE_S for the mirror. Loopback stand-ins (support/webstub.py). The time to the first step
with each is measured in benchmarks/mlflow_down.py."""

from __future__ import annotations

import importlib.util

import pytest
from support.waits import wait_until
from support.webstub import hanging, refusing_port

from amptui.core.config import values as config
from amptui.core.stream.records import End, Start, Step

# found, not imported: importing MLflow takes seconds, and collection (every xdist worker's) would pay them
pytestmark = pytest.mark.skipif(importlib.util.find_spec("mlflow") is None,
                                reason="mlflow is not installed (pip install 'amptui[mlflow]')")


def a_run_through(sink) -> None:
    sink.note(Start(run_id="r", preset="p", config={"amp": {"dtype": "float16"}}, precision="float16",
                    world_size=1, device={}, torch="", host="", pid=1, total_steps=40))
    for step in range(2, 42, 2):
        sink.step(Step(step=step, epoch=1, loss=1.0, lr=0.1, scale=None, skipped=0, skipped_total=0,
                       samples_per_s=None, step_time_ms=1.0, data_wait_ms=None, mem={}))
    sink.note(End(status="completed", total_time_s=1.0, steps=40))


def test_a_hanging_tracking_server_never_holds_the_caller(monkeypatch, tmp_path, capsys):
    from amptui.telemetry.mirrors import mirror_sinks

    # once the stand-in is gone, the request it held fails at once (no MLflow retries, minutes of them)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    with hanging() as url:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", url)
        [sink] = mirror_sinks(config.build_config({}, {"log.mlflow": True}), tmp_path / "run-1", rank=0)
        # the end's wait for the mirror, short here: the server never answers, so close() always waits it
        # out in full (outbound.CLOSE_S, 30 s, in a real run; the slow test below runs a trainer with it)
        sink.close_wait_s = 0.25
        assert sink.outbox._thread.ident is None  # nothing of MLflow's during the run's set-up
        a_run_through(sink)  # the first step record begins the mirror's thread
        wait_until(lambda: sink.outbox._busy, 60, "the mirror's thread to be held by the server")
        a_run_through(sink)  # while that thread waits on the server: each call only queues
        assert sink.outbox._busy and sink.run_id is None
        sink.close()  # bounded: close_wait_s, then what is left is said
        err = capsys.readouterr().err  # read while the server still holds the request: its end fails it
    assert err.count("log.mlflow") == 1 and "did not answer" in err
    # the mirror's thread ends on that failure here, not saying it during the next test
    sink.outbox._thread.join(60)
    assert not sink.outbox._thread.is_alive()


def test_a_refusing_tracking_server_is_said_once_and_nothing_more_is_tried(monkeypatch, tmp_path, capsys):
    from amptui.telemetry.mirrors import mirror_sinks

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{refusing_port()}")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # MLflow's own retries: minutes, off the loop anyway
    [sink] = mirror_sinks(config.build_config({}, {"log.mlflow": True}), tmp_path / "run-1", rank=0)
    a_run_through(sink)  # the first step record begins the mirror's thread
    wait_until(lambda: sink.broken, 120, "the refusal")
    a_run_through(sink)  # nothing more is tried
    sink.close()
    err = capsys.readouterr().err
    assert err.count("log.mlflow") == 1 and "training goes on" in err
