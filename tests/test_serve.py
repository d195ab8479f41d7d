"""`amptui serve`: the dashboard in a browser through textual-serve, driven in headless Chromium
through an SSH-like tunnel to another local port (so the page's websocket address must come from
--public-url): presets shown, `?` opens the help, a run started in one tab appears in another;
its door tried as an attacker would (raw HTTP and a raw websocket handshake: no secret, a wrong
one, a foreign Origin); a served folder holding an `amptui/` of its own; a read-only dashboard;
and its refusals, in process."""

from __future__ import annotations

import asyncio
import base64
import os
import re
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from support.cli import one_clear_line
from support.dashboard import LIVE, QUICK, SCALER, Notes, app_for, async_test, copy_runs, home_ready, select_run, until
from support.records import wait_for_end
from support.serve import free_port, get, secret_of, start_serve, stop_serve
from support.waits import wait_until

from amptui.cli import serve_guard
from amptui.cli.serve import TOKEN_ENV, is_local, public_url
from amptui.dashboard.screens.compare.screen import CompareScreen
from amptui.dashboard.screens.keys import READ_ONLY_ENV, READ_ONLY_WHY
from amptui.dashboard.screens.run.screen import RunScreen
from amptui.jobs.spawn import SAFE_PATH, amptui_python

SECRET = "a-script-chose-this-secret-0123456789"  # 32 characters or more

ESCAPES = re.compile(r"\x1b\[[0-9;?$<>=]*[A-Za-z]|\x1b\][^\x07]*\x07")


@pytest.mark.parametrize("host, local", [("localhost", True), ("127.0.0.1", True), ("::1", True),
                                         ("127.0.0.2", True), ("0.0.0.0", False), ("10.1.2.3", False),
                                         ("box.example.org", False), ("::", False)])
def test_only_loopback_counts_as_local(host, local):
    assert is_local(host) is local


def test_public_url_defaults_to_the_listening_address_and_refuses_paths():
    assert public_url(None, "localhost", 8000) == "http://localhost:8000"
    assert public_url("http://localhost:9000/", "localhost", 8000) == "http://localhost:9000"
    assert public_url("https://dash.example.org", "localhost", 8000) == "https://dash.example.org"
    # every interface: the page needs an address a browser can reach, the machine's name
    assert public_url(None, "0.0.0.0", 8000) == f"http://{socket.gethostname()}:8000"


def test_serve_says_a_bad_keymap_once_before_serving(cli):
    from amptui.core import userconfig

    path = userconfig.config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('[keymap]\n"home.runn" = "r"\n')
    assert "keymap.home.runn: no such action" in one_clear_line(cli("serve", "--port", "8765"))


@pytest.mark.parametrize("args, says", [
    (["--host", "0.0.0.0"], "--allow-remote"),
    (["--host", "10.1.2.3", "--port", "8001"], "whoever does with its address can start and stop runs"),
    (["--token", "short"], "--token: expected 32 or more"),
    (["--token", "x" * 31], "--token: expected 32 or more"),
    (["--token", "thirty-two characters and spaces"], "--token: expected 32 or more"),
    (["--max-tabs", "0"], "--max-tabs 0: expected a number of tabs from 1"),
    (["--public-url", "localhost:9000"], "--public-url"),
    (["--public-url", "http://localhost:9000/amptui"], "without a path"),
    (["--public-url", "http://localhost:99999"], "port"),
    (["--port", "0"], "--port 0"),
])
def test_serve_refuses_with_one_line(cli, args, says):
    assert says in one_clear_line(cli("serve", *args))


def test_serve_refuses_a_taken_port(cli):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert "choose another --port" in one_clear_line(cli("serve", "--host", "127.0.0.1", "--port", str(port)))


@pytest.fixture
def served(monkeypatch):
    """`amptui serve` in process up to the server's start: what it would serve, not served."""
    made = []

    def serve(self, debug=False):
        made.append(self)

    monkeypatch.setattr(serve_guard.GuardedServer, "serve", serve)
    return made


def printed_secret(stdout: str) -> str:
    return re.search(r"\?token=([A-Za-z0-9._~-]+)", stdout).group(1)


