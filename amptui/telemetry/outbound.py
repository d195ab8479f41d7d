"""The one way a run's records leave for another system over the network (the Kubeflow TrainJob
status, the notification webhook) and the one queue every mirror (MLflow too) works through.

- `Outbox`: one daemon thread per mirror and a bounded queue that drops rather than blocks, so a
  refusing or hanging server costs the training thread an append; each kind of trouble is said
  once; `close` waits a bounded time, and `close_together` closes a run's mirrors at once under
  one deadline (CLOSE_S).
- `post`: one HTTPS POST, bounded by a timeout; redirects are never followed (a credential would
  travel with them); the URL is checked first (core/urls.py: https only); an error is described
  by `describe`, which never carries a header (the token) and never the URL's path.
- `read_token` / `tls_context`: the credential and CA files, checked, each problem one line naming
  the variable and the file and never the file's content.
"""

from __future__ import annotations

import collections
import re
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Callable, Sequence
from urllib.parse import urlsplit

from amptui.core.urls import url_problem

MAX_TOKEN = 16 * 1024
MAX_ANSWER = 64 * 1024
CLOSE_S = 30.0  # at a run's end, the longest wait for every mirror together (docs/trainer.md)
USERINFO = re.compile(r"://[^/@\s]*@")


class OutboundError(Exception):
    """A refused address, credential or answer, in words safe to print (no secret in them)."""


def say(line: str) -> None:
    print(f"[amptui] {line}", file=sys.stderr, flush=True)


