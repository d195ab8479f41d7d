"""The door of `amptui serve`: textual-serve's server, with a secret and an Origin check in front.

Whoever drives a served dashboard acts as the user who served it (a key starts a script), and
every local user, and any web page the user's browser opens while a tunnel is up, reaches
loopback. So, as Jupyter does, every request carries the secret: the page in its address's
`?token=`, and what the page asks for after it (its static files, its websocket) in the first
segment of their paths, which the page is served with (`/SECRET/ws`, `/SECRET/static/...`). No
cookie: a cookie for localhost is sent to every port of localhost (cookies are not port-scoped),
so any local listener would receive it. A websocket must also come from the served origin, since
a page elsewhere can open one to localhost (a browser sends Origin with every websocket, and no
page can forge it). Wrong secrets from one address are answered ever more slowly (serve_pause.py),
and the secret is masked in every line serve logs, however a client spells it. textual-serve
itself is not changed: its aiohttp application is built here with these routes and a middleware.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import re
import sys
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

import aiohttp_jinja2
import jinja2
from aiohttp import web
from rich.logging import RichHandler
from textual_serve.server import LogHighlighter, Server

from amptui.cli.serve_pause import Pauses
from amptui.cli.serve_tabs import Tabs

TOKEN_PARAM = "token"
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
NO_SECRET = ("401: this amptui dashboard needs its secret: open the address `amptui serve` printed "
             "(http://HOST:PORT/?token=...)\n")
WRONG_SECRET = "403: not this dashboard's secret: open the address `amptui serve` printed\n"
FOREIGN_ORIGIN = "403: a websocket from another site ({origin}) is refused\n"
SLOW_DOWN = "429: too many wrong secrets from {address}: try again in {wait:.0f} s\n"
IN_A_URL = re.compile(rf"({TOKEN_PARAM}=)[^\s&\"']+", re.IGNORECASE)
# what the page asks for after it carries the secret as its path's first segment
SECRET_IN_PATH = re.compile(r"/([^/]+)/(?:ws|static/.*)")
# a file a tab's dashboard delivers (Textual's screenshot): the page opens /download/KEY, which it
# builds itself without the secret; KEY (122 random bits, sent over the tab's websocket) is the proof
DOWNLOAD = re.compile(r"/download/([^/]+)")
NO_DOWNLOAD = "403: no such download (it is offered once, to the tab that asked for it)\n"
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def origin_of(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of a URL or an Origin header, ports made explicit; None if it has none."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return parts.scheme, parts.hostname.lower(), port or DEFAULT_PORTS[parts.scheme]


def masked(text: str, secret: str) -> str:
    """`text` with the secret, and whatever a `token=` parameter holds, shown as `...`, however a
    client spelled them: percent-encoded (`%74oken=`, each letter of the secret as `%xx`), twice
    over, in a path or a header. Decoded for that, control characters escaped (a decoded `%0a`
    must not start a line of its own in the log)."""
    for _ in range(4):  # %2574 -> %74 -> t; a few rounds reach what any client spelled
        decoded = unquote(text, errors="replace")
        if decoded == text:
            break
        text = decoded
    text = IN_A_URL.sub(r"\1...", text.replace(secret, "..."))
    return CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class HideSecret(logging.Filter):
    """Every line serve logs (a request's, its Referer, an error's) shows `...` for the secret."""

    def __init__(self, secret: str):
        super().__init__()
        self.secret = secret

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = masked(record.getMessage(), self.secret)
        record.args = None
        return True


def same_secret(given: str, secret: str) -> bool:
    """In constant time: how long a wrong guess takes tells nothing about the secret."""
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), secret.encode("utf-8"))


def given_secret(request: web.Request) -> str | None:
    """The secret a request carries: the first segment of the page's own requests' paths, else
    the address's `?token=` (decoded: `%74oken=` is the same parameter)."""
    in_path = SECRET_IN_PATH.fullmatch(request.path)
    return in_path.group(1) if in_path else request.query.get(TOKEN_PARAM)


