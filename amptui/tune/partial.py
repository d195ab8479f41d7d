"""A search that ended before its plan did (`q` in the dashboard, Ctrl-C, the budget): it names no
winner. It says what was measured, what it found so far, and what a verdict would still need.

`conclude()` is the one place a search that has ended gets its verdict (the runner calls it once, at
the end); tune/report.py reads the result it leaves, for the CLI and the dashboard alike.
Plain data in, plain data out; no processes, no torch.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from amptui.tune import verdict as V
from amptui.tune.plan import PRECISIONS, Trial, as_dicts, of_steps

NOT_ENOUGH = "not enough trials to recommend"
KNOBS = {"compile": ("run.compile", "torch.compile"), "batch": ("data.batch_size", "a larger batch")}


def cut_short(t: Trial) -> bool:
    """Was this trial left unjudged by the end of the search (Ctrl-C, q, the budget)?"""
    reason = t.reason or ""
    return reason.startswith(("interrupted", "budget")) or "the budget ran out" in reason


def unfinished(t: Trial) -> bool:
    """Measured, but stopped by the end of the search before its last step: its timing covers part
    of the trial and its accuracy check did not finish."""
    return t.measured and t.status != "completed" and cut_short(t)


def precision_phase(t: Trial) -> bool:
    """A trial of the precision search (fp32 and the other precisions), not of the knobs after it."""
    return t.role != "band" and not any(key in t.knobs for key, _ in KNOBS.values())


@dataclass
class Gap:
    words: str       # "fp16+scaler", "bf16 to the end (stopped at step 8 of 20)", "torch.compile"
    precision: bool  # part of the precision search: without it even "stay in fp32" is a guess


def gaps(trials: list[Trial], interrupted: bool, dims: Collection[str] = (),
         planned: Sequence[str] = PRECISIONS) -> list[Gap]:
    """What the search would still have had to measure for a verdict, in the plan's order."""
    out = []
    if not any(t.role == "reference" for t in trials):
        out.append(Gap("fp32 (the reference)", True))
    for t in trials:
        if unfinished(t):
            out.append(Gap(f"{t.candidate} to the end", precision_phase(t)))
        elif cut_short(t) and not t.measured:
            out.append(Gap(t.candidate, precision_phase(t)))
    if interrupted:  # what a stop between trials left out of the table altogether
        names = {t.candidate for t in trials}
        out += [Gap(name, True) for name in planned if "precision" in dims and name not in names]
        if any(t.role == "reference" and t.measured for t in trials) and not any(t.role == "band" for t in trials):
            again = any("run.apply_amp" in t.knobs for t in trials)  # a script's: the same run again
            out.append(Gap("fp32 again (the timing noise)" if again else "fp32 with a second seed (the timing noise)",
                           False))
        out += [Gap(words, False) for dim, (key, words) in KNOBS.items()
                if dim in dims and not any(key in t.knobs for t in trials)]
    return out


def listed(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def partial_reason(trials: list[Trial], interrupted: bool, dims: Collection[str] = (),
                   planned: Sequence[str] = PRECISIONS) -> str:
    """Why a search that ended early names no winner ("" when it may): it was stopped (q, Ctrl-C),
    or its budget ended before every precision setup was measured. A budget
    that only cut the knobs after the precision search (torch.compile, the batch size) leaves a
    verdict: the best of what the budget allowed."""
    if not (interrupted or any(cut_short(t) for t in trials)):
        return ""
    missing = gaps(trials, interrupted, dims, planned)
    if interrupted and not missing:  # stopped after its last trial: still the user's stop, not a verdict
        return f"{NOT_ENOUGH}: the search was stopped before it gave its verdict"
    if not interrupted and not any(g.precision for g in missing):
        return ""
    how = "was stopped" if interrupted else "ran out of budget"
    return f"{NOT_ENOUGH}: the search {how} before it measured {listed([g.words for g in missing])}"


def settle(trials: list[Trial], interrupted: bool, dims: Collection[str] = (),
           planned: Sequence[str] = PRECISIONS) -> tuple[Trial | None, float | None, float, str]:
    """The verdict of a search that has ended: judge(), then no winner when it ended early (the
    setup ahead keeps a "so far" verdict). (winner, band, needed gain, partial reason or "")."""
    winner, band, needed = V.judge(trials)
    partial = partial_reason(trials, interrupted, dims, planned)
    if partial and winner is not None:
        winner.verdict = V.unjudged(winner)
        winner = None
    return winner, band, needed, partial


def measured_words(t: Trial) -> str:
    words = f"{t.candidate} {t.ms_per_step:.1f} ms/step"
    if t.samples_per_s:
        words += f", {t.samples_per_s:.0f} samples/s"
    if t.role == "reference":
        words += " (the reference)"
    elif t.speedup is not None:
        words += f", {t.speedup:.2f}x fp32"
    if unfinished(t):
        words += f" (stopped at step {t.steps}{of_steps(t)})"
    return words


def explain_partial(trials: list[Trial], partial: str, interrupted: bool) -> list[str]:
    """The honest sentences for a search that ended too early to recommend anything: what it
    measured, what it found so far, what a verdict needs."""
    lines = [f"{partial[0].upper()}{partial[1:]}."]
    measured = [t for t in trials if t.measured]
    lines.append("Measured: " + "; ".join(measured_words(t) for t in measured) + "." if measured
                 else "Nothing was measured.")
    ahead = [t for t in trials if t.verdict == V.LEADING]
    judged = [t for t in trials if t.role == "candidate" and not unfinished(t) and t.measured]
    if ahead:
        best = ahead[0]
        lines.append(f"So far {best.candidate} is ahead: accurate and {best.speedup:.2f}x fp32's samples/s. Not a "
                     "verdict: what the search did not measure could beat it.")
    elif judged:
        lines.append("Of the setups judged so far, none beat fp32 by more than the timing noise.")
    for t in trials:
        if unfinished(t) and t.role == "candidate" and t.speedup is not None:
            lines.append(f"{t.candidate} ran at {t.speedup:.2f}x fp32 for {t.steps}{of_steps(t).replace(' of', ' of its')} "
                         "steps, but its "
                         "accuracy check did not finish, so it cannot be judged yet.")
    if not judged and not any(unfinished(t) and t.role == "candidate" for t in trials) and \
            any(t.role == "reference" and t.measured for t in trials):
        lines.append("No other precision setup was measured, so nothing could be judged against fp32 yet.")
    lines.append(("For a verdict, tune again and let the search finish" if interrupted else
                  "For a verdict, tune again with a larger budget") +
                 " (--budget, or the budget t asks for in the dashboard); no preset was saved.")
    return lines


def conclude(trials: list[Trial], interrupted: bool, dims: Collection[str], device_type: str,
             hardware_note: str = "", planned: Sequence[str] = PRECISIONS) -> dict[str, Any]:
    """The verdict of a search that has ended, as its result file keeps it: status, band, the gain a
    candidate needed, the winner (None for a partial search), why it is partial, the sentences."""
    for t in trials:
        t.verdict = ""
    winner, band, needed, partial = settle(trials, interrupted, dims, planned)
    band_why = V.band_unjudged(trials, band)
    explanation = explain_partial(trials, partial, interrupted) if partial else \
        V.explain(trials, winner, needed, device_type, hardware_note, band_why)
    return {"status": "interrupted" if interrupted else "done", "band": band, "band_unjudged": band_why,
            "needed_gain": needed,
            "winner": winner.candidate if winner else None, "partial": partial or None,
            "explanation": explanation, "trials": as_dicts(trials)}
