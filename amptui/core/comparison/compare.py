"""The tutorials' comparison table, computed from runs' event streams (no UI here).

    summaries = [summarize(run_dir) for run_dir in dirs]   # core.comparison.runsummary
    rows = compare_rows(summaries)          # speed-up and memory saving against the first run
    print(render(rows, "table"))            # or "markdown", "csv", "json"
    for line in notes(summaries): ...        # warnings (runs differ in more than precision), how it is timed

The table's columns are COLUMNS (one entry each: header, a short header for terminals, how to
show a row); a new figure is a field on RunSummary/CompareRow and one more Column. Used by
`amptui compare`, `amptui ab` and the dashboard's compare screen.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, Sequence

from amptui.core import distribution, figures
from amptui.core.comparison.comparenotes import short_precision, variant_label
from amptui.core.comparison.comparestep import (
    common_step,
    control_of,
    losses_at,
    never_stepped,
    speed_verdict,
    speedup_of,
    stopped_early,
)
from amptui.core.comparison.runsummary import RunSummary
from amptui.core.config.precision import precision_or_unseen
from amptui.core.config.scriptview import APPLIED_BY
from amptui.core.fmt import (
    fmt_accuracy,
    fmt_bytes,
    fmt_change,
    fmt_duration,
    fmt_loss,
    fmt_of,
    fmt_points,
    fmt_rate,
    fmt_ratio,
    shown,
)
from amptui.core.inputbound import notice
from amptui.core.stream.csvsafe import write_csv


def precision_said(s: RunSummary) -> str:
    """A run's precision in words; "..., applied by amptui" when amptui applied it to a script
    (`amptui ab --script --variants`: run.apply_amp), not the script's own loop."""
    words = s.precision_words
    return words + APPLIED_BY if s.flat_config.get("run.apply_amp") and words.startswith("autocast ") else words


@dataclass
class CompareRow:
    run_id: str
    preset: str
    precision: str
    status: str
    final_loss: float | None
    val_acc: float | None
    val_acc_delta: float | None  # this run's val acc - the first run's
    peak_mem: float | None
    total_time_s: float | None
    time_per_epoch_s: float | None
    samples_per_s: float | None  # steady state (core.figures)
    speedup: float | None        # steady samples/s against the first run (1.0 for the first)
    memory_saving: float | None  # 1 - this peak / first peak (0.0 for the first)
    skipped: int
    steps: int
    data_wait: float | None = None       # share of step time waiting for data (0..1)
    input_bound: str | None = None       # the notice when that share is large, else None
    headroom_bits: float | str | None = None  # the narrowest range headroom of any layer ("nonfinite": inf/NaN seen)
    headroom_layer: str | None = None    # that layer
    dist: str = ""                       # how it ran: "FSDP x2", "DDP x2" ("" for one process)
    state_mem: float | None = None       # parameters + optimizer state bytes a rank keeps (the most of any rank)
    state_saving: float | None = None    # 1 - this state / the first run's (FSDP's shards against DDP's replica)
    rank_peaks: list[float | None] | None = None  # each rank's peak memory, by rank (peak_mem: the highest)
    peak_measure: str | None = None      # what the peaks measure: peak_allocated (CUDA) or peak_rss (CPU process)
    total_steps: int | None = None       # the steps it was set to run
    stopped_early: bool = False          # ended before total_steps
    common_step: int | None = None       # the last step every compared run reached
    loss_at_common: float | None = None  # this run's loss there (the loss column: runs compared at one step)
    loss_step: int | None = None         # the step that loss was recorded at (common_step, or the record before it)
    speedup_noise: float | None = None   # +- on the speed-up (absolute, see SPEED_NOISE_FLOOR); None: not measurable
    same_speed: bool | None = None       # the speed-up is within its noise of 1.0 (comparestep.speed_verdict)
    speed_unresolved: str | None = None  # why the speed-up cannot be told (too short, too noisy, different load)
    variant: str = ""                    # an `ab --script --variant NAME` run's label (variants.chosen_label), else ""
    memory_same: bool | None = None      # the saving is inside the peaks' run-to-run spread (figures.memory_call)
    nonfinite: str = ""                  # its loss went inf/NaN: why, in a few words (RunState.nonfinite)


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return a / b


def _narrowest(s: RunSummary) -> dict[str, Any]:
    """The run's narrowest range headroom over its samples, and the layer (from numerics records)."""
    found = s.numerics.narrowest(1)
    if not found:
        return {}
    bits = found[0].narrowest
    return {"headroom_bits": "nonfinite" if bits == -math.inf else bits, "headroom_layer": found[0].name}


