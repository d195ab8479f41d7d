"""What a tune's result file says, read one way for `amptui tune`'s report and the dashboard's tune
screen: where the search stands in words, its winner (only a search that ran to its end has one:
nothing else is called WINNER or offered for saving), the table's rows and the sentences under it.

The verdict itself is made once, when the search ends (tune/partial.py's settle); this reads the
result it left, also one written by an older amptui or one still being written.
"""

from __future__ import annotations

from typing import Any

from amptui.tune import plan as T
from amptui.tune import verdict as V

PARTIAL = "partial result, no winner"


def status_words(result: dict[str, Any], stopping: bool = False) -> str:
    status = result.get("status", "running")
    if status == "running":
        return "stopping…" if stopping else "searching…"
    if status == "interrupted":
        return f"stopped: {PARTIAL}"
    if result.get("partial"):
        return f"out of budget: {PARTIAL}"
    return "done" if T.winner_of(result) else "done, no winner"


def shown_verdict(result: dict[str, Any], t: dict[str, Any]) -> str:
    """A trial's verdict as shown: WINNER only beside the winner of a whole search."""
    verdict = t.get("verdict") or ""
    if verdict.startswith("WINNER") and t.get("candidate") != T.winner_of(result):
        return V.unjudged(T.Trial(t.get("candidate", ""), {}, t.get("role", "candidate")))
    return verdict


def rows(result: dict[str, Any]) -> list[tuple[tuple[str, ...], str]]:
    """(cells in T.HEADERS order, style) for each trial: the winner green, rejections red, skips dim."""
    out = []
    for t in result.get("trials", []):
        shown = {**t, "verdict": shown_verdict(result, t)}
        verdict = shown["verdict"]
        style = "bold green" if verdict.startswith("WINNER") else \
            ("red" if verdict.startswith(("rejected", "out of memory")) else
             ("dim" if t.get("status") == "skipped" else ""))
        out.append((T.cells(shown), style))
    return out


def notes(result: dict[str, Any]) -> list[str]:
    """'* candidate: verdict with its reason' for every row the table shortened."""
    shown = [shown_verdict(result, t) for t in result.get("trials", [])]
    return [f"* {t['candidate']}: {v}" for t, v in zip(result.get("trials", []), shown, strict=True) if ":" in v]


def explanation(result: dict[str, Any]) -> list[str]:
    """The sentences of a search that has ended: the verdict, or why there is none, what was
    measured and what a verdict would need."""
    said = list(result.get("explanation") or [])
    if result.get("status") == "interrupted" and not result.get("partial"):
        # written by an amptui that still named a winner for a stopped search: say it plainly
        said = [f"The search was stopped before it ended: {PARTIAL}. Tune again and let it finish for a verdict."]
    return said


def lines(result: dict[str, Any]) -> list[str]:
    """What the dashboard's Why panel shows under an ended search: the explanation, then the
    shortened rows' reasons (the CLI prints the reasons under its table instead)."""
    return explanation(result) + notes(result)


def save_hint(result: dict[str, Any], how: str) -> str:
    """'<how> saves the winner as preset X-tuned.', only where there is a winner to save (a script's
    tune names the command that runs its winner instead)."""
    if result.get("script"):
        return f"Use the winner: {result['use']}" if T.winner_of(result) and result.get("use") else ""
    return f"{how} saves the winner as preset {result['preset']}-tuned." if T.winner_of(result) else ""
