"""A served tab's life (`amptui serve`): one dashboard process per browser websocket, ending with it.

textual-serve's AppService starts a tab's dashboard and relays its output to the browser. Left
alone, a tab could outlive its socket: a `resize` to 4000x2000 makes the dashboard draw 8 million
cells, and once the browser has gone (or stops reading) nobody reads the dashboard's output pipe,
so it blocks there for good and never reads the `quit` textual-serve sends it. Here a tab's size
is clamped; a browser that answers no ping for PONG_WITHIN_S, or takes none of the output for
SEND_TIMEOUT_S, is dropped (aiohttp's own heartbeat is not enough: any data the browser sends
counts as life there, so a client that sends and never reads would live on); and stopping a tab
ends its process: `quit`, a short grace while its output is read and thrown away, then SIGTERM
and SIGKILL through jobs/signals.py. At most `most` tabs run at a time; one more is told so, in
the browser and in serve's log. The relay of the browser's messages is textual-serve's, with the
pings and pongs seen here.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable

from aiohttp import WSCloseCode, WSMsgType, web
from textual_serve.app_service import AppService
from textual_serve.download_manager import DownloadManager

from amptui.jobs import signals

log = logging.getLogger("textual-serve")

MOST_COLUMNS, MOST_ROWS = 500, 200  # a large screen at a small font; more is no view, only load
PING_EVERY_S = 5.0
PONG_WITHIN_S = 20.0  # a browser answers a ping as it reads it (below any script): one that has not has gone
SEND_TIMEOUT_S = 20.0  # a browser that took none of the tab's output for this long is gone
QUIT_GRACE_S = 3.0  # for the dashboard to act on `quit` (its last frames read and dropped)
TERM_GRACE_S = 3.0
POLL_S = 0.05


def cells(value: object, most: int, default: int) -> int:
    """A size a browser sent, as a whole number of cells from 1 to `most` (junk: `default`)."""
    try:
        number = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):
        return default
    return min(max(number, 1), most)


class Tab(AppService):
    """textual-serve's AppService (one dashboard process) whose size is clamped, whose browser
    must keep reading, and whose `stop` ends the process whatever state it is in."""

    def __init__(self, command: str, *, on_stalled: Callable[[], None], on_ended: Callable[[], None], **kwargs):
        super().__init__(command, **kwargs)
        self.on_stalled = on_stalled  # drop the browser's connection
        self.on_ended = on_ended  # the process is gone (or never started): its place is free
        self._ending: asyncio.Future[None] | None = None
        self.answered_at = 0.0  # loop time of the browser's last pong

    def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
        return super()._build_environment(cells(width, MOST_COLUMNS, 80), cells(height, MOST_ROWS, 24))

    async def set_terminal_size(self, width: int, height: int) -> None:
        await super().set_terminal_size(cells(width, MOST_COLUMNS, 80), cells(height, MOST_ROWS, 24))

    async def on_data(self, payload: bytes) -> None:
        try:
            await asyncio.wait_for(self.remote_write_bytes(payload), SEND_TIMEOUT_S)
        except asyncio.TimeoutError:
            self.stalled(f"took none of its output for {SEND_TIMEOUT_S:g} s")
            raise ConnectionResetError("the browser stopped reading") from None  # ends the relay (run())

    def stalled(self, why: str) -> None:
        """The browser has gone or stopped reading: drop its connection, end the dashboard."""
        log.warning("a browser tab %s: the tab is ended", why)
        self.on_stalled()
        self.begin_ending()

    def begin_ending(self) -> asyncio.Future[None]:
        if self._ending is None:
            self._ending = asyncio.ensure_future(self._end())
        return self._ending

    async def stop(self) -> None:
        """End the tab's process and wait for it (called by each way a tab ends; once is enough).
        Shielded: a handler cancelled when serving stops still has its tab ended."""
        await asyncio.shield(self.begin_ending())

    async def _end(self) -> None:
        try:
            process = self._process
            if process is None:
                return
            await self._download_manager.cancel_app_downloads(app_service_id=self.app_service_id)
            if process.returncode is None:
                try:  # its input may be full: a dashboard blocked on its output reads none
                    await asyncio.wait_for(self.send_meta({"type": "quit"}), 1.0)
                except asyncio.TimeoutError:
                    pass
            if self._task is not None:  # the relay may be blocked on a browser that reads nothing
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
                self._task = None
            # the dashboard may have to write its last frames to reach its exit: read and drop them
            dropping = [asyncio.ensure_future(drop(pipe)) for pipe in (process.stdout, process.stderr) if pipe]
            try:
                for signum, grace in ((None, QUIT_GRACE_S), (signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, 30.0)):
                    if signum is not None:
                        signals.signal_tab(process, signum)
                    if await exited(process, grace):
                        break
                else:
                    log.error("a tab's dashboard (pid %d) outlived SIGKILL", process.pid)
            finally:
                for task in dropping:
                    task.cancel()
        finally:
            self.on_ended()


async def drop(pipe: asyncio.StreamReader) -> None:
    while await pipe.read(1 << 16):
        pass


async def exited(process: asyncio.subprocess.Process, within_s: float) -> bool:
    """True once `process` has exited and been reaped (its return code known), False if not within
    `within_s`. Polled, not `wait()`ed: a run the dashboard started could hold its pipes open."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while process.returncode is None:
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(POLL_S)
    return True


