"""Wrong secrets answered ever more slowly (`amptui serve`), per client address.

After FREE_GUESSES wrong secrets from one address, each next secret from there is checked only
after a pause that doubles with every wrong one (FIRST_PAUSE_S up to LONGEST_PAUSE_S). Requests
sent side by side wait their turn one behind the other, and once that queue is LONGEST_WAIT_S
long they are refused unchecked (429): however many connections a guesser opens, one secret is
checked per pause. A right secret clears its address. Every local user shares 127.0.0.1, so a
guesser also slows the rightful user there, by at most LONGEST_WAIT_S a request: the price of a
door that cannot be tried 400 times a second.
"""

from __future__ import annotations

import asyncio

FREE_GUESSES = 3  # a mistyped or stale address, reloaded a couple of times, is not slowed
FIRST_PAUSE_S = 0.25
LONGEST_PAUSE_S = 8.0
LONGEST_WAIT_S = 30.0
MOST_ADDRESSES = 4096  # remembered at once (the oldest forgotten first)


class Pauses:
    def __init__(self) -> None:
        self.wrongs: dict[str, int] = {}
        self.next_turn: dict[str, float] = {}  # loop time before which no secret from there is checked

    def pause(self, address: str) -> float:
        """How long the next secret from `address` waits behind this one."""
        wrongs = self.wrongs.get(address, 0)
        if wrongs < FREE_GUESSES:
            return 0.0
        return min(FIRST_PAUSE_S * 2 ** min(wrongs - FREE_GUESSES, 16), LONGEST_PAUSE_S)

    async def turn(self, address: str) -> float | None:
        """Wait until a secret from `address` may be checked, and return None; or, when the queue
        from there is too long already, return how long it is (s) at once: refuse it unchecked."""
        now = asyncio.get_running_loop().time()
        turn = max(now, self.next_turn.get(address, now))
        if turn - now > LONGEST_WAIT_S:
            return turn - now
        self.next_turn.pop(address, None)  # re-inserted last: the dict's order is how recent
        self.next_turn[address] = turn + self.pause(address)
        self._forget_oldest()
        if turn > now:
            await asyncio.sleep(turn - now)
        return None

    def wrong(self, address: str) -> None:
        self.wrongs[address] = self.wrongs.get(address, 0) + 1

    def right(self, address: str) -> None:
        self.wrongs.pop(address, None)
        self.next_turn.pop(address, None)

    def _forget_oldest(self) -> None:
        while len(self.next_turn) > MOST_ADDRESSES:
            oldest = next(iter(self.next_turn))
            self.next_turn.pop(oldest)
            self.wrongs.pop(oldest, None)
