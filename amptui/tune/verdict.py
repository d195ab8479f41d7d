"""`amptui tune`'s judgement of measured trials: the accuracy guard (fp32's noise band), the
throughput comparison with its noise allowance, the winner, and the sentences that explain it.

Plain data in, plain data out (tune/plan.py's Trial); no processes, no torch. A search that ended
before it could recommend anything is tune/partial.py's; what a result file says, tune/report.py's.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from amptui.core import figures
from amptui.core.comparison.lossgaps import judged_by
from amptui.core.config.precision import Precision, narrow, narrow_dtype, wide
from amptui.core.inputbound import input_bound
from amptui.tune.plan import BAND_FLOOR, FAILED, MIN_GAIN, STORM_FRACTION, TOO_NOISY, Trial, of_steps

# --- the accuracy guard -------------------------------------------------------------------------

def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def noise_band(reference: Trial, second: Trial | None) -> tuple[float, str]:
    """How far fp32's own loss wanders: the largest gap between two fp32 seeds at the same step,
    else the spread of fp32's window-to-window changes; at least BAND_FLOOR of its final loss."""
    ref = {w["step"]: w["loss"] for w in reference.windows if _finite(w.get("loss"))}
    final = abs(list(ref.values())[-1]) if ref else 0.0
    floor = BAND_FLOOR * final
    if second is not None and second.windows:
        gaps = [abs(w["loss"] - ref[w["step"]]) for w in second.windows
                if _finite(w.get("loss")) and w["step"] in ref]
        if gaps and max(gaps) > 0:  # a script that seeds itself repeats fp32 exactly: no loss noise said
            return max(max(gaps), floor), "two fp32 seeds"
    losses = list(ref.values())
    diffs = [abs(b - a) for a, b in zip(losses, losses[1:], strict=False)]
    spread = statistics.median(diffs) * 2 if diffs else 0.0
    return max(spread, floor), "fp32's window-to-window spread"


def band_unjudged(trials: list[Trial], band: float | None) -> str | None:
    """Why fp32's noise band judges no candidate's accuracy (core/comparison/lossgaps.py, as the compare screen
    says it: too short, or too wide for the loss), or None when it does."""
    reference = next((t for t in trials if t.role == "reference" and t.measured), None)
    if reference is None or band is None:
        return None
    return judged_by(band, [w["loss"] for w in reference.windows if _finite(w.get("loss"))])


def guard(trial: Trial, reference: Trial, band: float) -> str | None:
    """Why this candidate's accuracy cannot be trusted, or None. One-sided: learning faster than
    fp32 (e.g. with a larger batch) is not a fault, ending up worse than its band is."""
    for w in trial.windows:
        if w.get("loss") is None or not _finite(w.get("loss")):
            return f"non-finite loss at step {w.get('step')}"
    if trial.steps and trial.skipped_steps > max(1, STORM_FRACTION * trial.steps):
        return f"skipped-step storm: {trial.skipped_steps} of {trial.steps} optimizer steps skipped"
    ref = {w["step"]: w["loss"] for w in reference.windows if _finite(w.get("loss"))}
    for w in trial.windows:
        if w["step"] in ref and w["loss"] - ref[w["step"]] > band:
            return (f"loss left fp32's noise band at step {w['step']}: {w['loss']:.4f} vs {ref[w['step']]:.4f} "
                    f"± {band:.4f}")
    return None


def band_words(candidate: str) -> str:
    """The second fp32 run's verdict: another seed (a preset), or the script as written again."""
    return "fp32 again (timing noise)" if candidate == "fp32 again" else "fp32, second seed (noise band)"


# --- the verdict --------------------------------------------------------------------------------

def rate(trial: Trial) -> float | None:
    """Throughput to compare candidates by: samples/s (batch sizes differ), else 1 / ms per step."""
    if trial.samples_per_s:
        return trial.samples_per_s
    return 1000.0 / trial.ms_per_step if trial.ms_per_step else None


def fp32_rate(reference: Trial, second: Trial | None) -> tuple[float | None, float]:
    """(fp32's throughput, the gain a candidate needs). Every speed-up is read against the fp32
    reference run (it shows 1.00x, its second seed whatever it measured against it). The second fp32
    run is a control: however far it landed from the reference, faster or slower, is noise the
    machine showed for certain (figures.control_gap), and at least MIN_GAIN is."""
    a, b = rate(reference), rate(second) if second is not None else None
    if a and b:
        return a, max(MIN_GAIN, figures.control_gap(b / a))
    return a, MIN_GAIN


def speed_call(t: Trial, reference: Trial, second: Trial | None) -> figures.SpeedCall:
    """A candidate's speed-up judged as compare judges one (figures.speed_call): the two trials'
    window spreads (at least MIN_GAIN) and fp32's second run as the control."""
    a, b = rate(reference), rate(second) if second is not None else None
    noise = figures.ratio_noise(t.spread, reference.spread)
    control = b / a if a and b else None
    return figures.speed_call(t.speedup, max(MIN_GAIN, noise or 0.0), control)


