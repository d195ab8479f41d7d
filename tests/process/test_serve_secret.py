"""The secret of `amptui serve` (issue 40, item 5): never in a cookie (every port of localhost would
receive it), never in clear in the log however a client spells it, 32 characters or more, and
wrong ones answered ever more slowly. `amptui serve` as a user starts it, real HTTP clients."""

from __future__ import annotations

import http.client
import re
import time
from urllib.parse import unquote

import pytest
from support.serve import free_port, get, secret_of, start_serve, stop_serve

from amptui.cli.serve_pause import FIRST_PAUSE_S, FREE_GUESSES

SECRET = "Kq3-_x.~" * 5  # 40 characters, each kind a secret may hold


def every_letter_encoded(text: str) -> str:
    return "".join(f"%{ord(c):02X}" for c in text)


def fully_decoded(text: str) -> str:
    for _ in range(6):
        text = unquote(text)
    return text


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_the_log_never_shows_the_secret_however_a_client_spells_it(runs_dir):
    port = free_port()
    server, address, said = start_serve(runs_dir, port, "--access-log", "--token", SECRET)
    try:
        assert secret_of(address) == SECRET
        assert get(port, f"/?%74oken={SECRET}")[0] == 200  # the same parameter, percent-encoded
        assert get(port, f"/?token={every_letter_encoded(SECRET)}")[0] == 200
        assert get(port, f"/{SECRET}/static/css/xterm.css")[0] == 200
        assert get(port, f"/?%2574oken={SECRET}")[0] == 401  # not the parameter, but the secret all the same
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/nowhere", headers={"Referer": f"http://localhost:{port}/?token={SECRET}",
                                                  "User-Agent": f"curl {every_letter_encoded(SECRET)}"})
        assert conn.getresponse().status == 401
        conn.close()
    finally:
        output = stop_serve(server)
    logged = re.sub(r"\s+", "", output)
    assert logged.count("GET/") >= 5, output  # each request was logged
    assert SECRET not in fully_decoded(logged), output
    assert said.count(SECRET) == 1  # the printed address, nothing else


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_wrong_secrets_are_answered_ever_more_slowly_and_the_right_one_still_opens(runs_dir):
    """~400 guesses a second were answered: after a few wrong ones each waits longer than the last."""
    port = free_port()
    server, address, _ = start_serve(runs_dir, port)
    try:
        secret = secret_of(address)
        wrongs = FREE_GUESSES + 4
        started = time.monotonic()
        for n in range(wrongs):
            assert get(port, f"/?token=!{n}{secret[2:]}")[0] == 403  # `!` is never in a secret: wrong for sure
        took = time.monotonic() - started
        least = sum(FIRST_PAUSE_S * 2**k for k in range(wrongs - FREE_GUESSES - 1))  # the waits between them
        assert took >= least, took
        assert get(port, f"/?token={secret}")[0] == 200  # after its turn
        assert get(port, f"/{secret}/static/css/xterm.css")[0] == 200  # and the address is cleared
    finally:
        stop_serve(server)
