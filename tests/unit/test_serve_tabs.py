"""A served tab ends with its websocket (issue 40, item 4): `amptui serve` as a user starts it, its
tabs opened by a real websocket client (aiohttp, as textual-serve's page would): a tab resized to
4000x2000 then closed, a browser that stops reading, more tabs than `--max-tabs`. Each tab is a
dashboard process, a child of serve; none may outlive its socket."""

from __future__ import annotations

import asyncio

from amptui.cli.serve_tabs import MOST_COLUMNS, MOST_ROWS, Tab, cells


def test_a_browser_gives_a_size_of_1_to_500_by_1_to_200_cells():
    assert cells("4000", MOST_COLUMNS, 80) == 500 and cells(2000, MOST_ROWS, 24) == 200
    assert cells(0, MOST_COLUMNS, 80) == cells(-5, MOST_ROWS, 24) == 1
    assert cells("wide", MOST_COLUMNS, 80) == 80 and cells(None, MOST_ROWS, 24) == 24
    assert cells(float("inf"), MOST_COLUMNS, 80) == 80 and cells(120.7, MOST_COLUMNS, 80) == 120


def test_a_resize_message_reaches_the_dashboard_clamped():
    """What textual-serve's relay does with a browser's `resize`: the meta packet the dashboard reads."""
    sent = []
    tab = Tab("true", write_bytes=None, write_str=None, close=None, download_manager=None,
              on_stalled=lambda: None, on_ended=lambda: None)  # no process: only its packets are looked at

    async def send_meta(data):
        sent.append(data)
        return True

    tab.send_meta = send_meta
    asyncio.run(tab.set_terminal_size(4000, 2000))
    asyncio.run(tab.set_terminal_size(-1, "x"))
    assert sent == [{"type": "resize", "width": 500, "height": 200}, {"type": "resize", "width": 1, "height": 24}]
    assert tab._build_environment(4000, 2000)["COLUMNS"] == "500"