def judge(trials: list[Trial]) -> tuple[Trial | None, float | None, float]:
    """Set each trial's speed-up and verdict; return (winner, band, needed gain). The winner is the
    fastest candidate that passes the guard and beats fp32 beyond the noise (its windows' and
    fp32's control's); else fp32. None where every candidate failed, or where an accurate one's
    speed could not be told (the noise or the control: issue 51's bf16 "WINNER at 2.88x" beside an
    fp32 control at 2.88x): then neither it nor fp32 can be recommended."""
    reference = next((t for t in trials if t.role == "reference" and t.measured), None)
    second = next((t for t in trials if t.role == "band" and t.measured), None)
    for t in trials:
        if t.status == "skipped":
            t.verdict = f"skipped: {t.reason}"
        elif t.status == "oom":
            t.verdict = "out of memory"
        elif not t.measured:
            t.verdict = f"no timing: {t.reason or t.status}"
    if reference is None:
        for t in trials:
            t.verdict = t.verdict or "no fp32 reference to judge against"
        return None, None, MIN_GAIN
    band, _ = noise_band(reference, second)
    base, needed = fp32_rate(reference, second)
    best, best_rate = reference, base
    untold: list[Trial] = []
    for t in trials:
        t_rate = rate(t)
        if t.measured and base and t_rate:
            t.speedup = t_rate / base
        if t.verdict:
            continue
        if t.role in ("reference", "band"):
            t.verdict = "fp32 reference" if t.role == "reference" else band_words(t.candidate)
            continue
        reason = guard(t, reference, band)
        call = speed_call(t, reference, second)
        if reason:
            t.verdict = f"rejected: {reason}"
        elif t.status == "stopped" and t.reason:
            t.verdict = t.reason if t.reason.startswith("stopped") else \
                f"stopped: {t.reason} at step {t.steps}{of_steps(t)}"  # its accuracy check did not finish
        elif t.accuracy_only:
            t.verdict = f"accurate; {t.accuracy_only}"
        elif call.unresolved:
            t.verdict = f"{TOO_NOISY}: {call.cause.replace('the baseline run again', 'fp32 again')}"
            untold.append(t)
        elif call.same or (t.speedup is not None and t.speedup < 1.0):
            t.verdict = "accurate, within timing noise" if call.same else "accurate, not faster"
        else:
            t.verdict = "accurate, faster"
            if (t_rate or 0.0) > (best_rate or 0.0):
                best, best_rate = t, t_rate
    ran = [t for t in trials if t.role not in ("reference", "band") and t.run_id]
    if ran and all(t.status in FAILED for t in ran):  # every trial crashed: fp32 won nothing (plan.failed_search)
        return None, band, needed
    if any((rate(t) or 0.0) > (best_rate or 0.0) for t in untold):  # it might have won: no verdict
        return None, band, needed
    best.verdict = "WINNER" + (" (stay in fp32)" if best is reference else "")
    return best, band, needed


def too_noisy(trials: list[Trial]) -> list[Trial]:
    """The accurate candidates whose speed-up the noise (or fp32's control) could not tell."""
    return [t for t in trials if t.verdict.startswith(TOO_NOISY)]


# --- while the search goes on ---------------------------------------------------------------------

LEADING = "accurate, faster (best so far)"  # a candidate ahead when the search has not ended


def unjudged(t: Trial) -> str:
    """The verdict of the setup ahead while no winner may be named (a search still running or one
    that ended early): what it is, never WINNER."""
    return {"reference": "fp32 reference", "band": band_words(t.candidate)}.get(t.role, LEADING)


def leading(trials: list[Trial]) -> Trial | None:
    """judge() in the middle of a search: the setup ahead so far (what the next knobs build on).
    Its verdict says "so far": the live table must not read as a recommendation."""
    for t in trials:
        t.verdict = ""
    best, _, _ = judge(trials)
    if best is None and too_noisy(trials):  # the next knobs build on fp32 until a speed-up can be told
        best = next((t for t in trials if t.role == "reference" and t.measured), None)
    if best is not None:
        best.verdict = unjudged(best)
    return best


def describe_limits(winner: Trial, trials: list[Trial], device_type: str) -> list[str]:
    """What holds the winner back: input-bound, launch-bound, memory-bound (when the numbers say so)."""
    out = []
    if input_bound(winner.data_wait_share):
        out.append(f"Input-bound: the loop waited for data {100 * winner.data_wait_share:.0f}% of the step time; "
                   "a faster input pipeline helps more than any precision setting.")
    ooms = [t for t in trials if t.status == "oom"]
    if ooms:
        batches = sorted(t.knobs.get("data.batch_size", 0) for t in ooms)
        out.append(f"Memory-bound: batch {batches[0]} ran out of memory, so the batch size stops below it.")
    if device_type == "cuda" and winner.ms_per_step is not None and winner.ms_per_step < 5:
        out.append(f"Launch-bound: a step takes {winner.ms_per_step:.1f} ms, short enough that kernel launches, "
                   "not math, set the pace; torch.compile or a larger batch lets lower precision pay off.")
    return out


