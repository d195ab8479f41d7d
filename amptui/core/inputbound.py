"""Input-bound runs: the share of training-step time a run spent waiting for its next batch.

Step records carry `step_time_ms` and `data_wait_ms` (both per optimizer step, means over the
record's window); the share is sum(data_wait_ms) / sum(step_time_ms) over a run's step records.
Where it is large, a "no speed-up" measures the input pipeline, not AMP, and every view says so.
"""

from __future__ import annotations

from typing import Any, TypeGuard

from amptui.core.stream.records import STEP, Readable

INPUT_BOUND_SHARE = 0.20  # at or above this share of step time waiting for data, a run is input-bound


def input_bound(share: float | None) -> TypeGuard[float]:
    """The one input-bound test, for every view and for the tune's verdict."""
    return share is not None and share >= INPUT_BOUND_SHARE


def _number(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


class DataWait:
    """Folds step records into the run's data-wait share."""

    def __init__(self) -> None:
        self.wait_ms = 0.0
        self.step_ms = 0.0
        self.seen = False  # a step record with data_wait_ms (older runs have none)

    def add(self, rec: Readable) -> None:
        wait, step = _number(rec.get(STEP.data_wait_ms)), _number(rec.get(STEP.step_time_ms))
        if wait is None or step is None or step <= 0:
            return
        self.seen = True
        self.wait_ms += wait
        self.step_ms += step

    @property
    def share(self) -> float | None:
        if not self.seen or self.step_ms <= 0:
            return None
        return min(1.0, max(0.0, self.wait_ms / self.step_ms))


def device_word(device_type: str | None) -> str:
    return "GPU" if device_type == "cuda" else "CPU" if device_type == "cpu" else "device"


def notice(share: float | None, device_type: str | None) -> str | None:
    """"input-bound: the GPU waited for data 43% of the time", or None below INPUT_BOUND_SHARE."""
    if input_bound(share):
        return f"input-bound: the {device_word(device_type)} waited for data {100 * share:.0f}% of the time"
    return None
