"""How far each run's loss sits from the baseline's at the same steps, against the baseline's own
noise: the compare screen's "is the accuracy the same?" read (compare.py builds the summaries)."""

from __future__ import annotations

from dataclasses import dataclass

from amptui.core.comparison.runsummary import RunSummary
from amptui.core.series import Series, interpolate

# The baseline's own noise: twice the median change of its loss curve from one point to the next
# (the fallback of tune's accuracy guard), at least NOISE_FLOOR of its final loss.
NOISE_FLOOR = 0.005
# A check that means something: a band no wider than this share of the loss it is read on (a short
# run whose loss still falls fast has a band as wide as the loss itself: "100% inside" is then true
# and useless), over at least MIN_POINTS steps both runs recorded.
WIDE_BAND = 0.10
MIN_POINTS = 5


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


def still_falling(curve: Series) -> bool:
    """Is the loss still falling from one point to the next (a run too short for its curve to have
    settled), rather than wandering about a level? Most steps down: the median change is downward
    and at least half as large as the median size of a change."""
    return still_falling_values(curve.points()[1])


def still_falling_values(ys: list[float]) -> bool:
    """still_falling of a loss curve's values, in step order (tune's windows)."""
    import statistics

    diffs = [b - a for a, b in zip(ys, ys[1:], strict=False)]
    if not diffs:
        return True
    return statistics.median(diffs) < 0 and abs(statistics.median(diffs)) >= 0.5 * statistics.median(map(abs, diffs))


def too_short(band: float, loss: float | None, points: int, falling: bool = True) -> str | None:
    """Why a loss-agreement check on this band cannot judge accuracy, or None when it can: the run
    is too short (too few shared steps, or its loss still falls so fast that one step's change is a
    large share of the loss), or its band is too wide (a noisy loss, however long the run). The
    verdict first, so a narrow box that cuts the line keeps it."""
    if points < MIN_POINTS:
        return f"too short to judge ({points} steps shared)"
    if not loss:
        return f"nothing to judge by (±{band:.3g} on a loss of 0)"
    if band > WIDE_BAND * abs(loss):
        share = f"±{band:.3g} = {100 * band / abs(loss):.0f}% of loss {abs(loss):.3g}"
        return f"too short to judge (still falling: {share})" if falling else f"band too wide to judge (noisy: {share})"
    return None


def judged_by(band: float, losses: list[float]) -> str | None:
    """too_short for a band read on the loss values of one run, in step order (tune's fp32 reference)."""
    return too_short(band, losses[-1] if losses else None, len(losses), still_falling_values(losses))


def agreement_words(band: float, gaps: list[LossGap], loss: float | None, falling: bool = True) -> str:
    """The compare screen's read: "2: 100%, 3: 87% in ±0.0912", or why there is none to make
    (`falling`: the baseline's loss still falls, still_falling)."""
    judged = [(i, g.inside, len(g.steps)) for i, g in enumerate(gaps, start=2) if g.inside is not None]
    if not judged:
        return ""
    why = too_short(band, loss, min(n for _, _, n in judged), falling)
    if why is not None:
        return why
    return ", ".join(f"{i}: {100 * inside:.0f}%" for i, inside, _ in judged) + f" in ±{band:.3g}"
