"""The one credential path (telemetry/outbound.py) as the Kubeflow TrainJob status uses it: the
bearer token travels over https only (an http:// status URL is one warning and nothing is sent), is
never sent on after a redirect (an https stub's 302 to an http:// address of another origin: that
address receives nothing), is checked before use (a token file with an interior newline: one
warning, no header sent, no part of the token in any message or the run's output.log), and a CA
variable naming a missing or garbage file is one warning naming the variable and the file, never a
failed run. Loopback servers only (support/webstub.py), each bounded."""

from __future__ import annotations

import pytest
from support.cli import amptui
from support.records import events, only_run
from support.waits import wait_until
from support.webstub import STAND_IN_TOKEN, recording, trainjob_env

from amptui.telemetry import trainjob

TOKEN = STAND_IN_TOKEN
TINY = ["--set", "run.max_steps=4", "--set", "log.every=2", "--set", "data.train_samples=256",
        "--set", "data.val_samples=64"]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_run_with_a_garbage_ca_and_a_newline_token_trains_and_logs_no_token(runs_dir, tls, tmp_path):
    _, server, token = tls
    token.write_text("eyJ-first-half\nsecond-half\n")
    garbage = tmp_path / "garbage.crt"
    garbage.write_text("not a certificate\n")
    with recording(context=server) as https_stub:
        proc = amptui("run", "quickstart", *TINY, env=trainjob_env(https_stub.url + "/status", token, garbage),
                      timeout=250)
    assert proc.returncode == 0, proc.stderr
    run_dir = only_run(runs_dir)
    [end] = [r for r in events(run_dir) if r["kind"] == "end"]
    assert end["status"] == "completed" and end["steps"] == 4
    log = wait_until(lambda: (run_dir / "output.log").read_text(), 10, "output.log")
    assert trainjob.CA_ENV in log and str(garbage) in log and "half" not in log