class Tabs:
    """The tabs of one serve: at most `most` dashboards at a time."""

    def __init__(self, command: str, most: int, downloads: DownloadManager, debug: Callable[[], bool]):
        self.command = command
        self.most = most
        self.live = 0
        self.open: dict[Tab, web.WebSocketResponse] = {}
        self.downloads = downloads
        self.debug = debug

    def full(self) -> bool:
        return self.live >= self.most

    async def end_all(self, app: web.Application) -> None:
        """Serving stops (Ctrl+C, SIGTERM): every tab's dashboard is ended and its socket closed
        now, not when aiohttp's shutdown gives up waiting on the handlers."""
        endings = [tab.begin_ending() for tab in self.open]
        for websocket in list(self.open.values()):
            await websocket.close(code=WSCloseCode.GOING_AWAY, message=b"amptui serve stopped")
        await asyncio.gather(*endings, return_exceptions=True)

    def refusal(self) -> str:
        return (f"{self.live} tabs are open already, the most this amptui serve runs (--max-tabs {self.most}): "
                "close one, then reload this page")

    def refused(self, request: web.Request) -> str:
        """Say in serve's log that a tab was refused; the text for the browser."""
        log.warning("refused a new tab to %s: %s", request.remote, self.refusal())
        return self.refusal()

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        """The websocket that drives a tab: its dashboard starts with it and ends with it."""
        websocket = web.WebSocketResponse(autoping=False)  # pings and pongs relayed here, seen
        await websocket.prepare(request)
        if self.full():
            # the page shows what comes first as the terminal's text
            await websocket.send_bytes(f"\r\n  amptui serve: {self.refused(request)}\r\n".encode())
            await websocket.close(code=WSCloseCode.TRY_AGAIN_LATER, message=b"too many tabs")
            return websocket
        self.live += 1

        def ended() -> None:
            self.live -= 1

        def drop_connection() -> None:
            if request.transport is not None:
                request.transport.abort()

        tab = Tab(self.command, write_bytes=websocket.send_bytes, write_str=websocket.send_str,
                  close=websocket.close, download_manager=self.downloads, debug=self.debug(),
                  on_stalled=drop_connection, on_ended=ended)
        watching: asyncio.Future[None] | None = None
        self.open[tab] = websocket
        try:
            await tab.start(cells(request.query.get("width"), MOST_COLUMNS, 80),
                            cells(request.query.get("height"), MOST_ROWS, 24))
            watching = asyncio.ensure_future(watch(websocket, tab))  # once there is a process to end
            await relay(websocket, tab)
        except ConnectionError:  # the browser went while a pong or a key was on its way
            pass
        except (ValueError, TypeError, KeyError, IndexError) as error:  # not what its page sends
            log.warning("a tab sent what textual-serve's page never sends (%s): the tab is ended", type(error).__name__)
        finally:
            if watching is not None:
                watching.cancel()
            await tab.stop()
            self.open.pop(tab, None)
            if not websocket.closed:
                await websocket.close()
        return websocket


async def relay(websocket: web.WebSocketResponse, tab: Tab) -> None:
    """What the browser sends, to the tab (textual-serve's Server._process_messages, which skips
    the pongs), until the socket closes."""
    async for message in websocket:
        if message.type == WSMsgType.PONG:
            tab.answered_at = asyncio.get_running_loop().time()
        elif message.type == WSMsgType.PING:
            await websocket.pong(message.data)
        elif message.type == WSMsgType.TEXT:
            kind, *data = message.json()
            if kind == "stdin":
                await tab.send_bytes(str(data[0]).encode("utf-8"))
            elif kind == "resize":
                await tab.set_terminal_size(data[0]["width"], data[0]["height"])
            elif kind == "ping":
                await websocket.send_json(["pong", data[0]])
            elif kind == "blur":
                await tab.blur()
            elif kind == "focus":
                await tab.focus()


async def watch(websocket: web.WebSocketResponse, tab: Tab) -> None:
    """Ping the browser every PING_EVERY_S; one that has answered none for PONG_WITHIN_S has gone
    or stopped reading: its tab is ended."""
    loop = asyncio.get_running_loop()
    tab.answered_at = loop.time()
    while not websocket.closed:
        await asyncio.sleep(PING_EVERY_S)
        if loop.time() - tab.answered_at > PONG_WITHIN_S:
            tab.stalled(f"answered no ping for {PONG_WITHIN_S:g} s")
            return
        try:  # a ping waits behind output the browser has not taken: bounded too
            await asyncio.wait_for(websocket.ping(), PONG_WITHIN_S)
        except asyncio.TimeoutError:
            tab.stalled(f"took none of its output for {PONG_WITHIN_S:g} s")
            return
        except ConnectionError:
            return
