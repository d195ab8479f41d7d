"""`amptui serve`: the dashboard in a browser, through textual-serve.

textual-serve starts the served command once per browser tab (each tab is a dashboard of its own
over the same runs folder). Whoever drives a tab acts as the user who served it, so the address
carries a secret and websockets must come from the served origin (serve_guard.py), and a tab's
dashboard ends with its websocket, at most --max-tabs at once (serve_tabs.py); it binds
localhost unless told otherwise with --allow-remote, and says how to reach it through an SSH
tunnel. Its page embeds an absolute websocket address built from the public URL, so a tunnel to
another local port needs --public-url naming that port. Each tab's dashboard is this Python with
the working folder off its import path, started in the home folder: an `amptui/` where serve was
started is never what runs.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
import secrets
import shlex
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

from amptui.cli.parser import runs_dir_option
from amptui.core.errors import UserError

DEFAULT_MAX_TABS = 8  # each tab is a dashboard process (~100 MB)
MOST_MAX_TABS = 1000
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1", "ip6-localhost")
# What textual-serve sets in the environment of the process it serves (its app_service.py).
WEB_DRIVER = "textual.drivers.web_driver:WebDriver"
TOKEN_ENV = "AMPTUI_SERVE_TOKEN"  # the secret, for scripts (not on the command line, where `ps` shows it)
SHORTEST_TOKEN = 32  # 190 bits or more of letters, digits and ._~-: never guessed, even at full speed
TOKEN_SHAPE = re.compile(rf"[A-Za-z0-9._~-]{{{SHORTEST_TOKEN},}}")  # as it goes into a URL and a path, unescaped


def add_parser(sub) -> None:
    p = sub.add_parser("serve", help="the dashboard in a browser (textual-serve), on localhost: reach it through "
                       "an SSH tunnel")
    p.add_argument("--host", default="localhost",
                   help="the address to listen on (default localhost; anything else needs --allow-remote)")
    p.add_argument("--port", type=int, default=8000, help="the port to listen on (default 8000)")
    p.add_argument("--public-url", metavar="URL",
                   help="the address the browser uses, when it is not http://HOST:PORT (a tunnel to another "
                        "local port: --public-url http://localhost:9000)")
    p.add_argument("--allow-remote", action="store_true",
                   help="listen on an address other machines can reach; whoever reaches the port and has the "
                        "printed address (its secret) can start and stop runs")
    p.add_argument("--token", metavar="TOKEN",
                   help=f"the secret the address carries, {SHORTEST_TOKEN} or more letters, digits or ._~- (default: "
                        f"a new random one per serve; scripts can set {TOKEN_ENV} instead, which other users cannot "
                        "see in the process list). Wrong ones are answered ever more slowly")
    p.add_argument("--max-tabs", type=int, default=DEFAULT_MAX_TABS, metavar="N",
                   help=f"the most browser tabs served at once, each a dashboard process of its own (default "
                        f"{DEFAULT_MAX_TABS}); one more is told so. A tab's dashboard ends with its websocket")
    p.add_argument("--read-only", action="store_true",
                   help="a dashboard that watches and compares but starts, stops, resumes and deletes nothing")
    p.add_argument("--access-log", action="store_true",
                   help="print a line for each browser request (the secret masked); off by default, so the "
                        "printed address stays on the screen")
    runs_dir_option(p)


def is_local(host: str) -> bool:
    if host.lower() in LOCAL_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def public_url(url: str | None, host: str, port: int) -> str:
    """The browser's address for the server, checked: http(s), a host, no path (textual-serve
    appends /ws and /static/ to it)."""
    if url is None:
        if host in ("0.0.0.0", "::", ""):  # every interface: no address a browser could use
            host = socket.gethostname()
        shown_host = f"[{host}]" if ":" in host else host
        return f"http://{shown_host}:{port}"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"--public-url {url!r}: expected http://HOST[:PORT] or https://HOST[:PORT]")
    if parts.path.strip("/") or parts.query or parts.fragment:
        raise UserError(f"--public-url {url!r}: give the address without a path (the dashboard is served at /)")
    try:
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError:
        raise UserError(f"--public-url {url!r}: the port is not a number from 0 to 65535") from None
    return f"{parts.scheme}://{parts.netloc}"


def served_command(runs_root: Path, read_only: bool = False) -> str:
    """What each browser tab runs (a shell line, as textual-serve takes it): this Python's amptui
    dashboard over the same runs folder, in the home folder, the working folder off its import path."""
    from amptui.dashboard.screens.keys import READ_ONLY_ENV
    from amptui.jobs.spawn import amptui_python

    home = Path.home()
    where = home if home.is_dir() else Path("/")
    dashboard = shlex.join([*amptui_python(), "-m", "amptui", "--runs-dir", str(runs_root.resolve())])
    return f"cd {shlex.quote(str(where))} && {READ_ONLY_ENV + '=1 ' if read_only else ''}exec {dashboard}"


def the_secret(given: str | None) -> str:
    """--token, else $AMPTUI_SERVE_TOKEN, else a new random one (256 bits)."""
    if given is not None:
        token, where = given, "--token"
    elif TOKEN_ENV in os.environ:
        token, where = os.environ[TOKEN_ENV], TOKEN_ENV
    else:
        return secrets.token_urlsafe(32)
    if not TOKEN_SHAPE.fullmatch(token):
        raise UserError(f"{where}: expected {SHORTEST_TOKEN} or more letters, digits or ._~- (got {len(token)} "
                        "characters; e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')")
    return token


def tunnel_line(host: str, port: int, url: str) -> str | None:
    """How to reach the served address from another machine: an SSH tunnel from the public URL's
    port to the address served here (not always localhost: --host 127.0.0.2). None when the public
    URL is not on the browser's own machine (a reverse proxy)."""
    public = urlsplit(url)
    public_host = public.hostname or "localhost"
    if not is_local(public_host):
        return None
    served = f"[{host}]" if ":" in host else host
    # ssh binds its end to localhost; a browser given another loopback address needs it bound there
    bind = "" if public_host == "localhost" else (f"[{public_host}]:" if ":" in public_host else f"{public_host}:")
    return f"ssh -L {bind}{public.port or port}:{served}:{port} {socket.gethostname()}"


