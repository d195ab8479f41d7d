"""`log.notify_url`: a webhook told, in one short message, that a run failed or ended with a
non-finite loss, and whatever `notify(recorder.sinks, text)` is called for; https only (plain http
to 127.0.0.1 only); a down or hanging webhook costs the caller nothing and is said once; nothing
sent without the key. Stand-in webhooks on 127.0.0.1 (support/webstub.py)."""

from __future__ import annotations

import json
import math
import time

import pytest
from support.cli import one_clear_line
from support.waits import wait_until
from support.webstub import hanging, recording, refusing_port

from amptui.core.config import values as config
from amptui.core.stream.records import End
from amptui.telemetry.mirrors import mirror_sinks
from amptui.telemetry.notify import Notifier, body_for, notify


def sinks_for(tmp_path, url: str):
    return mirror_sinks(config.build_config({}, {"log.notify_url": url}), tmp_path / "run-1", rank=0)


def test_notify_posts_one_short_line_to_the_webhook(tmp_path):
    with recording() as hook:
        sinks = sinks_for(tmp_path, hook.url + "/topic")
        assert notify(sinks, "switched float16 -> bfloat16 at step 1200\n\x1b[2Jmore " + "x" * 2000)
        wait_until(lambda: hook.requests, 30, "the webhook's request")
        for sink in sinks:
            sink.close()
    [request] = hook.requests
    text = request["body"].decode()
    assert request["path"] == "/topic" and request["headers"]["Content-Type"].startswith("text/plain")
    assert text.startswith("amptui run-1: switched float16 -> bfloat16 at step 1200")
    assert len(text) <= 500 and "\n" not in text and "\x1b" not in text


def test_slack_and_discord_get_the_json_they_read():
    assert json.loads(body_for("https://hooks.slack.com/services/T/B/x", "hi")[0]) == {"text": "hi"}
    assert json.loads(body_for("https://discord.com/api/webhooks/1/x", "hi")[0]) == {"content": "hi"}
    assert body_for("https://ntfy.sh/topic", "hi") == (b"hi", "text/plain; charset=utf-8")


def test_a_failed_end_and_a_non_finite_loss_each_send_one_message(tmp_path):
    with recording() as hook:
        notifier = Notifier(hook.url, "run-1")
        notifier.note(End(status="failed", total_time_s=1.0, steps=3,
                          error={"type": "RuntimeError", "message": "debug.fail_at_step", "rank": 0}))
        notifier.note(End(status="completed", total_time_s=1.0, steps=6, final_loss=math.nan))
        notifier.note(End(status="completed", total_time_s=1.0, steps=6, final_loss=0.5))  # nothing to say
        notifier.close()
    texts = [r["body"].decode() for r in hook.requests]
    assert texts == ["amptui run-1: failed at step 3: RuntimeError: debug.fail_at_step",
                     "amptui run-1: ended completed at step 6 with a non-finite loss (nan)"]


def test_a_hanging_webhook_costs_the_caller_nothing_and_is_said_once(tmp_path, capsys, monkeypatch):
    # each post's timeout and close()'s wait short here: the server never answers, so each post waits
    # its timeout out, and close() its wait, in full
    monkeypatch.setattr("amptui.telemetry.notify.TIMEOUT_S", 0.2)
    with hanging() as url:
        notifier = Notifier(url, "run-1")
        notifier.close_wait_s = 0.2
        began = time.monotonic()
        for i in range(40):  # more than the queue holds: the rest are dropped, not waited for
            notifier.send(f"message {i}")
        # appends only: a blocking send would wait its timeout, 40 of them 8 s; 4 s is room for any
        # load (the queue drains a post per 0.2 s: 16 + 1 appends in under 3.4 s fill it)
        assert time.monotonic() - began < 4.0
        # three posts taken from the full queue: two at least timed out, said once between them
        wait_until(lambda: len(notifier.outbox._jobs) <= notifier.outbox.size - 3, 60, "two posts to time out")
        notifier.close()
    err = capsys.readouterr().err
    assert err.count("log.notify_url") <= 3 and "not keeping up" in err and url not in err


def test_a_refusing_webhook_is_one_line_and_the_address_is_not_printed(tmp_path, capsys):
    url = f"http://127.0.0.1:{refusing_port()}/secret-path"
    notifier = Notifier(url, "run-1")
    notifier.send("one")
    notifier.send("two")
    notifier.close()
    err = capsys.readouterr().err
    assert err.count("log.notify_url") == 1 and "refused" in err.lower() and "secret-path" not in err


@pytest.mark.parametrize("url", ["http://example.com/hook", "ftp://example.com/x", "https://u:p@example.com/",
                                 "https://example.com/a b", "hooks.slack.com/x"])
def test_a_webhook_not_over_https_is_refused_as_a_config_error(cli, runs_dir, url):
    line = one_clear_line(cli("run", "quickstart", "--set", f"log.notify_url={json.dumps(url)}"))
    assert "log.notify_url" in line and url not in line
    assert not runs_dir.exists()


def test_the_address_can_live_in_a_variable_and_nothing_is_sent_without_the_key(tmp_path, monkeypatch, capsys):
    assert not any(isinstance(s, Notifier) for s in mirror_sinks(config.build_config({}, {}), tmp_path, rank=0))
    monkeypatch.delenv("AMPTUI_TEST_HOOK", raising=False)
    assert sinks_for(tmp_path, "$AMPTUI_TEST_HOOK") == []
    assert "$AMPTUI_TEST_HOOK is not set" in capsys.readouterr().err
    with recording() as hook:
        monkeypatch.setenv("AMPTUI_TEST_HOOK", hook.url)
        [notifier] = sinks_for(tmp_path, "$AMPTUI_TEST_HOOK")
        assert notify([notifier], "hello")
        notifier.close()
        assert [r["body"] for r in hook.requests] == [b"amptui run-1: hello"]
    monkeypatch.setenv("AMPTUI_TEST_HOOK", "http://example.com/x")
    assert sinks_for(tmp_path, "$AMPTUI_TEST_HOOK") == []
    assert "https" in capsys.readouterr().err


def test_a_loopback_http_webhook_never_travels_through_an_http_proxy(monkeypatch):
    # A cluster's http_proxy would carry the address (the secret) across a network in clear.
    from amptui.telemetry.outbound import post

    with recording() as proxy, recording() as hook:
        for name in ("http_proxy", "HTTP_PROXY"):
            monkeypatch.setenv(name, proxy.url)
        for name in ("no_proxy", "NO_PROXY"):
            monkeypatch.delenv(name, raising=False)
        assert post(hook.url + "/secret-hook", b"hi", "text/plain", loopback_http=True) == 200
    assert [r["path"] for r in hook.requests] == ["/secret-hook"] and proxy.requests == []
