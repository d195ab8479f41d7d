"""`amptui serve`: the dashboard in a browser, through textual-serve.

textual-serve starts the served command once per browser tab (each tab is a dashboard of its own
over the same runs folder) and has no authentication: whoever reaches the port controls runs. So
it binds localhost unless told otherwise with --allow-remote, and says how to reach it through an
SSH tunnel. Its page embeds an absolute websocket address built from the public URL, so a tunnel
to another local port needs --public-url naming that port.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import shlex
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

from amptui.cli.parser import runs_dir_option
from amptui.core.errors import UserError

LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1", "ip6-localhost")
# What textual-serve sets in the environment of the process it serves (its app_service.py).
WEB_DRIVER = "textual.drivers.web_driver:WebDriver"


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
                   help="listen on an address other machines can reach; there is no login: anyone who reaches "
                        "the port can start and stop runs")
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


def served_command(runs_root: Path) -> str:
    """What each browser tab runs: this Python's amptui dashboard over the same runs folder."""
    return shlex.join([sys.executable, "-m", "amptui", "--runs-dir", str(runs_root.resolve())])


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
    local = is_local(args.host)
    if not local and not args.allow_remote:
        raise UserError(f"--host {args.host}: other machines could reach the dashboard, and anyone who does can "
                        "start and stop runs (there is no login); add --allow-remote if that is what you want, "
                        "or keep localhost and use an SSH tunnel")
    url = public_url(args.public_url, args.host, args.port)
    root = runs.runs_root(args.runs_dir)
    from amptui.core import userconfig
    from amptui.dashboard.app import keymap_scopes
    from amptui.dashboard.keymap import check_keymap

    settings = userconfig.load()  # a bad keymap is said here once, not by every tab's dashboard
    if settings.keymap:
        check_keymap(settings.keymap, str(settings.path), keymap_scopes())
    check_port_free(args.host, args.port)
    try:
        from textual_serve.server import Server
    except ImportError:
        raise UserError("amptui serve needs textual-serve: pip install textual-serve") from None

    if not local:
        print(f"WARNING: serving on {args.host}:{args.port}, reachable from other machines; there is no login: "
              "anyone who reaches this port can start and stop runs.", file=sys.stderr, flush=True)
    tunnel_port = urlsplit(url).port or args.port
    print(f"amptui dashboard for {root.resolve()} at {url}", flush=True)
    if local:
        print(f"from another machine: ssh -L {tunnel_port}:localhost:{args.port} {socket.gethostname()}, "
              f"then open {url}", flush=True)
    print("each browser tab is a dashboard of its own; Ctrl+C stops serving (runs go on)", flush=True)
    server = Server(served_command(root), host=args.host, port=args.port, title="amptui", public_url=url)
    server.serve()
    return 0


def served_by_textual_serve() -> bool:
    """True in a dashboard process that textual-serve started for a browser tab (no terminal,
    its screen goes over the web driver)."""
    return os.environ.get("TEXTUAL_DRIVER") == WEB_DRIVER