def explain(trials: list[Trial], winner: Trial | None, needed: float, device_type: str,
            hardware_note: str = "", band_why: str | None = None) -> list[str]:
    """A few plain sentences: why the winner won, and what limits it. `band_why`: why fp32's noise
    band could not judge accuracy (band_unjudged), said instead of "its loss inside the band"."""
    untold = too_noisy(trials)
    if winner is None and untold:
        return noisy_words(trials, untold)
    if winner is None:
        return ["No fp32 reference was measured, so nothing could be judged (the search ended before it)."]
    lines = []
    rejected = [t for t in trials if t.verdict.startswith("rejected")]
    ref = next(t for t in trials if t.role == "reference" and t.measured)
    if winner is ref or winner.role == "reference":
        faster = [t for t in trials if t.speedup and t.speedup > 1.0 and t.role == "candidate"]
        why = f"no candidate was both accurate and more than {100 * needed:.0f}% faster than fp32"
        if needed > MIN_GAIN:
            why += " (this machine's timing noise: the two fp32 runs differed that much)"
        if not any(t.role == "band" and t.measured for t in trials):
            why += ("; the timing noise was not measured (no second fp32 run fitted in the budget), so a close "
                    "call could go either way: a larger --budget settles it")
        lines.append(f"Stay in fp32: {why}.")
        if hardware_note:
            lines.append(f"{hardware_note[0].upper()}{hardware_note[1:]}.")
        if faster:
            best = max(faster, key=lambda t: t.speedup or 0.0)
            lines.append(f"The fastest other candidate, {best.candidate}, measured {best.speedup:.2f}x "
                         f"({best.verdict}).")
    else:
        parts = []
        applied = str(winner.knobs.get("run.apply_amp") or "")  # a script's tune: AMP applied by amptui
        applied_as = _applied(applied)
        dtype = str(winner.knobs.get("amp.dtype") or (applied_as.dtype if applied_as else "") or narrow_dtype())
        if winner.knobs.get("amp.autocast") or applied:
            if applied_as is not None and not applied_as.scaler and narrow(dtype):
                parts.append(f"{dtype} autocast without a GradScaler: fast half-precision math, and no small "
                             "gradient underflowed far enough to leave fp32's noise band")
            elif wide(dtype):
                parts.append(f"{dtype} autocast: " + (hardware_note or "lower-precision math is faster here") +
                             f"; {dtype} keeps float32's range, so no loss scaling is needed")
            else:
                parts.append(f"{dtype} autocast with a GradScaler: fast half-precision math, the scaler keeps "
                             "small gradients from underflowing")
        if winner.knobs.get("run.compile"):
            parts.append("torch.compile fuses kernels and removes per-op launch overhead")
        if "data.batch_size" in winner.knobs:
            parts.append(f"batch {winner.knobs['data.batch_size']} keeps the hardware busier per step")
        accuracy = "with its loss inside fp32's noise band" if band_why is None else \
            f"(its loss against fp32's: {band_why}; a longer run judges accuracy)"
        lines.append(f"{winner.candidate} wins at {winner.speedup:.2f}x fp32's samples/s {accuracy}: "
                     + "; ".join(parts or ["it measured fastest"]) + ".")
    for t in rejected:
        lines.append(f"{t.candidate} was rejected: {t.verdict.removeprefix('rejected: ')}.")
    lines += describe_limits(winner, trials, device_type)
    return lines


def noisy_words(trials: list[Trial], untold: list[Trial]) -> list[str]:
    """No winner: an accurate candidate's speed-up could not be told from this machine's noise."""
    control = next((t for t in trials if t.role == "band" and t.measured), None)
    untold = [t for t in untold if (t.speedup or 0.0) > 1.0] or untold  # those that might have won
    said = "; ".join(f"{t.candidate} measured {t.speedup:.2f}x fp32" for t in untold if t.speedup is not None)
    lines = [f"No winner: the timings were too noisy to tell whether {listed_names(untold)} is faster than fp32 "
             f"({said})."]
    if control is not None and control.speedup is not None:
        lines.append(f"Its control, {control.candidate}, ran at {control.speedup:.2f}x the first fp32 run: "
                     "a difference that large is the machine's, not the precision's.")
    lines.append("For a verdict, tune again when the machine is quieter (or with a larger --budget: longer "
                 "trials); `amptui ab PRESET --interleave` times the precisions in turns. No preset was saved.")
    return lines


def listed_names(trials: list[Trial]) -> str:
    names = [t.candidate for t in trials]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _applied(variant: str) -> Precision | None:
    """The precision amptui applied to a script's loop (run.apply_amp); None: none (or a name no mode knows)."""
    try:
        return Precision.from_variant(variant) if variant else None
    except ValueError:
        return None
