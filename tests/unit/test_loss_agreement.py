"""Issue 43: the compare screen's loss-agreement read ("2: 100% in ±0.02") says why it cannot judge
instead of a true and useless "100% inside ±1.67" on a loss of 4.34: "too short" when the run is
short (few shared steps, or a loss still falling fast), "band too wide" when the loss is noisy."""

from __future__ import annotations

from amptui.core.comparison.lossgaps import LossGap, agreement_words, noise_band, still_falling, too_short
from amptui.core.series import Series


def _gap(points: int, inside: float) -> LossGap:
    return LossGap(steps=[float(i) for i in range(points)], gaps=[0.0] * points, inside=inside)


def _curve(ys: list[float]) -> Series:
    curve = Series()
    for x, y in enumerate(ys):
        curve.add(float(x), y)
    return curve


def test_a_short_run_whose_loss_still_falls_is_too_short_to_judge():
    falling = _curve([8.0 - 0.9 * i for i in range(8)] + [1.2, 0.9])  # every record well below the last
    assert still_falling(falling)
    band = noise_band(falling)
    words = agreement_words(band, [_gap(10, 1.0)], 0.9, still_falling(falling))
    assert "100%" not in words
    assert words.startswith("too short to judge (still falling: ±") and "band too wide" not in words
    assert agreement_words(1.67, [_gap(40, 1.0)], 4.34) == "too short to judge (still falling: ±1.67 = 38% of loss 4.34)"


def test_a_long_noisy_run_says_its_band_is_too_wide_not_too_short():
    noisy = _curve([1.0 + (0.3 if i % 2 else -0.3) for i in range(60)])  # settled, but up and down by 0.6
    assert not still_falling(noisy)
    band = noise_band(noisy)
    words = agreement_words(band, [_gap(60, 1.0)], 1.3, still_falling(noisy))
    assert words == f"band too wide to judge (noisy: ±{band:.3g} = {100 * band / 1.3:.0f}% of loss 1.3)"
    assert "too short" not in words


def test_too_few_shared_steps_are_too_short():
    assert agreement_words(0.01, [_gap(3, 1.0)], 2.0, falling=False) == "too short to judge (3 steps shared)"
    assert too_short(0.01, 0.0, 40) is not None  # a loss of 0: no scale to read the band against


def test_a_narrow_band_over_enough_steps_gives_each_runs_share():
    assert too_short(0.02, 1.0, 40) is None
    assert agreement_words(0.02, [_gap(40, 1.0), _gap(40, 0.87)], 1.0) == "2: 100%, 3: 87% in ±0.02"
    assert agreement_words(0.02, [], 1.0) == ""
