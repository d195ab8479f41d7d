"""The secret of `amptui serve` (issue 40, item 5): never in a cookie (every port of localhost would
receive it), never in clear in the log however a client spells it, 32 characters or more, and
wrong ones answered ever more slowly. `amptui serve` as a user starts it, real HTTP clients."""

from __future__ import annotations

import asyncio
from urllib.parse import quote, unquote

import pytest

from amptui.cli.serve_guard import GuardedServer, masked
from amptui.cli.serve_pause import FIRST_PAUSE_S, FREE_GUESSES, LONGEST_PAUSE_S, LONGEST_WAIT_S, Pauses

SECRET = "Kq3-_x.~" * 5  # 40 characters, each kind a secret may hold


def every_letter_encoded(text: str) -> str:
    return "".join(f"%{ord(c):02X}" for c in text)


def fully_decoded(text: str) -> str:
    for _ in range(6):
        text = unquote(text)
    return text


@pytest.mark.parametrize("line", [
    f'"GET /?token={SECRET} HTTP/1.1"',
    f'"GET /?%74oken={SECRET} HTTP/1.1"',  # what the issue found logged in clear
    f'"GET /?%2574oken={SECRET} HTTP/1.1"',  # encoded twice: not the parameter, still the secret
    f'"GET /?x={every_letter_encoded(SECRET)} HTTP/1.1"',
    f'"GET /{SECRET}/static/css/xterm.css HTTP/1.1"',  # the page's own requests: in the path
    f'"GET /{quote(SECRET, safe="")}/ws?width=80 HTTP/1.1" 101 "http://localhost:8000/?TOKEN={SECRET}" "curl"',
    f'"GET / HTTP/1.1" 401 "-" "agent {every_letter_encoded(every_letter_encoded(SECRET))}"',
], ids=["token", "%74oken", "%2574oken", "each-letter-encoded", "in-the-path", "path-and-referer", "twice-encoded"])
def test_the_secret_is_masked_in_every_spelling_a_log_line_can_hold(line):
    shown = masked(line, SECRET)
    assert SECRET not in fully_decoded(shown) and "..." in shown, shown


def test_a_decoded_line_break_does_not_start_a_log_line_of_its_own():
    assert masked("GET /?x=%0aINFO fake", SECRET) == "GET /?x=\\x0aINFO fake"


def test_guesses_side_by_side_wait_their_turn_and_a_long_queue_is_refused_unchecked():
    async def guess_many() -> tuple[list[float | None], list[float]]:
        pauses = Pauses()
        for _ in range(12):
            pauses.wrong("10.0.0.9")
        assert pauses.pause("10.0.0.9") == LONGEST_PAUSE_S and pauses.pause("10.0.0.8") == 0.0
        turns = [asyncio.ensure_future(pauses.turn("10.0.0.9")) for _ in range(10)]
        await asyncio.sleep(0)  # each has taken its place in the queue (or been refused)
        refused = [t.result() for t in turns if t.done() and t.result() is not None]  # the first went at once
        for t in turns:
            t.cancel()
        other = await pauses.turn("10.0.0.8")  # another address is not held up
        pauses.right("10.0.0.9")
        cleared = await pauses.turn("10.0.0.9")
        return [other, cleared], refused

    answered, refused = asyncio.run(guess_many())
    assert answered == [None, None]
    waiting = int(LONGEST_WAIT_S // LONGEST_PAUSE_S) + 1  # a queue up to LONGEST_WAIT_S long, then no more
    assert len(refused) == 10 - waiting and all(wait > LONGEST_WAIT_S - LONGEST_PAUSE_S for wait in refused)


def test_the_pause_doubles_after_the_free_guesses():
    pauses = Pauses()
    seen = []
    for _ in range(FREE_GUESSES + 4):
        seen.append(pauses.pause("a"))
        pauses.wrong("a")
    assert seen == [0.0] * FREE_GUESSES + [FIRST_PAUSE_S * 2**k for k in range(4)]


def test_a_download_opens_with_its_own_key_and_nothing_else():
    """A file a tab's dashboard delivers (Textual's screenshot): the page opens /download/KEY,
    an address it builds without the secret; the key, sent over that tab's websocket, opens it."""
    from aiohttp.test_utils import TestClient, TestServer

    class Tab:  # what the download manager asks of the tab that offers the file: here, no chunk
        app_service_id = "tab"

        async def send_meta(self, data):
            return False

    async def fetch() -> list:
        server = GuardedServer("true", secret=SECRET, origins=["http://localhost:8000"])
        async with TestClient(TestServer(await server._make_app())) as client:
            key = "k" * 32
            await server.download_manager.create_download(app_service=Tab(), delivery_key=key, file_name="shot.svg",
                                                          open_method="download", mime_type="image/svg+xml")
            answers = [await client.get(path) for path in
                       ("/download/" + "j" * 32, f"/download/{SECRET}", f"/download/{key}?instance=x")]
            return [a.status for a in answers] + [answers[-1].headers["Content-Disposition"]]

    assert asyncio.run(fetch()) == [403, 403, 200, "attachment; filename=shot.svg"]
