"""A run's end waits for its mirrors (MLflow, the TrainJob status, notifications, TensorBoard) all at
once, under one deadline (outbound.CLOSE_S, 30 s; here set to 0.5 s so the test is quick: the hanging
mirrors wait it out in full), not one after another (each hanging server held the end for its own
wait: ~77 s in all). Each mirror that did not finish is said once, by name; a mirror whose server
answers delivers every message, in order, while the others hang.
Loopback stand-ins (support/webstub.py): servers that accept and never answer."""

from __future__ import annotations

import contextlib
import time

import pytest
from support.waits import wait_until
from support.webstub import hanging, recording

from amptui.core.config import values as config
from amptui.core.stream.records import Start, Step
from amptui.telemetry import outbound
from amptui.telemetry.mirrors import mirror_sinks
from amptui.telemetry.notify import Notifier
from amptui.telemetry.recorder import Recorder
from amptui.telemetry.trainjob import TrainJobStatus


@pytest.fixture(autouse=True)
def mlflow_imported():
    """mlflow imported before the test starts its mirrors: the MLflow mirror imports it on its own thread,
    and an import still under way when the test ends would put mlflow back into sys.modules under a later
    test that hides it. Not at collection: that cost every worker a second."""
    pytest.importorskip("mlflow", reason="mlflow is not installed (pip install 'amptui[mlflow]')")

DEADLINE_S = 0.5  # far below each hanging mirror's own wait (5 s and more): they are late


def records(sink) -> None:
    sink.note(Start(run_id="r", preset="p", config={"amp": {"dtype": "float16"}}, precision="float16",
                    world_size=1, device={}, torch="", host="", pid=1, total_steps=40))
    for step in (2, 4):
        sink.step(Step(step=step, epoch=1, loss=1.0, lr=0.1, scale=None, skipped=0, skipped_total=0,
                       samples_per_s=None, step_time_ms=1.0, data_wait_ms=None, mem={}))


def test_the_end_waits_for_every_hanging_mirror_at_once_and_names_each_once(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(outbound, "CLOSE_S", DEADLINE_S)
    with contextlib.ExitStack() as stack, recording() as answering:
        mlflow_url, hook_url, status_url = (stack.enter_context(hanging()) for _ in range(3))
        monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_url)
        monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # MLflow's own retries: minutes after the test
        monkeypatch.setenv("KUBEFLOW_TRAINER_STATUS_URL", status_url.replace("http://", "https://") + "/status")
        cfg = config.build_config({}, {"log.mlflow": True, "log.tensorboard": True, "log.notify_url": hook_url})
        recorder = Recorder(None)
        recorder.sinks = [*mirror_sinks(cfg, tmp_path / "run-1", rank=0), Notifier(answering.url, "run-2")]
        names = {type(sink).__name__ for sink in recorder.sinks}
        assert names == {"TensorBoardScalars", "MLflowSeries", "Notifier", "TrainJobStatus"}, names
        for sink in recorder.sinks:
            records(sink)
            if isinstance(sink, Notifier):
                for i in range(8):
                    sink.send(f"message {i}")
        held = [s for s in recorder.sinks if isinstance(s, TrainJobStatus) or type(s).__name__ == "MLflowSeries"
                or (isinstance(s, Notifier) and s.url == hook_url)]
        wait_until(lambda: all(s.outbox._busy for s in held), 120, "each hanging server to hold its mirror")
        # the answering mirror is not held by the hanging ones (each its own thread): all 8 arrive
        # before the end, whose deadline then only the hanging mirrors wait out
        wait_until(lambda: len(answering.requests) == 8, 120, lambda: f"8 messages, not {len(answering.requests)}")
        began = time.monotonic()
        recorder.close()
        took = time.monotonic() - began
    for sink in held:  # the servers are gone: each mirror's thread ends here, not saying its failure in a later test
        sink.outbox._thread.join(60)
    err = capsys.readouterr().err
    late = [line for line in err.splitlines() if "did not answer" in line]
    assert sorted(w for line in late for w in ("log.mlflow", "TrainJob", "log.notify_url") if w in line) == \
        ["TrainJob", "log.mlflow", "log.notify_url"], late  # each hanging mirror said once, by name
    assert all(f"within {DEADLINE_S:g} s" in line for line in late), late  # one deadline, not each its own
    assert took < 20, took  # one after another: 30 + 11 + 6 s
    assert [r["body"].decode() for r in answering.requests] == [f"amptui run-2: message {i}" for i in range(8)]
    assert (tmp_path / "run-1" / "tensorboard").is_dir()
