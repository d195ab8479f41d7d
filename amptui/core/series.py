"""Bounded, downsampled time series: a million points in, at most `cap` kept.

Points are merged in buckets of `stride` consecutive samples; whenever more than `cap` buckets
are held, neighbours are merged pairwise and the stride doubles. Memory stays O(cap) whatever
the run length, and the curve keeps its shape (mean for noisy metrics, last for piecewise
constant ones like the loss scale, max for memory peaks).
"""

from __future__ import annotations

from typing import Literal

Mode = Literal["mean", "last", "max", "min"]


class Series:
    __slots__ = ("cap", "mode", "xs", "ys", "stride", "_px", "_py", "_pn", "count")

    def __init__(self, cap: int = 512, mode: Mode = "mean"):
        if cap < 2:
            raise ValueError("cap must be >= 2")
        self.cap = cap
        self.mode = mode
        self.xs: list[float] = []
        self.ys: list[float] = []
        self.stride = 1
        self._px: float | None = None
        self._py = 0.0
        self._pn = 0
        self.count = 0  # points ever added

    def _merge(self, a: float, b: float, na: int = 1, nb: int = 1) -> float:
        if self.mode == "mean":
            return (a * na + b * nb) / (na + nb)
        if self.mode == "last":
            return b
        if self.mode == "max":
            return a if a >= b else b
        return a if a <= b else b

    def add(self, x: float, y: float | None) -> None:
        if y is None or y != y:  # None or NaN: nothing to draw
            return
        self.count += 1
        if self._pn == 0:
            self._py = float(y)
        else:
            self._py = self._merge(self._py, float(y), self._pn, 1)
        self._px = x
        self._pn += 1
        if self._pn >= self.stride:
            self.xs.append(self._px)
            self.ys.append(self._py)
            self._pn = 0
            self._px = None
            if len(self.xs) > self.cap:
                self._halve()

    def rewind(self, x: float) -> None:
        """Forget points after `x`: a run resumed from an earlier checkpoint redoes those steps."""
        while self.xs and self.xs[-1] > x:
            self.xs.pop()
            self.ys.pop()
        if self._px is not None and self._px > x:
            self._px, self._pn = None, 0

    def _halve(self) -> None:
        xs, ys = self.xs, self.ys
        n = len(xs) - (len(xs) % 2)
        new_x = xs[1:n:2]
        new_y = [self._merge(ys[i], ys[i + 1]) for i in range(0, n, 2)]
        if n < len(xs):  # an odd one out stays as the newest bucket
            new_x.append(xs[-1])
            new_y.append(ys[-1])
        self.xs, self.ys = new_x, new_y
        self.stride *= 2

    def points(self) -> tuple[list[float], list[float]]:
        """Copies of the kept points plus the partly filled newest bucket (so the tip is live)."""
        xs, ys = list(self.xs), list(self.ys)
        if self._pn:
            xs.append(self._px)  # type: ignore[arg-type]
            ys.append(self._py)
        return xs, ys

    def last(self) -> float | None:
        if self._pn:
            return self._py
        return self.ys[-1] if self.ys else None

    def __len__(self) -> int:
        return len(self.xs) + (1 if self._pn else 0)


def rolling_median(ys: list[float], window: int) -> list[float]:
    """Each point's median over the `window` points ending at it (fewer at the start): a line
    through noisy throughput windows that one slow window does not bend."""
    import statistics

    window = max(1, window)
    return [statistics.median(ys[max(0, i + 1 - window):i + 1]) for i in range(len(ys))]


def interpolate(xs: list[float], kx: list[float], ky: list[float]) -> list[float | None]:
    """The piecewise-linear curve through (kx, ky) (kx increasing) read at each x; None outside it."""
    import bisect

    out: list[float | None] = []
    for x in xs:
        i = bisect.bisect_left(kx, x)
        if i < len(kx) and kx[i] == x:
            out.append(ky[i])
        elif 0 < i < len(kx):
            x0, x1, y0, y1 = kx[i - 1], kx[i], ky[i - 1], ky[i]
            out.append(y0 + (y1 - y0) * (x - x0) / (x1 - x0))
        else:
            out.append(None)
    return out
