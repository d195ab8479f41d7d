"""The door of `amptui serve`: textual-serve's server, with a secret and an Origin check in front.

Whoever drives a served dashboard acts as the user who served it (a key starts a script), and
every local user, and any web page the user's browser opens while a tunnel is up, reaches
loopback. So, as Jupyter does: every request (the page, its static files, the websocket, a
download) must carry the secret, in the URL's `?token=` or in the cookie the page's first
answer sets; a websocket must also come from the served origin, since a page elsewhere can
open one to localhost (a browser sends Origin with every websocket, and no page can forge it).
textual-serve itself is not changed: its aiohttp application gets one more middleware.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import re
import sys
from collections.abc import Callable
from urllib.parse import urlsplit

from aiohttp import web
from textual_serve.server import Server

TOKEN_PARAM = "token"
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
NO_SECRET = ("401: this amptui dashboard needs its secret: open the address `amptui serve` printed "
             "(http://HOST:PORT/?token=...)\n")
WRONG_SECRET = "403: not this dashboard's secret: open the address `amptui serve` printed\n"
FOREIGN_ORIGIN = "403: a websocket from another site ({origin}) is refused\n"
IN_A_URL = re.compile(rf"({TOKEN_PARAM}=)[^\s&\"']+")


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


class HideSecret(logging.Filter):
    """The request log (its lines and their Referer) shows `token=...`, never the secret."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = IN_A_URL.sub(r"\1...", record.getMessage())
        record.args = None
        return True


def same_secret(given: str, secret: str) -> bool:
    """In constant time: how long a wrong guess takes tells nothing about the secret."""
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), secret.encode("utf-8"))


class GuardedServer(Server):
    """textual-serve's Server, answering only requests that carry `secret`, and websockets only
    from `origins` (the served address and the public URL's, as URLs)."""

    def __init__(self, command: str, *, secret: str, origins: list[str], access_log: bool = False,
                 on_console: Callable[[], None] | None = None, **kwargs):
        super().__init__(command, **kwargs)
        self.secret = secret
        self.access_log = access_log  # a line per request would scroll the printed address away
        self.on_console = on_console  # `?` then Enter on the console: say the address again
        self.origins = {o for o in (origin_of(url) for url in origins) if o is not None}
        public = urlsplit(self.public_url)
        # one cookie per public port: two dashboards served on one host keep their own
        self.cookie = f"amptui-serve-{public.port or DEFAULT_PORTS.get(public.scheme, 80)}"
        self.secure_cookie = public.scheme == "https"

    def initialize_logging(self) -> None:
        super().initialize_logging()
        access = logging.getLogger("aiohttp.access")
        access.addFilter(HideSecret())
        access.disabled = not self.access_log

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self._guard)
        return app

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

    @web.middleware
    async def _guard(self, request: web.Request, handler) -> web.StreamResponse:
        in_url = request.query.get(TOKEN_PARAM)
        given = in_url or request.cookies.get(self.cookie)
        if not given:
            raise web.HTTPUnauthorized(text=NO_SECRET)
        if not same_secret(given, self.secret):
            raise web.HTTPForbidden(text=WRONG_SECRET)
        if request.headers.get("Upgrade", "").lower() == "websocket":
            origin = request.headers.get("Origin")
            if origin is not None and origin_of(origin) not in self.origins:
                raise web.HTTPForbidden(text=FOREIGN_ORIGIN.format(origin=origin[:200]))
        response = await handler(request)
        if in_url and request.path == "/":
            # the page's static files and its websocket carry the secret from here on; no script can
            # read it (HttpOnly), and no request another site starts sends it (SameSite=Strict)
            response.set_cookie(self.cookie, self.secret, path="/", httponly=True, samesite="Strict",
                                secure=self.secure_cookie)
            response.headers["Referrer-Policy"] = "no-referrer"  # the address holds the secret
            response.headers["Cache-Control"] = "no-store"
        return response
