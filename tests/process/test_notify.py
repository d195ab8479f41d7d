"""`log.notify_url`: a webhook told, in one short message, that a run failed or ended with a
non-finite loss, and whatever `notify(recorder.sinks, text)` is called for; https only (plain http
to 127.0.0.1 only); a down or hanging webhook costs the caller nothing and is said once; nothing
sent without the key. Stand-in webhooks on 127.0.0.1 (support/webstub.py)."""

from __future__ import annotations

import pytest
from support.cli import amptui
from support.waits import wait_until
from support.webstub import recording

TINY = ["--set", "run.max_steps=6", "--set", "log.every=2", "--set", "data.train_samples=256",
        "--set", "data.val_samples=64"]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_failed_trainer_run_tells_the_webhook_once(runs_dir):
    with recording() as hook:
        proc = amptui("run", "quickstart", *TINY, "--set", "debug.fail_at_step=3",
                      "--set", f"log.notify_url=\"{hook.url}/hook\"", timeout=250)
        assert proc.returncode != 0
        wait_until(lambda: hook.requests, 30, "the webhook's message")
    [request] = hook.requests
    assert "failed at step" in request["body"].decode() and "debug.fail_at_step" in request["body"].decode()


BOOM = '''
def build(num_classes):
    raise RuntimeError("the model factory ran out of memory")
'''


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_run_that_fails_in_set_up_tells_the_webhook_too(isolated, runs_dir):
    (isolated / "boom_model.py").write_text(BOOM)
    with recording() as hook:
        proc = amptui("run", "quickstart", *TINY, "--set", 'model.factory="boom_model:build"',
                      "--set", f"log.notify_url=\"{hook.url}/hook\"", timeout=250)
        assert proc.returncode != 0
        wait_until(lambda: hook.requests, 30, "the webhook's message")
    [request] = hook.requests
    assert "failed at step 0" in request["body"].decode() and "ran out of memory" in request["body"].decode()
