"""Issue 43: the compare screen's loss-agreement read ("2: 100% in ±0.02") says when a run is too
short for it to mean anything, instead of a true and useless "100% inside ±1.67" on a loss of 4.34."""

from __future__ import annotations

from amptui.core.lossgaps import LossGap, agreement_words, too_short


def _gap(points: int, inside: float) -> LossGap:
    return LossGap(steps=[float(i) for i in range(points)], gaps=[0.0] * points, inside=inside)


def test_a_band_as_wide_as_the_loss_says_the_run_is_too_short():
    words = agreement_words(1.67, [_gap(40, 1.0)], 4.34)
    assert "100%" not in words
    assert words == "too short to judge (±1.67 = 38% of loss 4.34)"


def test_too_few_shared_steps_say_so():
    assert agreement_words(0.01, [_gap(3, 1.0)], 2.0) == "too few steps to judge (3 shared)"
    assert too_short(0.01, 0.0, 40) is not None  # a loss of 0: no scale to read the band against


def test_a_narrow_band_over_enough_steps_gives_each_runs_share():
    assert too_short(0.02, 1.0, 40) is None
    assert agreement_words(0.02, [_gap(40, 1.0), _gap(40, 0.87)], 1.0) == "2: 100%, 3: 87% in ±0.02"
    assert agreement_words(0.02, [], 1.0) == ""
