"""A served tab ends with its websocket (issue 40, item 4): `amptui serve` as a user starts it, its
tabs opened by a real websocket client (aiohttp, as textual-serve's page would): a tab resized to
4000x2000 then closed, a browser that stops reading, more tabs than `--max-tabs`. Each tab is a
dashboard process, a child of serve; none may outlive its socket."""

from __future__ import annotations

import asyncio
import re
import signal

import aiohttp
import psutil
import pytest
from support.serve import free_port, get, secret_of, start_serve, stop_serve, tab_processes

ESCAPES = re.compile(r"\x1b\[[0-9;?$<>=]*[A-Za-z]|\x1b\][^\x07]*\x07")


async def open_tab(session: aiohttp.ClientSession, port: int, secret: str, width: int = 100,
                   height: int = 30) -> aiohttp.ClientWebSocketResponse:
    """A tab as the page opens one: the websocket address it was served, from the served origin."""
    return await session.ws_connect(f"ws://127.0.0.1:{port}/{secret}/ws?width={width}&height={height}",
                                    origin=f"http://localhost:{port}", heartbeat=None)


async def drawn(ws: aiohttp.ClientWebSocketResponse, text: str, timeout: float = 120) -> str:
    """What the tab's dashboard drew (escape sequences removed), read until `text` appears."""
    seen = b""
    async with asyncio.timeout(timeout):
        while True:
            message = await ws.receive()
            if message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
                raise AssertionError(f"the tab closed before drawing {text!r}:\n{ESCAPES.sub('', seen.decode(errors='replace'))[-2000:]}")
            seen += message.data if isinstance(message.data, bytes) else str(message.data).encode()
            shown = ESCAPES.sub("", seen.decode(errors="replace"))
            if text in shown:
                return shown


async def until(condition, timeout: float, what: str) -> None:
    """Poll `condition` in the event loop (the websockets stay as they are meanwhile)."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.2)
    assert condition(), what


class Reading:
    """A tab kept as a browser keeps it: its output read as it comes, so its pings are answered
    while the test looks elsewhere (serve ends a tab whose browser answers none)."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse):
        self.ws = ws
        self.seen = b""
        self.task = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        async for message in self.ws:  # ends when the socket closes
            self.seen += message.data if isinstance(message.data, bytes) else str(message.data).encode()

    def text(self) -> str:
        return ESCAPES.sub("", self.seen.decode(errors="replace"))

    async def drawn(self, text: str, timeout: float = 120) -> str:
        await until(lambda: text in self.text() or self.task.done(), timeout, f"{text!r} drawn")
        assert text in self.text(), f"the tab closed before drawing {text!r}:\n{self.text()[-2000:]}"
        return self.text()


async def bytes_received(ws: aiohttp.ClientWebSocketResponse, count: int) -> None:
    got = 0
    while got < count:
        message = await ws.receive()
        if message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
            return
        got += len(message.data) if isinstance(message.data, bytes) else 0


def cpu_seconds(tab: psutil.Process) -> float:
    try:
        times = tab.cpu_times()
    except psutil.Error:
        return float("inf")  # gone: nothing to wait for
    return times.user + times.system