def test_each_serve_prints_an_address_with_a_new_secret(cli, served, monkeypatch):
    port = free_port()
    first, second = (cli("serve", "--port", str(port), check=True) for _ in range(2))
    secret = printed_secret(first.stdout)
    assert first.stdout.splitlines()[-1] == f"http://localhost:{port}/?token={secret}"  # last, a line of its own
    assert len(first.stdout.splitlines()[-1]) <= 80  # an 80-column terminal never wraps inside the secret
    assert len(secret) >= 43 and secret != printed_secret(second.stdout)  # 256 random bits each time
    assert served[0].secret == secret
    # a script's own secret, from the environment (not seen in the process list) or --token
    monkeypatch.setenv(TOKEN_ENV, SECRET)
    assert printed_secret(cli("serve", "--port", str(port), check=True).stdout) == SECRET
    assert TOKEN_ENV not in os.environ  # not handed on to the tabs' dashboards and the runs they start
    given = cli("serve", "--port", str(port), "--token", "x" * 32, check=True)
    assert served[-1].secret == printed_secret(given.stdout) == "x" * 32


def test_a_bad_secret_in_the_environment_is_one_line(cli, served):
    assert f"{TOKEN_ENV}: expected 32 or more" in one_clear_line(cli("serve", env={TOKEN_ENV: "x y"}))
    assert not served


def test_the_tunnel_line_names_the_served_address(cli, served):
    """--host 127.0.0.2 is served there: the tunnel reaches 127.0.0.2 (it said localhost), bound to
    the address the printed URL names; a tunnel to another local port keeps ssh's own localhost."""
    port = free_port()
    out = cli("serve", "--host", "127.0.0.2", "--port", str(port), check=True).stdout
    secret = printed_secret(out)
    assert f"ssh -L 127.0.0.2:{port}:127.0.0.2:{port} {socket.gethostname()}, then open the address below" \
        in out, out
    assert out.splitlines()[-1] == f"http://127.0.0.2:{port}/?token={secret}"
    out = cli("serve", "--host", "127.0.0.2", "--port", str(port), "--public-url", "http://localhost:9000",
              check=True).stdout
    assert f"ssh -L 9000:127.0.0.2:{port} " in out, out
    assert served[-1].origins == {("http", "localhost", 9000), ("http", "127.0.0.2", port)}
    out = cli("serve", "--port", str(port), "--public-url", "https://dash.example.org", check=True).stdout
    assert "ssh -L" not in out  # a reverse proxy: no tunnel to suggest


def test_each_tab_runs_amptui_from_the_home_folder_with_the_working_folder_off_its_path(cli, served, runs_dir):
    cli("serve", "--port", str(free_port()), check=True)
    cli("serve", "--port", str(free_port()), "--read-only", check=True)
    python = " ".join(amptui_python())
    home = Path.home()
    assert served[0].command == f"cd {home} && exec {python} -m amptui --runs-dir {runs_dir.resolve()}"
    assert served[1].command == f"cd {home} && {READ_ONLY_ENV}=1 exec {python} -m amptui --runs-dir {runs_dir.resolve()}"
    assert SAFE_PATH in served[0].command.split()


def wait_for_run_folder(runs_dir: Path, timeout: float = 60) -> Path:
    found = wait_until(lambda: [d for d in runs_dir.iterdir() if d.is_dir() and not d.name.startswith(".")]
                       if runs_dir.is_dir() else [], timeout, f"a run folder in {runs_dir}", step=0.2)
    return found[0]


def handshake(port: int, origin: str | None, path: str, cookie: str | None = None) -> tuple[int, socket.socket]:
    """A websocket opening handshake as any program can send it: (the status, the open socket)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    lines = [f"GET {path} HTTP/1.1", f"Host: localhost:{port}", "Upgrade: websocket", "Connection: Upgrade",
             f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}", "Sec-WebSocket-Version: 13"]
    lines += [f"Origin: {origin}"] * (origin is not None) + [f"Cookie: {cookie}"] * (cookie is not None)
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        data = sock.recv(1)  # one byte at a time: nothing of the first frame is read with the head
        if not data:
            break
        head += data
    return int(head.split(b" ", 2)[1]), sock


def send_frame(sock: socket.socket, opcode: int, payload: bytes) -> None:
    """A client's frame (masked, as RFC 6455 asks of clients); payloads under 126 bytes."""
    mask = os.urandom(4)
    sock.sendall(bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))