def check_port_free(host: str, port: int) -> None:
    """Refuse at once when the port is taken (aiohttp would end in a traceback)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise UserError(f"--host {host!r}: cannot resolve it: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc} (choose another --port)") from None


def handle(args: argparse.Namespace) -> int:
    from amptui.core.run import runs

    if not 0 < args.port < 65536:
        raise UserError(f"--port {args.port}: expected a port from 1 to 65535")
    if not 0 < args.max_tabs <= MOST_MAX_TABS:
        raise UserError(f"--max-tabs {args.max_tabs}: expected a number of tabs from 1 to {MOST_MAX_TABS}")
    local = is_local(args.host)
    if not local and not args.allow_remote:
        raise UserError(f"--host {args.host}: other machines could reach the dashboard, and whoever does with its "
                        "address can start and stop runs; add --allow-remote if that is what you want, "
                        "or keep localhost and use an SSH tunnel")
    url = public_url(args.public_url, args.host, args.port)
    secret = the_secret(args.token)
    os.environ.pop(TOKEN_ENV, None)  # not handed on to the tabs' dashboards and the runs they start
    root = runs.runs_root(args.runs_dir)
    from amptui.core import userconfig
    from amptui.dashboard.app import keymap_scopes
    from amptui.dashboard.keymap import check_keymap

    settings = userconfig.load()  # a bad keymap is said here once, not by every tab's dashboard
    if settings.keymap:
        check_keymap(settings.keymap, str(settings.path), keymap_scopes())
    check_port_free(args.host, args.port)
    try:
        from amptui.cli.serve_guard import TOKEN_PARAM, GuardedServer
    except ImportError:
        raise UserError("amptui serve needs textual-serve: pip install textual-serve") from None

    address = f"{url}/?{TOKEN_PARAM}={secret}"
    tunnel = tunnel_line(args.host, args.port, url) if local else None

    def say_address() -> None:
        """What serving says at the start, and again for `?` on the console: the address last, on a
        line of its own (a terminal wraps it only where it is wider than the screen itself)."""
        from amptui.cli.prose import say

        if not local:
            say(f"WARNING: serving on {args.host}:{args.port}, reachable from other machines: whoever reaches "
                "this port with the address below can start and stop runs.", sys.stderr)
        say(f"amptui dashboard for {root.resolve()}{', read-only' if args.read_only else ''}; each browser tab "
            "is a dashboard of its own; Ctrl+C stops serving (runs go on); ? then Enter prints the address "
            "again")
        if tunnel:
            say(f"from another machine: {tunnel}, then open the address below")
        say("open this address; it carries the secret (whoever has it acts as you):")
        print(address, flush=True)

    say_address()
    served = urlsplit(public_url(None, args.host, args.port))  # the address itself, when no --public-url
    server = GuardedServer(served_command(root, args.read_only), secret=secret,
                           origins=[url, f"{served.scheme}://{served.netloc}"],
                           host=args.host, port=args.port, title="amptui", public_url=url,
                           access_log=args.access_log, max_tabs=args.max_tabs, on_console=say_address)
    server.serve()
    return 0


def served_by_textual_serve() -> bool:
    """True in a dashboard process that textual-serve started for a browser tab (no terminal,
    its screen goes over the web driver)."""
    return os.environ.get("TEXTUAL_DRIVER") == WEB_DRIVER
