"""Inside a stand-in Kubeflow TrainJob -- an HTTPS stub on 127.0.0.1 whose certificate a throwaway
CA signed, a token file and a CA file, named by the variables the Trainer's status plugin sets --
a quickstart run's rank 0 posts its trainerStatus (progress, remaining time, AMP metrics) with the
bearer token; without the variables nothing posts; a failing endpoint is one warning."""

from __future__ import annotations

import ssl

from support.webstub import TRAINJOB_TOKEN

from amptui.core.config import values as config
from amptui.telemetry import trainjob
from amptui.telemetry.mirrors import mirror_sinks

TOKEN = TRAINJOB_TOKEN


def test_without_the_variables_nothing_posts(tmp_path, monkeypatch):
    for name in (trainjob.URL_ENV, trainjob.TOKEN_ENV, trainjob.CA_ENV):
        monkeypatch.delenv(name, raising=False)
    assert trainjob.from_env() is None
    assert mirror_sinks(config.build_config({}, {}), tmp_path, rank=0) == []


def test_only_rank_0_posts(trainjob_stub, tmp_path, monkeypatch):
    env, _ = trainjob_stub
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert mirror_sinks(config.build_config({}, {}), tmp_path, rank=1) == []
    [sink] = mirror_sinks(config.build_config({}, {}), tmp_path, rank=0)
    sink.close()


def test_a_failing_endpoint_is_one_warning_and_never_an_error(tmp_path, capsys):
    from amptui.core.stream.records import End, Start, Step

    sink = trainjob.TrainJobStatus("https://127.0.0.1:9/status", str(tmp_path / "no-token"), ssl.create_default_context())
    sink.note(Start(run_id="r", preset="p", config={}, precision="", world_size=1, device={}, torch="", host="",
                    pid=1, total_steps=10))
    for step in (2, 4):
        sink.step(Step(step=step, epoch=1, loss=1.0, lr=0.1, scale=None, skipped=0, skipped_total=0,
                       samples_per_s=None, step_time_ms=1.0, data_wait_ms=None, mem={}))
    sink.note(End(status="completed", total_time_s=1.0, steps=4))
    sink.close()
    err = capsys.readouterr().err
    assert err.count("posting the TrainJob status") == 1 and "training goes on" in err
