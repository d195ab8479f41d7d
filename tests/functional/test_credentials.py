"""The one credential path (telemetry/outbound.py) as the Kubeflow TrainJob status uses it: the
bearer token travels over https only (an http:// status URL is one warning and nothing is sent), is
never sent on after a redirect (an https stub's 302 to an http:// address of another origin: that
address receives nothing), is checked before use (a token file with an interior newline: one
warning, no header sent, no part of the token in any message or the run's output.log), and a CA
variable naming a missing or garbage file is one warning naming the variable and the file, never a
failed run. Loopback servers only (support/webstub.py), each bounded."""

from __future__ import annotations

import pytest
from support.webstub import STAND_IN_TOKEN, recording, trainjob_env

from amptui.core.stream.records import End, Start, Step
from amptui.telemetry import trainjob

TOKEN = STAND_IN_TOKEN


def post_a_run(sink) -> None:
    sink.note(Start(run_id="r", preset="p", config={}, precision="", world_size=1, device={}, torch="", host="",
                    pid=1, total_steps=4))
    sink.step(Step(step=2, epoch=1, loss=1.0, lr=0.1, scale=None, skipped=0, skipped_total=0, samples_per_s=None,
                   step_time_ms=1.0, data_wait_ms=None, mem={}))
    sink.note(End(status="completed", total_time_s=1.0, steps=4))
    sink.close()


def test_an_http_status_url_is_refused_in_one_line_and_nothing_is_sent(tls, capsys):
    ca, _, token = tls
    with recording() as plain:
        assert trainjob.from_env(trainjob_env(plain.url + "/status", token, ca)) is None
    assert plain.requests == []
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and trainjob.URL_ENV in err and "https" in err and TOKEN not in err


def test_a_redirect_to_another_origin_over_http_receives_no_token(tls, capsys):
    ca, server, token = tls
    with recording() as elsewhere, recording(status=302, location=None, context=server) as https_stub:
        https_stub.location = elsewhere.url + "/steal"
        sink = trainjob.from_env(trainjob_env(https_stub.url + "/status", token, ca))
        assert sink is not None
        post_a_run(sink)
    assert https_stub.requests and elsewhere.requests == []  # asked, and the redirect not followed
    err = capsys.readouterr().err
    assert err.count("posting the TrainJob status") == 1 and "302" in err and "not followed" in err
    assert TOKEN not in err and "/steal" not in err


def test_a_token_with_an_interior_newline_is_refused_and_never_shown(tls, capsys):
    ca, server, token = tls
    token.write_text("eyJ-first-half\nX-Injected: second-half\n")
    with recording(context=server) as https_stub:
        post_a_run(trainjob.from_env(trainjob_env(https_stub.url + "/status", token, ca)))
    assert https_stub.requests == []
    err = capsys.readouterr().err
    assert err.count("posting the TrainJob status") == 1 and trainjob.TOKEN_ENV in err and str(token) in err
    assert "first-half" not in err and "second-half" not in err


@pytest.mark.parametrize("ca_kind", ["missing", "garbage"])
def test_a_bad_ca_variable_is_one_warning_naming_variable_and_file(tls, tmp_path, capsys, ca_kind):
    _, server, token = tls
    ca = tmp_path / "no-such-ca.crt"
    if ca_kind == "garbage":
        ca = tmp_path / "garbage.crt"
        ca.write_text("not a certificate\n")
    with recording(context=server) as https_stub:
        assert trainjob.from_env(trainjob_env(https_stub.url + "/status", token, ca)) is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and trainjob.CA_ENV in err and str(ca) in err and "training goes on" in err


def test_nothing_else_in_amptui_opens_a_connection_of_its_own():
    """One way out (telemetry/outbound.py): a new sender that opens its own connection would skip
    the https-only, no-redirect and safe-message rules. MLflow's client is MLflow's own."""
    import re
    from pathlib import Path

    import amptui

    root = Path(amptui.__file__).parent
    pattern = re.compile(r"urlopen|urllib\.request|http\.client|^\s*import requests|ClientSession\(|create_connection\(",
                         re.M)
    found = [str(p.relative_to(root)) for p in root.rglob("*.py")
             if p.name != "outbound.py" and pattern.search(p.read_text())]
    assert found == []
