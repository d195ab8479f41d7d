"""Which addresses amptui may send to (telemetry/outbound.py sends): https only, because what
travels there (a bearer token, a webhook whose address is its secret) must not cross a network in
clear; plain http only to this machine's loopback, where nothing crosses a network (the tests'
stubs, a local relay). Checked where a preset is read (log.notify_url) and again before sending."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

ENV_REF = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")  # log.notify_url = "$SLACK_WEBHOOK": the secret stays in the environment
MAX_URL = 2048


def url_problem(url: str, loopback_http: bool = False) -> str | None:
    """Why `url` may not be sent to (one phrase), or None. Never repeats the URL itself: its
    path or query may be the secret."""
    if len(url) > MAX_URL:
        return f"longer than {MAX_URL} characters"
    if any(not c.isprintable() or c.isspace() for c in url):
        return "holds a space or a control character"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "is not a URL"
    del port  # parsed only to refuse a malformed port
    if not parts.hostname:
        return "names no host (expected https://HOST/...)"
    if parts.username or parts.password:
        return "carries a user or password before the host (give credentials through their variable)"
    if parts.scheme == "https":
        return None
    if parts.scheme == "http" and loopback_http and is_loopback(parts.hostname):
        return None
    if parts.scheme == "http":
        return "is http://: credentials and webhooks travel over https only (plain http only to 127.0.0.1)"
    return f"has scheme {parts.scheme!r}: expected https://"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def notify_url_problem(value: str) -> str | None:
    """log.notify_url as a preset may hold it: empty (off), a `$VARIABLE` naming where the address
    is, or the address itself."""
    if not value or ENV_REF.fullmatch(value):
        return None
    return url_problem(value, loopback_http=True)