def read_until(sock: socket.socket, text: str, timeout: float = 90) -> str:
    """What the served dashboard has drawn (its frames' payloads, escape sequences removed), read
    until `text` appears; pings answered, so a slow start is not taken for a dead client."""
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            more = sock.recv(n - len(data))
            if not more:
                raise AssertionError(f"the websocket closed; the dashboard drew:\n{ESCAPES.sub('', seen.decode(errors='replace'))[-2000:]}")
            data += more
        return data

    seen = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        first, second = exactly(2)
        size = second & 0x7F
        size = int.from_bytes(exactly(2 if size == 126 else 8), "big") if size >= 126 else size
        payload = exactly(size)
        opcode = first & 0x0F
        if opcode == 0x9:
            send_frame(sock, 0xA, payload)
        elif opcode == 0x8:
            break
        elif opcode in (0x0, 0x1, 0x2):
            seen += payload
            if text in ESCAPES.sub("", seen.decode(errors="replace")):
                return ESCAPES.sub("", seen.decode(errors="replace"))
    raise AssertionError(f"{text!r} not drawn; the dashboard drew:\n{ESCAPES.sub('', seen.decode(errors='replace'))[-2000:]}")


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_no_page_file_or_websocket_without_the_secret_and_no_websocket_from_another_site(runs_dir):
    """What another user on the machine, or a page the user visits while a tunnel is open, can send.
    The page's own requests carry the secret in their path (no cookie: every port of localhost
    would receive it)."""
    port = free_port()
    server, address, _ = start_serve(runs_dir, port, "--access-log")
    try:
        secret = secret_of(address)
        for path in ("/", "/static/js/textual.js", "/ws", "/?fontsize=20", "/favicon.ico"):
            assert get(port, path)[0] == 401, path
        assert get(port, "/download/x")[0] == 403  # a download opens with its own key only
        for wrong in ("A" * len(secret), secret[:-1]):  # a few (more are answered ever more slowly)
            assert get(port, f"/?token={wrong}")[0] == 403, wrong
            assert get(port, f"/{wrong}/static/js/textual.js")[0] == 403, wrong
        status, answer, page = get(port, f"/?token={secret}")
        assert status == 200 and f'data-session-websocket-url="ws://localhost:{port}/{secret}/ws"'.encode() in page
        assert "Set-Cookie" not in answer.headers and answer.headers["Referrer-Policy"] == "no-referrer"
        assert f'href="http://localhost:{port}/{secret}/static/css/xterm.css"'.encode() in page
        assert get(port, f"/{secret}/static/js/textual.js")[0] == 200  # the page's files: the secret in their path
        assert get(port, "/static/js/textual.js", f"amptui-serve-{port}={secret}")[0] == 401  # no cookie opens a door
        served_origin, ws = f"http://localhost:{port}", f"/{secret}/ws"
        refused = [(served_origin, "/ws"), (served_origin, f"/guess-{secret}/ws"), ("http://evil.example", ws),
                   ("http://evil.example", f"/ws?token={secret}"), (f"http://localhost:{port % 65535 + 1}", ws),
                   ("null", ws), (f"https://localhost:{port}", ws)]
        for origin, path in refused:
            status, sock = handshake(port, origin, path=path)
            sock.close()
            assert status in (401, 403), (origin, path, status)
        status, sock = handshake(port, served_origin, path=ws)
        sock.close()
        assert status == 101
    finally:
        output = stop_serve(server)
    # its request log (asked for) never names the secret (printed before it, in the address), however it wraps
    logged = re.sub(r"\s+", "", output)
    assert secret not in logged and "GET/?token=...HTTP/1.1" in logged, output
    assert "GET/.../static/js/textual.jsHTTP/1.1" in logged, output


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_serving_logs_no_request_unless_asked_and_says_the_address_again_for_a_question_mark(runs_dir):
    """The printed address stays the last thing on the screen: no line per browser request (issue
    45); `?` then Enter on the console prints it again, last."""
    port = free_port()
    server, address, said = start_serve(runs_dir, port, stdin=subprocess.PIPE)
    try:
        secret = address.split("?token=")[1]
        for path in (f"/?token={secret}", "/static/css/xterm.css", "/nowhere"):
            get(port, path)
        server.stdin.write(b"?\n")
        server.stdin.flush()
        again = ""
        while address not in again:
            line = server.stdout.readline().decode()
            assert line, f"amptui serve ended, saying:\n{said + again}"
            again += line
    finally:
        output = said + again + stop_serve(server)
    assert "GET" not in output and "HTTP/1.1" not in output, output
    assert again.rstrip("\n").splitlines()[-1] == address


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_serving_from_a_folder_that_holds_an_amptui_of_its_own_never_imports_it(runs_dir, tmp_path):
    """`python -m amptui` puts the working folder first on the path: a planted `amptui/` ran as the
    serving user in every tab, and the tabs were blank."""
    planted, marker = tmp_path / "planted", tmp_path / "planted-code-ran"
    (planted / "amptui").mkdir(parents=True)
    (planted / "amptui" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    (planted / "amptui" / "__main__.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    port = free_port()
    server, address, _ = start_serve(runs_dir, port, cwd=planted)
    try:
        status, sock = handshake(port, f"http://localhost:{port}", f"/{secret_of(address)}/ws?width=160&height=40")
        assert status == 101
        with sock:
            drawn = read_until(sock, "scaler-lab")  # the home screen's presets: the real dashboard
            assert "Presets" in drawn
        assert not marker.exists()
    finally:
        output = stop_serve(server)
    assert not marker.exists(), output


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_served_dashboard_works_in_a_browser_through_a_tunnel(cli, runs_dir, tmp_path):
    browser = pytest.importorskip("support.browser")
    if browser.chromium() is None:
        pytest.skip("needs Chromium (Debian: apt-get install chromium); .ci/run installs it")
    # a saved preset of two steps, last in the list, that one tab will run
    cli("presets", "save", "tiny", "--from", "quickstart", "--set", "run.max_steps=2", "--set", "log.every=1",
           "--set", "data.train_samples=128", "--set", "data.val_samples=32", "--set", "amp.autocast=false",
           check=True)
    port, tunnel_port = free_port(), free_port()
    url = f"http://localhost:{tunnel_port}"
    server, address, said = start_serve(runs_dir, port, "--public-url", url)
    assert address.startswith(url + "/?token=")  # the address to open, secret included
    chrome = None
    try:
        # the page's websocket address is the public one (the tunnel's port), not the server's own
        secret = address.split("?token=")[1]
        page_html = urllib.request.urlopen(f"http://127.0.0.1:{port}/?token={secret}", timeout=30).read().decode()
        assert f'data-session-websocket-url="ws://localhost:{tunnel_port}/{secret}/ws"' in page_html
        chrome, devtools = browser.start_chromium(tmp_path / "chromium-profile")

        async def drive() -> Path:
            import aiohttp

            tunnel = await browser.tunnel(tunnel_port, port)
            async with aiohttp.ClientSession() as session:
                page = await browser.first_page(session, devtools)
                await page.open(address)
                shown = await page.wait_for_text("scaler-lab", timeout=60)  # the home screen's presets
                for preset in ("quickstart", "mlp-recipe", "alexnet-cifar10"):
                    assert preset in shown
                await page.wait_for_text(str(runs_dir), timeout=30)  # the tab reads the runs folder serve was given
                await asyncio.sleep(0.5)
                shot = Path(os.environ.get("AMPTUI_SCREENSHOT_DIR", tmp_path)) / "served-home.png"
                await page.screenshot(shot)
                assert shot.read_bytes().startswith(b"\x89PNG")
                await page.press("?", "Slash")
                await page.wait_for_text("Keys of the home screen", timeout=30)  # the help screen opened
                mark = await page.mark()
                await page.press("Escape", "Escape", 27)
                await page.wait_for_text("Presets", timeout=30, after=mark)  # home drawn again
                # a key sent within Textual's escape delay would be read as part of an escape sequence
                await asyncio.sleep(0.5)

                # a second tab is a dashboard of its own over the same runs folder: a run started in the
                # first appears in its Runs list (opened at the same address: no cookie carries the secret)
                other = await browser.new_page(session, devtools)
                await other.open(address)
                await other.wait_for_text("no runs yet", timeout=60)
                mark = await page.mark()
                await page.press("End", "End", 35)  # the last preset: tiny
                await page.wait_for_text("tiny", timeout=30, after=mark)  # its line redrawn highlighted
                await page.press("r", "KeyR")
                run_dir = await asyncio.to_thread(wait_for_run_folder, runs_dir)
                await other.wait_for_text(run_dir.name[-4:], timeout=60)
            tunnel.close()
            return run_dir

        run_dir = asyncio.run(drive())
        assert wait_for_end(run_dir)[-1]["status"] == "completed"
        assert run_dir.name.endswith(("-tiny-" + run_dir.name[-4:]))
    finally:
        if chrome is not None:
            browser.stop_chromium(chrome)
        output = said + stop_serve(server)
    assert f"ssh -L {tunnel_port}:localhost:{port} " in output, output
    assert "then open the address below" in output and f"\n{address}\n" in output, output


# --- serve --read-only: the dashboard each tab runs ------------------------------------------------------

@async_test
async def test_a_read_only_dashboard_watches_and_compares_but_starts_stops_and_deletes_nothing(root, monkeypatch):
    copy_runs(root, live=True)
    monkeypatch.setenv(READ_ONLY_ENV, "1")  # what `amptui serve --read-only` gives each tab's dashboard
    started, stopped, deleted = [], [], []
    monkeypatch.setattr("amptui.jobs.detached.subprocess.run", lambda command, **kw: started.append(command))
    monkeypatch.setattr("amptui.jobs.launch.stop", lambda run_dir, wait_s=60.0: stopped.append(run_dir))
    monkeypatch.setattr("amptui.core.run.runops.delete_run", lambda *a, **kw: deleted.append(a))
    app = app_for(root)
    notes = Notes().install(app)
    async with app.run_test(size=(110, 34)) as pilot:
        home = await home_ready(pilot, 3)
        home.query_one("#presets").focus()
        off = {"r", "a", "t", "s", "R", "x"}
        assert not off & {b.binding.key for b in app.active_bindings.values() if b.binding.show}  # not in the footer
        for key in ("r", "a", "t", "s", "e"):  # run, A/B, tune, save as, a script: each says why, nothing opens
            notes.clear()
            await pilot.press(key)
            await until(pilot, lambda: READ_ONLY_WHY in notes.text())
            assert app.screen is home, key
        await select_run(pilot, QUICK)
        for key in ("x", "R"):  # delete, resume
            notes.clear()
            await pilot.press(key)
            await until(pilot, lambda: READ_ONLY_WHY in notes.text())
            assert app.screen is home, key
        await pilot.press("question_mark")  # the help lists them, off, and why
        await until(pilot, lambda: app.screen is not home)
        rows = {what: why for _, what, why in app.screen.rows}
        assert all(rows[what] == READ_ONLY_WHY for what in ("Run", "A/B", "Tune", "Save", "Resume", "Delete", "Script"))
        assert rows["Watch"] == rows["Compare"] == ""
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is home)

        # compare two runs, then watch the live one: there, s (stop) is off too
        for run_id in (QUICK, SCALER):
            await select_run(pilot, run_id)
            await pilot.press("space")
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.rows)
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is home)
        await select_run(pilot, LIVE)
        await pilot.press("w")
        await until(pilot, lambda: isinstance(app.screen, RunScreen))
        screen = app.screen
        await until(pilot, lambda: screen.model.status == "running" and not screen.model.loading)
        notes.clear()
        await pilot.press("s")
        await until(pilot, lambda: READ_ONLY_WHY in notes.text())
        assert app.screen is screen and "s" not in {b.binding.key for b in app.active_bindings.values() if b.binding.show}
        notes.clear()
        stop = next(c for c in app.get_system_commands(screen) if c.title == "Stop")
        await stop.callback()  # what picking Stop in the command palette (ctrl+p) does: says the same
        assert READ_ONLY_WHY in notes.text()
    assert not started and not stopped and not deleted
    assert (root / QUICK).is_dir()
