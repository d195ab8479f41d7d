"""A run's headline figures, one definition each, read by every view (the run screen's header and
throughput panel, the summary `amptui run` prints at its end, `compare`, and what `export` rows add
up to), so one run never shows three throughputs (issue 43).

- samples/s: steady-state, after warm-up: the samples of the step records whose window ends past the
  first WARMUP_FRACTION of the run's steps (never the first record; never the first two of a run
  with torch.compile, whose second window still holds a recompile) divided by those windows'
  seconds; a time-weighted mean of the records' own samples/s. Before a window past warm-up: the
  last window's. `amptui tune` reads its trials with the same definition.
- step time: the same windows' seconds / their steps, in ms.
- final loss: the end record's `final_loss` (the recorder writes its last step record's loss), else
  the last step record's loss. A step record's loss is the mean over its window of `log.every` steps,
  so a script's own print of its last batch's loss can differ by that batch's noise.
- speed verdict (speed_call): a speed-up against its measured noise and, where one ran, a control (the
  baseline's setup run again): "same speed" only inside a narrow band (SAME_SPEED_BAND), a figure only
  outside the noise, else "too noisy to tell" with what to do. compare, ab, tune, doctor and the
  dashboard all decide by it (issue 51).
- memory saving (memory_call): shown only beyond the run-to-run spread of the peak it compares.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from amptui.core.stream.records import END, STEP, Readable

# Timings leave out start-up and warm-up: step records whose window ends in the first 10% of the
# run's steps (at least the first record) do not count. Each window is timed between two reads of
# the device, so it is a synchronised device timing.
WARMUP_FRACTION = 0.1
WARMUP_WINDOWS = 1          # step records always left out at the start ...
COMPILE_WARMUP_WINDOWS = 2  # ... and with run.compile (compilation, the recompile after the first step)


def warmup_windows(compiled: bool) -> int:
    return COMPILE_WARMUP_WINDOWS if compiled else WARMUP_WINDOWS


@dataclass
class Steady:
    samples_per_s: float | None = None
    step_ms: float | None = None
    spread: float | None = None  # relative spread (stdev / mean) of the windows' ms/step


@dataclass
class StepWindows:
    """The timed windows of a run's step records: (last step, steps, seconds, samples) each."""

    windows: list[tuple[int, int, float, float]] = field(default_factory=list)
    window_from: int = 0  # the step the next step record's window starts after
    _cache: tuple[tuple[int, int, bool], Steady] | None = None

    def session(self, resumed_from: int) -> None:
        """A start record: the next window starts at the step this session resumed from."""
        self.window_from = resumed_from

    def take(self, rec: Readable) -> bool:
        """Fold one step record; True when it added a timed window."""
        step, ms = rec.get(STEP.step, 0), rec.get(STEP.step_time_ms)
        added = False
        if not isinstance(step, (int, float)) or isinstance(step, bool):
            return False
        step = int(step)
        if isinstance(ms, (int, float)) and step > self.window_from:
            seconds = ms / 1000 * (step - self.window_from)
            rate = rec.get(STEP.samples_per_s)
            samples = rate * seconds if isinstance(rate, (int, float)) else 0.0
            self.windows.append((step, step - self.window_from, seconds, samples))
            added = True
        self.window_from = step
        return added

    def steady(self, total_steps: int | None, compiled: bool = False) -> Steady:
        """The steady-state figures (see the module's definitions); cached until a window arrives."""
        key = (len(self.windows), total_steps or 0, compiled)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        found = steady_of(self.windows, total_steps, warmup_windows(compiled))
        self._cache = (key, found)
        return found

    def past_warmup(self, total_steps: int | None, compiled: bool = False) -> int:
        """How many windows count as steady (0: the figures are the last window's, warm-up included)."""
        return len(_steady_windows(self.windows, total_steps, warmup_windows(compiled)))


def _steady_windows(windows: list[tuple[int, int, float, float]], total_steps: int | None,
                    skip: int) -> list[tuple[int, int, float, float]]:
    total = total_steps or (windows[-1][0] if windows else 0)
    warm = max(1, int(WARMUP_FRACTION * total))
    return [w for w in windows[skip:] if w[0] - w[1] >= warm]


def steady_of(windows: list[tuple[int, int, float, float]], total_steps: int | None,
              skip: int = WARMUP_WINDOWS) -> Steady:
    """Samples/s and ms/step over the windows after warm-up (see WARMUP_FRACTION), the first
    `skip` windows never among them."""
    steady = _steady_windows(windows, total_steps, skip) or windows[-1:]
    found = Steady()
    steps, seconds = sum(w[1] for w in steady), sum(w[2] for w in steady)
    if seconds > 0 and steps:
        found.step_ms = 1000 * seconds / steps
        samples = sum(w[3] for w in steady)
        found.samples_per_s = samples / seconds if samples else None
    per_step = [w[2] / w[1] for w in steady if w[1]]
    if len(per_step) >= 2 and statistics.fmean(per_step) > 0:
        found.spread = statistics.pstdev(per_step) / statistics.fmean(per_step)
    return found


