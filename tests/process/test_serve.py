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
from support.records import wait_for_end
from support.serve import free_port, get, secret_of, start_serve, stop_serve
from support.waits import wait_until

ESCAPES = re.compile(r"\x1b\[[0-9;?$<>=]*[A-Za-z]|\x1b\][^\x07]*\x07")


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