def compare_rows(summaries: list[RunSummary]) -> list[CompareRow]:
    """Rows of the table; speed-up and memory saving are against the first summary (the baseline)."""
    rows: list[CompareRow] = []
    base = summaries[0] if summaries else None
    common = common_step(summaries)
    control = control_of(summaries)  # the baseline's setup run again: the machine's noise, measured
    control_ratio = _ratio(_rank_peak(control), _rank_peak(base)) if control is not None and base else None
    for s, at in zip(summaries, losses_at(summaries, common), strict=True):
        speedup = speedup_of(s, base) if base else None
        trained = not never_stepped(s)  # a variant that failed before its first step has no figures to show
        speedup = speedup if trained else None
        verdict = speed_verdict(s, base, speedup, control) if base is not None else None
        peak, base_peak = _rank_peak(s), _rank_peak(base) if base else None
        ratio = _ratio(peak, base_peak) if trained and s.status != "failed" else None  # a peak cut short compares nothing
        # inside the peaks' run-to-run spread it is no saving (issue 51: "-3.3%" between identical runs)
        memory_same = None if s is base else figures.memory_call(
            None if ratio is None else 1.0 - ratio, s.ranks.measure,
            None if control_ratio is None or s is control else 1.0 - control_ratio) is False
        state, base_state = s.ranks.state_per_rank(), base.ranks.state_per_rank() if base else None
        state_ratio = _ratio(state, base_state)
        delta = s.val_acc - base.val_acc if base and s.val_acc is not None and base.val_acc is not None else None
        rows.append(CompareRow(
            run_id=s.run_id, preset=s.preset, precision=precision_said(s), status=s.status,
            final_loss=s.final_loss, val_acc=s.val_acc, val_acc_delta=delta, peak_mem=peak if trained else None,
            total_time_s=s.total_time_s if trained else None, time_per_epoch_s=s.time_per_epoch_s,
            samples_per_s=s.steady_samples_per_s if trained else None,
            speedup=speedup, memory_saving=None if ratio is None else 1.0 - ratio, memory_same=memory_same,
            skipped=s.skipped_total,
            steps=s.step, data_wait=s.data_wait_share, input_bound=notice(s.data_wait_share, s.device.get("type")),
            dist=distribution.dist_label(s.dist), state_mem=state,
            state_saving=None if state_ratio is None else 1.0 - state_ratio, rank_peaks=s.ranks.peaks_by_rank(),
            peak_measure=s.ranks.measure, total_steps=s.total_steps, stopped_early=stopped_early(s),
            common_step=common, loss_at_common=at[1] if at else None, loss_step=at[0] if at else None,
            speedup_noise=verdict.plus if verdict else None, same_speed=verdict.same if verdict else None,
            speed_unresolved=verdict.unresolved if verdict else None, variant=variant_label(s), nonfinite=s.nonfinite,
            **_narrowest(s)))
    return rows


def _rank_peak(s: RunSummary) -> float | None:
    """A run's peak memory per rank: the highest of any rank's (rank 0's alone when only it said)."""
    return s.ranks.highest_peak() if s.ranks.peaks else s.peak_mem


def _shown_by(cell: Callable[[CompareRow], str]) -> Callable[[CompareRow], str]:
    return lambda row: shown(cell(row))


@dataclass(frozen=True)
class Column:
    """One column of the table: its header (markdown, plain text, the dashboard), a short header
    for a terminal table that must fit 80-100 columns ("\n" splits it over two lines), how a
    row's figure is shown, and how much it matters on a narrow terminal (lowest is left out first)."""

    header: str
    short: str
    cell: Callable[[CompareRow], str]
    priority: int = 5
    terminal_cell: Callable[[CompareRow], str] | None = None  # a shorter form for terminals
    spread_only: bool = False  # shown only when some run ran on several processes (see shown_columns)
    uneven_only: bool = False  # shown only when the runs stopped at different steps
    key: str = ""              # what names it whatever its header says (default: the header)

    def __post_init__(self) -> None:
        if not self.key:
            object.__setattr__(self, "key", self.header)
        # every cell as it may be shown (a preset name, a status, an error come from a runs folder)
        object.__setattr__(self, "cell", _shown_by(self.cell))
        if self.terminal_cell is not None:
            object.__setattr__(self, "terminal_cell", _shown_by(self.terminal_cell))

    def terminal(self, row: CompareRow) -> str:
        return (self.terminal_cell or self.cell)(row)


def _speedup(r: CompareRow, terminal: bool = False) -> str:
    """"2.00x ±0.05"; within its noise "same speed (1.17x ±0.21)" ("same speed" on a terminal); one that
    cannot be told says why in a few words ("too short to tell"; "can't tell" on a terminal)."""
    if r.speed_unresolved:  # "too short to tell", "too noisy to tell", "ran under different load" (json: why)
        return "can't tell" if terminal else r.speed_unresolved.split(" (")[0]
    if r.speedup_noise is None:
        return fmt_ratio(r.speedup)
    said = f"{fmt_ratio(r.speedup)} ±{r.speedup_noise:.2f}"
    if r.same_speed:
        return "same speed" if terminal else f"same speed ({said})"
    return said


def _memory_saving(r: CompareRow) -> str:
    """"-12.5%"; "same" where the difference is inside the peaks' run-to-run spread."""
    return "same" if r.memory_same else fmt_change(r.memory_saving)


def _status(r: CompareRow) -> str:
    said = f"{r.status} early" if r.stopped_early and r.status == "stopped" else r.status
    return f"{said} NaN" if r.nonfinite else said  # its loss went inf/NaN (RunState.nonfinite), as `runs` marks it


