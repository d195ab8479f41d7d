"""`amptui serve`: the dashboard in a browser through textual-serve, driven in headless Chromium
through an SSH-like tunnel to another local port (so the page's websocket address must come from
--public-url): presets shown, `?` opens the help, a run started in one tab appears in another;
its door tried as an attacker would (raw HTTP and a raw websocket handshake: no secret, a wrong
one, a foreign Origin); a served folder holding an `amptui/` of its own; a read-only dashboard;
and its refusals, in process."""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path

import pytest
from support.cli import one_clear_line
from support.dashboard import LIVE, QUICK, SCALER, Notes, app_for, async_test, copy_runs, home_ready, select_run, until
from support.serve import free_port

from amptui.cli import serve_guard
from amptui.cli.serve import TOKEN_ENV, is_local, public_url
from amptui.dashboard.screens.compare.screen import CompareScreen
from amptui.dashboard.screens.keys import READ_ONLY_ENV, READ_ONLY_WHY
from amptui.dashboard.screens.run.screen import RunScreen
from amptui.jobs.spawn import SAFE_PATH, amptui_python

SECRET = "a-script-chose-this-secret-0123456789"  # 32 characters or more


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
