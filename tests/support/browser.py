"""Headless Chromium driven over the Chrome DevTools protocol (aiohttp's websocket client), for the
test of `amptui serve`: open a page, read what its websocket brought, press keys, take a picture.

textual-serve's page draws the terminal on canvases, so the text is not in the DOM: a script added
before the page loads keeps every websocket message the page receives (the served dashboard's
screen updates, as escape sequences) for the test to read.
"""

from __future__ import annotations

import asyncio
import base64
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import aiohttp

# Flags for a sandbox without network, display or GPU (and no first-run chatter).
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                  "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--metrics-recording-only", "--mute-audio",
                  "--remote-debugging-port=0", "--window-size=1280,800"]

KEEP_RECEIVED = """
window.__received = [];
const NativeWebSocket = window.WebSocket;
window.WebSocket = function (...args) {
  const socket = new NativeWebSocket(...args);
  const decoder = new TextDecoder();
  socket.addEventListener("message", (event) => {
    const data = event.data;
    window.__received.push(typeof data === "string" ? data : decoder.decode(data, {stream: true}));
  });
  return socket;
};
window.WebSocket.prototype = NativeWebSocket.prototype;
"""

ESCAPES = re.compile(r"\x1b\[[0-9;?$<>=]*[A-Za-z]|\x1b\][^\x07]*\x07")


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def start_chromium(user_data_dir: Path) -> tuple[subprocess.Popen, str]:
    """Start it; returns the process and its DevTools HTTP address (from DevToolsActivePort)."""
    proc = subprocess.Popen([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={user_data_dir}", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    port_file = user_data_dir / "DevToolsActivePort"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        lines = port_file.read_text().splitlines() if port_file.exists() else []
        if lines and lines[0].isdigit():
            return proc, f"http://127.0.0.1:{lines[0]}"
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    stop_chromium(proc)
    raise RuntimeError(f"chromium did not start (exit {proc.poll()})")


def stop_chromium(proc: subprocess.Popen) -> None:
    """The browser and its renderer and helper processes (its own process group)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


class Page:
    """One tab, driven over its DevTools websocket."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse):
        self.ws = ws
        self.next_id = 0

    async def call(self, method: str, **params) -> dict:
        self.next_id += 1
        ask = self.next_id
        await self.ws.send_json({"id": ask, "method": method, "params": params})
        while True:  # events arrive in between; the answer carries our id
            msg = await self.ws.receive_json()
            if msg.get("id") == ask:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    async def open(self, url: str) -> None:
        await self.call("Page.enable")
        await self.call("Page.addScriptToEvaluateOnNewDocument", source=KEEP_RECEIVED)
        await self.call("Page.navigate", url=url)

    async def evaluate(self, expression: str):
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    async def screen_text(self) -> str:
        """What the served app has sent the page so far, without its escape sequences."""
        received = await self.evaluate("(window.__received || []).join('')") or ""
        return ESCAPES.sub("", received)

    async def mark(self) -> int:
        """How much the page has received so far: `wait_for_text(..., after=mark)` looks only later."""
        return len(await self.screen_text())

    async def wait_for_text(self, text: str, timeout: float = 30, after: int = 0) -> str:
        deadline = time.monotonic() + timeout
        seen = ""
        while time.monotonic() < deadline:
            seen = (await self.screen_text())[after:]
            if text in seen:
                return seen
            await asyncio.sleep(0.25)
        raise AssertionError(f"{text!r} did not appear in the page within {timeout:g} s; it showed:\n{seen[-2000:]}")

    async def press(self, key: str, code: str, key_code: int | None = None) -> None:
        """A key press as a person types it, into the terminal's focused input: a character
        (`key` "?"), or a named key with its key code ("End", 35)."""
        await self.evaluate("document.querySelector('.xterm-helper-textarea').focus()")
        typed = {"text": key} if key_code is None else {"windowsVirtualKeyCode": key_code}
        await self.call("Input.dispatchKeyEvent", type="keyDown", key=key, code=code, **typed)
        await self.call("Input.dispatchKeyEvent", type="keyUp", key=key, code=code,
                        **({} if key_code is None else {"windowsVirtualKeyCode": key_code}))

    async def screenshot(self, path: Path) -> None:
        shot = await self.call("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))


async def first_page(session: aiohttp.ClientSession, devtools: str) -> Page:
    targets = await (await session.get(f"{devtools}/json/list")).json()
    target = next(t for t in targets if t["type"] == "page")
    return Page(await session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0))


async def new_page(session: aiohttp.ClientSession, devtools: str) -> Page:
    """Another tab of the same browser."""
    target = await (await session.put(f"{devtools}/json/new?about:blank")).json()
    return Page(await session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0))


async def tunnel(listen_port: int, target_port: int) -> asyncio.Server:
    """What `ssh -L listen_port:localhost:target_port` does, on this machine: bytes both ways."""

    async def pipe(reader, writer):
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def handle(reader, writer):
        target_reader, target_writer = await asyncio.open_connection("127.0.0.1", target_port)
        await asyncio.gather(pipe(reader, target_writer), pipe(target_reader, writer))

    return await asyncio.start_server(handle, "127.0.0.1", listen_port)