def steady_of_rows(rows: list[dict[str, Any]], total_steps: int | None = None) -> Steady:
    """The same figures from `amptui export` rows (one per step record, in order)."""
    windows = StepWindows()
    for row in rows:
        windows.take(row)
    return windows.steady(total_steps)


def final_loss(end: dict[str, Any] | None, last_step_loss: float | None) -> float | None:
    said = (end or {}).get(END.final_loss)
    return said if said is not None else last_step_loss


# --- speed and memory verdicts -----------------------------------------------------------------

# A speed-up's noise: the two runs' window-to-window spread of ms/step (one standard deviation of
# each, relative, combined), never below SPEED_NOISE_FLOOR: one machine's run-to-run wobble.
SPEED_NOISE_FLOOR = 0.02
# "same speed" only when the noise leaves no more than this either way: a +-40% band that holds 1.0
# also holds 1.4x (issue 51: "same speed (0.96x +-0.46)" where a careful timing measured 1.54x).
SAME_SPEED_BAND = 0.10
# Beyond this relative noise a speed-up is not a figure at all.
NOISE_TOO_LARGE = 0.5
NOISY_ADVICE = "rerun when the machine is quieter, or with more steps"


def ratio_noise(spread_a: float | None, spread_b: float | None) -> float | None:
    """The relative noise of a ratio of two runs' rates from their windows' spreads (Steady.spread);
    None when either has fewer than two timed windows."""
    if spread_a is None or spread_b is None:
        return None
    return max(SPEED_NOISE_FLOOR, math.hypot(spread_a, spread_b))


def control_gap(control: float | None) -> float:
    """How far a control (the baseline's own setup run again: its ratio to the baseline) landed from
    1.0, relative and symmetric (0.5x and 2x are both 1.0): the noise the machine showed for certain."""
    if control is None or control <= 0:
        return 0.0
    return max(control, 1 / control) - 1.0


@dataclass(frozen=True)
class SpeedCall:
    """What a speed-up may be said as: noise (the relative +- it was judged by), same (inside a band
    narrow enough to call it the same speed; False: a figure outside its noise) and why it cannot be
    told (None when it can). Symmetric: A against B and B against A get the same call."""

    noise: float | None = None
    same: bool | None = None
    unresolved: str | None = None
    cause: str = ""  # what made it too noisy, in a few words ("step times vary ±46%")


def speed_call(speedup: float | None, noise: float | None, control: float | None = None) -> SpeedCall:
    """The one speed verdict: `speedup` against its measured relative `noise` (ratio_noise) and,
    where one ran, a `control` (the baseline run again, its ratio to the baseline): the noise is the
    larger of the two, so a candidate is never faster than its own control says the machine wobbles."""
    if speedup is None or speedup <= 0:
        return SpeedCall()
    gap = control_gap(control)
    if noise is None and control is None:
        return SpeedCall(None, None, "too short to tell (fewer than two timed windows after warm-up)")
    used = max(noise or 0.0, gap, SPEED_NOISE_FLOOR)
    why = (f"its control, the baseline run again, measured {control:.2f}x" if gap > (noise or 0.0)
           else f"step times vary ±{used:.0%}")
    if used > NOISE_TOO_LARGE:
        return SpeedCall(used, None, f"too noisy to tell ({why}): {NOISY_ADVICE}", why)
    if abs(math.log(speedup)) > math.log1p(used):
        return SpeedCall(used, False, None)
    if used <= SAME_SPEED_BAND:
        return SpeedCall(used, True, None)
    return SpeedCall(used, None, f"too noisy to tell ({speedup:.2f}x, inside its noise: {why}): {NOISY_ADVICE}",
                     f"{speedup:.2f}x, inside its noise, {why}")


# A peak's run-to-run spread where no control measured it: a process's peak RSS (the CPU) wanders
# by a few percent between identical runs (allocator, threads, page cache); torch's own peak of
# allocated device memory repeats far more closely.
MEMORY_SPREAD = {"peak_rss": 0.05, "peak_allocated": 0.01}
MEMORY_SPREAD_DEFAULT = 0.05


def memory_call(saving: float | None, measure: str | None, control_saving: float | None = None) -> bool | None:
    """True when a memory saving (1 - peak / the baseline's) is beyond the run-to-run spread of what
    the peaks measure (and beyond a control's own "saving", where one ran); False inside it (no
    saving to show); None when there is none."""
    if saving is None:
        return None
    spread = max(MEMORY_SPREAD.get(measure or "", MEMORY_SPREAD_DEFAULT), abs(control_saving or 0.0))
    return abs(saving) > spread