def read_token(path: str, variable: str) -> str:
    """The bearer token in `path`: printable ASCII without whitespace inside, at most MAX_TOKEN
    bytes (a trailing newline is dropped). Re-read by each post: a projected token rotates."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_TOKEN + 2)
    except OSError as exc:
        raise OutboundError(f"{variable}={path}: cannot read the token file ({exc.strerror or type(exc).__name__})") from None
    token = raw.rstrip(b"\r\n")
    if len(token) > MAX_TOKEN:
        raise OutboundError(f"{variable}={path}: the token file is longer than {MAX_TOKEN} bytes")
    if not token or any(b <= 32 or b >= 127 for b in token):
        raise OutboundError(f"{variable}={path}: the token file is empty or holds whitespace, a control or a "
                            "non-ASCII character (its content is not shown)")
    return token.decode("ascii")


def tls_context(ca_file: str | None, variable: str) -> ssl.SSLContext:
    """Certificates checked against `ca_file` (or the system's CAs without one)."""
    try:
        return ssl.create_default_context(cafile=ca_file or None)
    except (OSError, ssl.SSLError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or type(exc).__name__
        raise OutboundError(f"{variable}={ca_file}: not a readable PEM CA certificate ({why})") from None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # urllib then raises HTTPError(code): described as a redirect not followed


def post(url: str, body: bytes, content_type: str, *, token: str | None = None,
         context: ssl.SSLContext | None = None, timeout: float = 5.0, loopback_http: bool = False) -> int:
    """POST `body` to `url` and return the HTTP status; raises OutboundError (safe text) on any failure."""
    problem = url_problem(url, loopback_http=loopback_http)
    if problem:
        raise OutboundError(f"the address {problem}")
    headers = {"Content-Type": content_type, "User-Agent": "amptui"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    handlers: list = [urllib.request.HTTPSHandler(context=context), _NoRedirect]
    if urlsplit(url).scheme == "http":  # loopback only: an http_proxy would carry it across a network in clear
        handlers.append(urllib.request.ProxyHandler({}))
    opener = urllib.request.build_opener(*handlers)
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with opener.open(request, timeout=timeout) as answer:
            answer.read(MAX_ANSWER)
            return int(answer.status)
    except Exception as exc:  # noqa: BLE001 - every failure becomes one safe line
        raise OutboundError(describe(exc, token)) from None


def describe(exc: BaseException, secret: str | None = None) -> str:
    """An exception in words that carry no header value and no URL path."""
    if isinstance(exc, urllib.error.HTTPError):
        text = f"HTTP {exc.code}"
        if 300 <= exc.code < 400:
            where = urlsplit(exc.headers.get("Location", "") or "")
            text += f" redirect to {where.scheme or '?'}://{where.hostname or '?'}, not followed"
        exc.close()
    elif isinstance(exc, urllib.error.URLError):
        reason = exc.reason
        text = f"{type(reason).__name__}: {reason}" if isinstance(reason, BaseException) else str(reason)
    elif isinstance(exc, (OSError, ssl.SSLError)):
        text = f"{type(exc).__name__}: {exc}"
    elif secret is not None or isinstance(exc, ValueError):
        text = type(exc).__name__  # e.g. http.client's header errors repeat the header: never shown
    else:  # another library's error (MLflow's): its words, with any user:password@ in a URL masked
        text = f"{type(exc).__name__}: {USERINFO.sub('://***@', str(exc))}"
    if secret:
        text = text.replace(secret, "<token>")
    return text[:300]


class Outbox:
    """Jobs run in order on one daemon thread; at most `size` wait, and one more is dropped (said
    once), or with `latest=True` replaces those waiting (a status: only the newest matters)."""

    def __init__(self, name: str, what: str, size: int = 256, deferred: bool = False):
        self.what, self.size = what, size
        self.dropped = 0
        self.said: set[str] = set()
        self._jobs: collections.deque[Callable[[], None]] = collections.deque()
        self._cond = threading.Condition()
        self._closed = False
        self._busy = False
        self._thread = threading.Thread(target=self._run, name=f"amptui-{name}", daemon=True)
        if not deferred:  # deferred: jobs wait for begin(), e.g. a heavy import kept out of the run's set-up
            self._thread.start()

    def begin(self) -> None:
        """Start running the queued jobs (an Outbox made deferred); once."""
        if not self._thread.is_alive() and self._thread.ident is None:
            self._thread.start()

    def put(self, job: Callable[[], None], latest: bool = False) -> bool:
        with self._cond:
            if self._closed:
                return False
            if latest:
                self._jobs.clear()
            if len(self._jobs) < self.size:
                self._jobs.append(job)
                self._cond.notify()
                return True
            self.dropped += 1
        self.say_once("behind", f"{self.what}: the server is not keeping up; records are dropped, training goes on")
        return False

    def say_once(self, kind: str, line: str) -> None:
        if kind not in self.said:
            self.said.add(kind)
            say(line)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._jobs and not self._closed:
                    self._cond.wait()
                if not self._jobs:
                    return
                job = self._jobs.popleft()
                self._busy = True
            try:
                job()
            except OutboundError as exc:
                self.say_once("failed", f"{self.what}: {exc}; training goes on without it")
            except Exception as exc:  # noqa: BLE001 - a mirror's failure is never the run's
                self.say_once("failed", f"{self.what}: {describe(exc)}; training goes on without it")
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def drain(self, wait_s: float) -> bool:
        """Wait (bounded) until every queued job has run; True when they have."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._jobs and not self._busy, timeout=wait_s)

    def shut(self) -> None:
        """No more jobs: what is queued runs on, and the thread ends after it (nothing waited for here)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self.begin()

    def close(self, wait_s: float) -> None:
        """Run what is queued, waiting at most `wait_s`; what is left is said and dropped."""
        close_together([(self, wait_s)], wait_s)

    def _give_up(self, wait_s: float) -> None:
        with self._cond:
            left = len(self._jobs)
            self._jobs.clear()
        self.say_once("closing", f"{self.what}: the server did not answer within {wait_s:g} s at the end; "
                      f"{left + 1} update(s) not sent")


def close_together(outboxes: Sequence[tuple[Outbox, float]], wait_s: float | None = None) -> list[Outbox]:
    """Close every (outbox, its own longest wait) at once and wait for all of them together: each runs
    on its own thread, so a hanging server holds the end for at most `wait_s` in all (its own wait if
    shorter), never for the sum. Jobs still run in order within each outbox. One not done by then is
    said once (naming it) and what it had queued is dropped; returns those."""
    wait_s = CLOSE_S if wait_s is None else wait_s
    for box, _ in outboxes:
        box.shut()
    start = time.monotonic()
    for box, own in outboxes:
        box._thread.join(max(0.0, start + min(own, wait_s) - time.monotonic()))
    late = [(box, min(own, wait_s)) for box, own in outboxes if box._thread.is_alive()]
    for box, waited in late:
        box._give_up(waited)
    return [box for box, _ in late]
