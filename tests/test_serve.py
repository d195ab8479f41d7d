"""`amptui serve`: the dashboard in a browser through textual-serve, driven in headless Chromium
through an SSH-like tunnel to another local port (so the page's websocket address must come from
--public-url): presets shown, `?` opens the help, a run started in one tab appears in another;
and its refusals, in process."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import one_clear_line, wait_for_end

from amptui.cli.serve import is_local, public_url


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
    (["--host", "10.1.2.3", "--port", "8001"], "anyone who does can start and stop runs"),
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


def wait_for_run_folder(runs_dir: Path, timeout: float = 60) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [d for d in runs_dir.iterdir() if d.is_dir() and not d.name.startswith(".")] \
            if runs_dir.is_dir() else []
        if found:
            return found[0]
        time.sleep(0.2)
    raise AssertionError(f"no run folder appeared in {runs_dir} within {timeout:g} s")


def wait_until_listening(proc: subprocess.Popen, port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[0]
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"amptui serve did not listen on {port} within {timeout:g} s")


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_served_dashboard_works_in_a_browser_through_a_tunnel(cli, runs_dir, tmp_path):
    browser = pytest.importorskip("browser_support")
    if browser.chromium() is None:
        pytest.skip("needs Chromium (Debian: apt-get install chromium); .ci/run installs it")
    # a saved preset of two steps, last in the list, that one tab will run
    cli("presets", "save", "tiny", "--from", "quickstart", "--set", "run.max_steps=2", "--set", "log.every=1",
           "--set", "data.train_samples=128", "--set", "data.val_samples=32", "--set", "amp.autocast=false",
           check=True)
    port, tunnel_port = free_port(), free_port()
    url = f"http://localhost:{tunnel_port}"
    server = subprocess.Popen([sys.executable, "-m", "amptui", "--runs-dir", str(runs_dir), "serve",
                               "--port", str(port), "--public-url", url],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    chrome = None
    try:
        wait_until_listening(server, port)
        # the page's websocket address is the public one (the tunnel's port), not the server's own
        page_html = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30).read().decode()
        assert f'data-session-websocket-url="ws://localhost:{tunnel_port}/ws"' in page_html
        chrome, devtools = browser.start_chromium(tmp_path / "chromium-profile")

        async def drive() -> Path:
            import aiohttp

            tunnel = await browser.tunnel(tunnel_port, port)
            async with aiohttp.ClientSession() as session:
                page = await browser.first_page(session, devtools)
                await page.open(url + "/")
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
                # first appears in its Runs list
                other = await browser.new_page(session, devtools)
                await other.open(url + "/")
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
        os.killpg(server.pid, signal.SIGTERM)  # the server and the dashboard it started for the tab
        output = server.communicate(timeout=30)[0]
    assert f"ssh -L {tunnel_port}:localhost:{port} " in output, output
    assert f"then open {url}" in output, output
