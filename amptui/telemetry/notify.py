"""`log.notify_url`: one short message per event to a webhook Slack, Discord or ntfy accept --
the run ended failed, or ended with a non-finite loss, or whatever another part of the run calls
`notify(sinks, text)` for (the autopilot's precision switches). Nothing is sent without the key.

The address is sent to over https only (plain http only to 127.0.0.1, for a local relay or a test);
a Slack or Discord webhook's address is its secret, so a preset may name the variable that holds
it (`notify_url = "$SLACK_WEBHOOK"`) and the address itself is never printed or written. Messages
go out on the mirror's own thread (outbound.Outbox): a down or hanging server costs the run
nothing and is said once.

What is posted: to hooks.slack.com `{"text": ...}`; to discord.com `{"content": ...}`; anywhere
else (ntfy, a generic hook) the message as text/plain.
"""

from __future__ import annotations

import json
import math
import os
from typing import Iterable
from urllib.parse import urlsplit

from amptui.core.stream.records import End, Record, Step
from amptui.core.urls import ENV_REF, url_problem
from amptui.telemetry.outbound import Outbox, post, say
from amptui.telemetry.sinks import Mirror

MAX_TEXT = 500  # characters per message: one short line
TIMEOUT_S = 5.0


def notify(sinks: Iterable[object], text: str) -> bool:
    """Send `text` (one line, shortened to MAX_TEXT) to the run's webhook, if it has one: queued,
    never blocking the caller. True when a notifier took it. `sinks` is the Recorder's list
    (`recorder.sinks`)."""
    return any(sink.send(text) for sink in sinks if isinstance(sink, Notifier))


def notifier_from(value: str, run_name: str) -> Notifier | None:
    """The Notifier log.notify_url asks for, or None with one line saying why not."""
    ref = ENV_REF.fullmatch(value)
    url = os.environ.get(ref.group(1), "") if ref else value
    if not url:
        say(f"log.notify_url: ${ref.group(1) if ref else ''} is not set; no notifications for this run")
        return None
    problem = url_problem(url, loopback_http=True)
    if problem:
        say(f"log.notify_url: the webhook address {problem}; no notifications for this run")
        return None
    return Notifier(url, run_name)


def one_line(text: str) -> str:
    """Printable, one line, bounded: what a chat shows."""
    clean = "".join(c if c.isprintable() else " " for c in text)
    return clean if len(clean) <= MAX_TEXT else clean[:MAX_TEXT - 1] + "…"


def body_for(url: str, text: str) -> tuple[bytes, str]:
    host = (urlsplit(url).hostname or "").lower()
    if host == "hooks.slack.com":
        return json.dumps({"text": text}).encode(), "application/json"
    if host in ("discord.com", "discordapp.com") or host.endswith((".discord.com", ".discordapp.com")):
        return json.dumps({"content": text}).encode(), "application/json"
    return text.encode(), "text/plain; charset=utf-8"


class Notifier(Mirror):
    def __init__(self, url: str, run_name: str):
        self.url, self.run_name = url, run_name
        self.outbox = Outbox("notify", "log.notify_url", size=16)

    def send(self, text: str) -> bool:
        body, kind = body_for(self.url, one_line(f"amptui {self.run_name}: {text}"))

        def job() -> None:
            post(self.url, body, kind, timeout=TIMEOUT_S, loopback_http=True)

        return self.outbox.put(job)

    def step(self, record: Step) -> None:
        return None

    def epoch(self, record, step: int) -> None:
        return None

    def note(self, record: Record) -> None:
        if not isinstance(record, End):
            return
        if record.status == "failed":
            error = record.error or {}
            why = f": {error.get('type', 'error')}: {error.get('message', '')}" if error else ""
            self.send(f"failed at step {record.steps}{why}")
        elif isinstance(record.final_loss, float) and not math.isfinite(record.final_loss):
            self.send(f"ended {record.status} at step {record.steps} with a non-finite loss ({record.final_loss})")

    close_wait_s = TIMEOUT_S + 1