class GuardedServer(Server):
    """textual-serve's Server, answering only requests that carry `secret`, websockets only from
    `origins` (the served address and the public URL's, as URLs), and running at most `max_tabs`
    tabs, each ending with its websocket (serve_tabs.py)."""

    def __init__(self, command: str, *, secret: str, origins: list[str], access_log: bool = False,
                 max_tabs: int = 8, on_console: Callable[[], None] | None = None, **kwargs):
        super().__init__(command, **kwargs)
        self.secret = secret
        self.access_log = access_log  # a line per request would scroll the printed address away
        self.on_console = on_console  # `?` then Enter on the console: say the address again
        self.origins = {o for o in (origin_of(url) for url in origins) if o is not None}
        self.pauses = Pauses()
        self.tabs = Tabs(command, max_tabs, self.download_manager, lambda: self.debug)

    def initialize_logging(self) -> None:
        """textual-serve's log, with the secret masked in every line (a filter on the handler sees
        every logger's records) and tracebacks without their local variables (which hold it)."""
        handler = RichHandler(show_path=False, show_time=False, rich_tracebacks=True, tracebacks_show_locals=False,
                              highlighter=LogHighlighter(), console=self.console)
        handler.addFilter(HideSecret(self.secret))
        logging.basicConfig(level="DEBUG" if self.debug else "INFO", format="%(message)s", datefmt="[%X]",
                            handlers=[handler])
        logging.getLogger("aiohttp.access").disabled = not self.access_log

    async def _make_app(self) -> web.Application:
        """textual-serve's application with the secret as the first segment of the page's own
        routes; a download's address is its own key (the page builds it without the secret)."""
        app = web.Application(middlewares=[self._guard])
        aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(self.templates_path))
        app.add_routes([
            web.get("/", self.handle_index, name="index"),
            web.get(f"/{self.secret}/ws", self.handle_websocket, name="websocket"),
            web.static(f"/{self.secret}/static", self.statics_path, name="static"),
            web.get("/download/{key}", self.handle_download, name="download"),
        ])
        app.on_startup.append(self.on_startup)
        app.on_shutdown.append(self.tabs.end_all)
        return app

    async def handle_index(self, request: web.Request) -> Any:
        if self.tabs.full():
            raise web.HTTPServiceUnavailable(text=f"503: {self.tabs.refused(request)}\n")
        return await super().handle_index(request)

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        return await self.tabs.handle(request)

    async def on_startup(self, app: web.Application) -> None:
        """Quiet: textual-serve would print its address without the secret; cli/serve.py said it.
        Listens to the console for `?` (nothing where stdin is closed or cannot be watched)."""
        if self.on_console is None or sys.stdin is None:
            return
        try:
            fd = sys.stdin.fileno()
            asyncio.get_running_loop().add_reader(fd, self._console_input, fd)
        except (OSError, ValueError, NotImplementedError):  # a regular file, /dev/null: no console
            pass

    def _console_input(self, fd: int) -> None:
        try:
            typed = os.read(fd, 4096)
        except OSError:
            typed = b""
        if not typed:  # end of input: stop watching (an idle reader would fire forever)
            asyncio.get_running_loop().remove_reader(fd)
        elif b"?" in typed and self.on_console is not None:
            self.on_console()

    async def _a_download(self, key: str) -> bool:
        try:
            await self.download_manager.get_download_metadata(key)
        except KeyError:
            return False
        return True

    @web.middleware
    async def _guard(self, request: web.Request, handler) -> web.StreamResponse:
        download = DOWNLOAD.fullmatch(request.path)
        given = download.group(1) if download else given_secret(request)
        if not given:
            raise web.HTTPUnauthorized(text=NO_SECRET)
        address = request.remote or "?"
        wait = await self.pauses.turn(address)
        if wait is not None:  # a queue of guesses from there already: refused unchecked
            raise web.HTTPTooManyRequests(text=SLOW_DOWN.format(address=address, wait=wait),
                                          headers={"Retry-After": str(round(wait) + 1)})
        if download:
            if not await self._a_download(given):
                self.pauses.wrong(address)
                raise web.HTTPForbidden(text=NO_DOWNLOAD)
            return await handler(request)
        if not same_secret(given, self.secret):
            self.pauses.wrong(address)
            raise web.HTTPForbidden(text=WRONG_SECRET)
        self.pauses.right(address)
        if request.headers.get("Upgrade", "").lower() == "websocket":
            origin = request.headers.get("Origin")
            if origin is not None and origin_of(origin) not in self.origins:
                raise web.HTTPForbidden(text=FOREIGN_ORIGIN.format(origin=origin[:200]))
        response = await handler(request)
        if request.path == "/":
            response.headers["Referrer-Policy"] = "no-referrer"  # its address, and its files', hold the secret
            response.headers["Cache-Control"] = "no-store"
        return response