def gone(tab: psutil.Process) -> bool:
    try:
        return tab.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_tab_resized_to_4000_by_2000_then_closed_leaves_no_dashboard_behind(runs_dir):
    """The attack of issue 40: the socket closed while the dashboard drew 8 million cells for it;
    nobody read its output any more, so it blocked on its pipe and stayed (142 MB each)."""
    port = free_port()
    server, address, _ = start_serve(runs_dir, port)
    secret = secret_of(address)
    try:
        async def drive() -> None:
            async with aiohttp.ClientSession() as session:
                ws = await open_tab(session, port, secret)
                await drawn(ws, "Presets")  # the home screen: the dashboard is up
                [tab] = tab_processes(server)
                busy_from = cpu_seconds(tab)
                await ws.send_json(["resize", {"width": 4000, "height": 2000}])
                # close once it has drawn for the new size, or while it is still drawing (a second of CPU)
                received = asyncio.ensure_future(bytes_received(ws, 10_000))
                await until(lambda: received.done() or cpu_seconds(tab) - busy_from > 1.0, 120, "the tab draws")
                received.cancel()
                await ws.close()
                await until(lambda: gone(tab), 120, "the closed tab's dashboard ends")
                # a tab asked for at 4000x2000 from the start is given 500x200
                big = await open_tab(session, port, secret, 4000, 2000)
                await until(lambda: len(tab_processes(server)) == 1, 60, "the second tab starts")
                [tab] = tab_processes(server)
                assert (tab.environ()["COLUMNS"], tab.environ()["ROWS"]) == ("500", "200")
                await big.close()
                await until(lambda: gone(tab), 120, "its dashboard ends with it")

        asyncio.run(drive())
        assert tab_processes(server) == [] and server.poll() is None  # no dashboard left; serving goes on
    finally:
        stop_serve(server)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_browser_that_stops_reading_has_its_tab_ended(runs_dir):
    """A browser that asks for the largest screen and then reads nothing, though it still sends
    its pings as textual-serve's page does (so the websocket's heartbeat sees a live peer): the
    dashboard, its output taken by no one, was left blocked on its pipe for as long as the socket
    stayed open. Its tab is ended."""
    port = free_port()
    server, address, _ = start_serve(runs_dir, port)
    secret = secret_of(address)
    try:
        async def drive() -> None:
            async with aiohttp.ClientSession() as session:
                ws = await open_tab(session, port, secret)
                await drawn(ws, "Presets")
                [tab] = tab_processes(server)
                await ws.send_json(["resize", {"width": 4000, "height": 2000}])  # a lot to draw, for no one
                async with asyncio.timeout(240):
                    while not gone(tab):
                        if not ws.closed:
                            try:
                                await ws.send_json(["ping", str(asyncio.get_running_loop().time())])
                            except ConnectionError:
                                pass  # serve dropped the connection: the tab is ending
                        await asyncio.sleep(0.5)
                await ws.close()

        asyncio.run(drive())
        assert tab_processes(server) == [] and server.poll() is None
    finally:
        output = stop_serve(server)
    assert "a browser tab answered no ping" in output or "a browser tab took none of its output" in output, output


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_one_tab_more_than_max_tabs_is_told_so_in_the_browser_and_the_log(runs_dir):
    port = free_port()
    server, address, _ = start_serve(runs_dir, port, "--max-tabs", "2")
    secret = secret_of(address)
    try:
        async def drive() -> None:
            async with aiohttp.ClientSession() as session:
                first = Reading(await open_tab(session, port, secret))
                second = Reading(await open_tab(session, port, secret))
                for tab in (first, second):
                    await tab.drawn("Presets")
                assert len(tab_processes(server)) == 2
                # the page itself says so, and so does a websocket opened anyway (its first text)
                status, _, page = await asyncio.to_thread(get, port, f"/?token={secret}")
                assert status == 503 and b"--max-tabs 2" in page, page
                third = Reading(await open_tab(session, port, secret))
                told = await third.drawn("close one")
                assert "2 tabs are open already" in told and "--max-tabs 2" in told
                await asyncio.wait_for(third.task, 60)  # then closed by serve
                assert third.ws.close_code == aiohttp.WSCloseCode.TRY_AGAIN_LATER
                assert len(tab_processes(server)) == 2  # no dashboard was started for it
                # once a tab closes, its place is free again
                await first.ws.close()
                await until(lambda: len(tab_processes(server)) < 2, 120, "the closed tab's dashboard ends")
                async with asyncio.timeout(60):  # serve has seen it end: its page is served again
                    while (await asyncio.to_thread(get, port, f"/?token={secret}"))[0] != 200:
                        await asyncio.sleep(0.2)
                fourth = Reading(await open_tab(session, port, secret))
                await fourth.drawn("Presets")
                await second.ws.close()
                await fourth.ws.close()

        asyncio.run(drive())
    finally:
        output = stop_serve(server)
    assert "refused a new tab" in output and "--max-tabs 2" in output, output


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_stopping_serve_ends_its_tabs_dashboards(runs_dir):
    """SIGTERM to serve alone (a service manager, `kill PID`; Ctrl+C reaches the tabs too): its tabs'
    dashboards end with it, while their browsers are still reading."""
    port = free_port()
    server, address, _ = start_serve(runs_dir, port)
    secret = secret_of(address)
    try:
        async def drive() -> list[psutil.Process]:
            async with aiohttp.ClientSession() as session:
                ws = await open_tab(session, port, secret)
                await drawn(ws, "Presets")
                tabs = tab_processes(server)
                server.send_signal(signal.SIGTERM)  # serve itself, not its process group
                closed = await ws.receive(timeout=120)  # the browser keeps reading until serve closes it
                while closed.type not in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
                    closed = await ws.receive(timeout=120)
                return tabs

        tabs = asyncio.run(drive())
        server.wait(timeout=120)
        assert all(gone(tab) for tab in tabs)
    finally:
        if server.poll() is None:
            stop_serve(server)
