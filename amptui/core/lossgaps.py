"""How far each run's loss sits from the baseline's at the same steps, against the baseline's own
noise: the compare screen's "is the accuracy the same?" read (compare.py builds the summaries)."""

from __future__ import annotations

from dataclasses import dataclass

from amptui.core.compare import RunSummary
from amptui.core.series import Series, interpolate

# The baseline's own noise: twice the median change of its loss curve from one point to the next
# (the fallback of tune's accuracy guard), at least NOISE_FLOOR of its final loss.
NOISE_FLOOR = 0.005


@dataclass
class LossGap:
    """One run's loss minus the baseline's at the same steps, and how much of it is within the
    baseline's noise band."""

    steps: list[float]
    gaps: list[float]
    inside: float | None  # share of the steps where |gap| <= band


def noise_band(curve: Series) -> float:
    import statistics

    _, ys = curve.points()
    diffs = [abs(b - a) for a, b in zip(ys, ys[1:], strict=False)]
    spread = 2 * statistics.median(diffs) if diffs else 0.0
    return max(spread, NOISE_FLOOR * abs(ys[-1]) if ys else 0.0)


def loss_gaps(summaries: list[RunSummary]) -> tuple[float, list[LossGap]]:
    """(the baseline's noise band, one LossGap per run after the first): "is the accuracy the same?"
    read at every step both runs recorded (the baseline interpolated between its points)."""
    if not summaries:
        return 0.0, []
    bx, by = summaries[0].loss_curve.points()
    band = noise_band(summaries[0].loss_curve)
    out = []
    for s in summaries[1:]:
        xs, ys = s.loss_curve.points()
        base = interpolate(xs, bx, by)
        pairs = [(x, y - b) for x, y, b in zip(xs, ys, base, strict=False) if b is not None]
        inside = sum(1 for _, g in pairs if abs(g) <= band) / len(pairs) if pairs else None
        out.append(LossGap([x for x, _ in pairs], [g for _, g in pairs], inside))
    return band, out