def _loss_at_common(r: CompareRow) -> str:
    """The loss at the common step; "(@8)" where the run has no record at that step itself."""
    said = fmt_loss(r.loss_at_common)
    return said if r.loss_step is None or r.loss_step == r.common_step else f"{said} (@{r.loss_step})"


COLUMNS: list[Column] = [
    Column("run", "run", lambda r: r.run_id, priority=9),
    Column("preset", "preset", lambda r: r.variant or r.preset or "-", priority=7),  # a --variant's name before it
    Column("precision", "precision", lambda r: precision_or_unseen(r.precision), priority=9,
           terminal_cell=lambda r: short_precision(r.precision)),
    Column("dist", "dist", lambda r: r.dist or "-", priority=8, spread_only=True),
    Column("steps", "steps", lambda r: fmt_of(r.steps, r.total_steps), priority=9),
    Column("status", "status", _status, priority=9),
    Column("loss @ step", "loss @\nstep", _loss_at_common, priority=9, key="loss"),
    Column("final loss", "final\nloss", lambda r: fmt_loss(r.final_loss), priority=8, uneven_only=True),
    Column("val acc", "val\nacc", lambda r: fmt_accuracy(r.val_acc), priority=8),
    Column("acc vs 1st", "acc vs\n1st", lambda r: fmt_points(r.val_acc_delta), priority=1),
    Column("peak mem", "peak\nmem", lambda r: fmt_bytes(r.peak_mem), priority=7),  # mem saving says it relative
    Column("total time", "total\ntime", lambda r: fmt_duration(r.total_time_s, precise=True), priority=7),
    Column("time/epoch", "time/\nepoch", lambda r: fmt_duration(r.time_per_epoch_s, precise=True), priority=2),
    Column("samples/s", "samples\n/s", lambda r: fmt_rate(r.samples_per_s), priority=4),
    Column("speed-up", "speed\n-up", _speedup, priority=9, terminal_cell=lambda r: _speedup(r, terminal=True)),
    Column("mem saving", "mem\nsaving", _memory_saving, priority=8),
    Column("state/rank", "state\n/rank", lambda r: fmt_bytes(r.state_mem), priority=6, spread_only=True),
    Column("state saving", "state\nsaving", lambda r: fmt_change(r.state_saving), priority=8, spread_only=True),
    Column("skipped", "skipped\nsteps", lambda r: str(r.skipped), priority=5),
    Column("data wait", "data\nwait", lambda r: "-" if r.data_wait is None else f"{100 * r.data_wait:.0f}%"
           + (" (input-bound)" if r.input_bound else ""), priority=3),
]
HEADERS = tuple(c.key for c in COLUMNS)  # the columns' keys (cells() order); shown_columns has their headers


def shown_columns(rows: list[CompareRow]) -> list[Column]:
    """The columns a table of `rows` shows: the per-rank ones (dist, state/rank, state saving) only
    when a run ran on several processes (one-process A/Bs keep their table); the final loss only
    when the runs stopped at different steps (the loss column compares them at the common step,
    "loss @ step 10")."""
    spread = any(r.dist for r in rows)
    uneven = len({r.steps for r in rows}) > 1
    common = rows[0].common_step if rows else None
    shown = [c for c in COLUMNS if (spread or not c.spread_only) and (uneven or not c.uneven_only)]
    at = f"step {common}" if common is not None else "step -"
    return [replace(c, header=f"loss @ {at}", short=f"loss @\n{at}") if c.key == "loss" else c for c in shown]


def drop_order(columns: Sequence[Column]) -> list[Column]:
    """The columns a narrow table leaves out, first to last, until the rest fit (core/narrow.py): the
    lowest priority first, equal ones in the order given; those of priority 9 never."""
    return [c for c in sorted(columns, key=lambda c: c.priority) if c.priority < 9]


def cells(row: CompareRow) -> tuple[str, ...]:
    """One row as display strings, in HEADERS order."""
    return tuple(c.cell(row) for c in COLUMNS)


def render(rows: list[CompareRow], fmt: str = "table") -> str:
    """The table as plain text ("table"), markdown, csv (raw numbers) or json."""
    if fmt == "json":
        return json.dumps([asdict(r) for r in rows], indent=2)
    if fmt == "csv":  # raw numbers (bytes, seconds, fractions), for spreadsheets and scripts
        out = io.StringIO()
        write_csv(out, list(CompareRow.__dataclass_fields__),  # text from a runs folder: csvsafe's cells
                  ({k: " ".join("-" if p is None else f"{p:.0f}" for p in v) if isinstance(v, list) else v
                    for k, v in asdict(r).items()} for r in rows))  # rank_peaks: bytes, space-separated
        return out.getvalue()
    columns = shown_columns(rows)
    table = [tuple(c.header for c in columns)] + [tuple(c.cell(r) for c in columns) for r in rows]
    if fmt == "markdown":
        lines = ["| " + " | ".join(table[0]) + " |", "|" + "|".join("---" for _ in columns) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in table[1:]]
        return "\n".join(lines)
    widths = [max(len(r[i]) for r in table) for i in range(len(columns))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip() for r in table)

