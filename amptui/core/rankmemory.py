"""Memory per rank, for compare: what each rank of a run keeps for good (its parameters and
optimizer state, from its start record) and each rank's peak (its step records' memory figures).

    ranks = RankMemory()
    for rec in rank0_records: ranks.add(rec)          # runsummary.RunSummary feeds rank 0's as it reads them
    read_other_ranks(run_dir, primary_file, ranks)    # then events.rank<N>.jsonl, each rank its own file
    ranks.state_per_rank(), ranks.highest_peak(), ranks.peaks_by_rank()

The state is what the trainer recorded: `sharded` (FSDP: this rank's shards and their optimizer
state) or `replica` (DDP, one process: the whole model's, on every rank). The peak is whatever the
step records measured: the CUDA caching allocator's `peak_allocated`, or on a CPU the process's
`peak_rss`, which counts torch itself and memory the allocator keeps (docs/distributed.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amptui.core.stream.events import EventReader
from amptui.core.stream.records import End, Readable, Record, Start, Step

_CHUNK = 8 * 1024 * 1024
PEAK_KEYS = ("peak_allocated", "peak_rss", "allocated", "rss")  # a step record's mem, best figure first
HELD_FIELDS = ("sharded", "replica")
MAX_RANKS = 1 << 16  # a rank number past this (a damaged file) is not a rank we place: peaks_by_rank stays small


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def named_peak(mem: Any) -> tuple[str, float] | None:
    """(which figure, its value) of a step record's `mem`; None when it has none (or a damaged one)."""
    if not isinstance(mem, dict):
        return None
    for key in PEAK_KEYS:
        value = _number(mem.get(key))
        if value is not None:
            return key, value
    return None


def peak_of(mem: Any) -> float | None:
    """A step record's memory figure (named_peak's value); None when it has none."""
    found = named_peak(mem)
    return found[1] if found else None


def held_bytes(start: Readable) -> float | None:
    """Parameters + optimizer state bytes the rank keeps, from a start record; None when it
    recorded neither (a Monitor, a script, a run from before these fields)."""
    for name in HELD_FIELDS:
        held = start.get(name)
        if isinstance(held, dict):
            params, optimizer = _number(held.get("params_bytes")), _number(held.get("optimizer_bytes"))
            if params is not None:
                return params + (optimizer or 0.0)
    return None


def _rank(rec: Readable) -> int | None:
    rank = _number(rec.get("rank"))
    return int(rank) if rank is not None and 0 <= rank < MAX_RANKS else None


@dataclass
class RankMemory:
    state: dict[int, float] = field(default_factory=dict)  # rank -> params + optimizer state bytes it keeps
    peaks: dict[int, float] = field(default_factory=dict)  # rank -> its highest memory figure
    measures: set[str] = field(default_factory=set)        # which figures the peaks are (PEAK_KEYS)

    def add(self, rec: Record, rank: int | None = None) -> None:
        """One record: of rank `rank`'s own file, or (None) of the file that speaks for the run,
        where the record's `rank` says whose it is."""
        rank = _rank(rec) if rank is None else rank
        if rank is None or rank >= MAX_RANKS:
            return
        if isinstance(rec, Start):
            held = held_bytes(rec)
            if held is not None:  # a resumed session's start says it again: the latest counts
                self.state[rank] = held
        elif isinstance(rec, Step):
            peak = named_peak(rec.mem)
            if peak is not None:
                self.measures.add(peak[0])
                self._take(rank, peak[1])
        elif isinstance(rec, End):
            peak_mem = _number(rec.peak_mem)
            if peak_mem is not None:
                self._take(rank, peak_mem)

    def _take(self, rank: int, value: float) -> None:
        self.peaks[rank] = max(self.peaks.get(rank, value), value)

    def state_per_rank(self) -> float | None:
        """The most any rank keeps (FSDP's shards can be uneven); None when not recorded."""
        return max(self.state.values()) if self.state else None

    def highest_peak(self) -> float | None:
        return max(self.peaks.values()) if self.peaks else None

    def peaks_by_rank(self) -> list[float | None] | None:
        """Each rank's peak, by rank number (None for a rank whose file said nothing); None without peaks."""
        if not self.peaks:
            return None
        return [self.peaks.get(r) for r in range(max(self.peaks) + 1)]

    @property
    def measure(self) -> str | None:
        """"peak_allocated" (CUDA allocator), "peak_rss" (CPU process), or the first figure found."""
        return next((k for k in PEAK_KEYS if k in self.measures), None)


def note(runs: list[tuple[str, str, RankMemory]], brief: bool = False) -> str | None:
    """compare's note on memory per rank, for runs (id, dist label, ranks) when one ran on several
    processes: what was measured, honestly (a CPU's RSS is the whole process, not the model).
    `brief`: two lines' worth, for the dashboard's compare screen."""
    if not any(label for _, label, _ in runs):
        return None
    measures = {ranks.measure for _, _, ranks in runs if ranks.measure}
    cuda = bool(measures) and all("allocated" in m for m in measures)
    if brief:
        return ("per rank: state = parameters + optimizer state a rank keeps (its start record); peak mem = the "
                + ("highest rank's peak allocated" if cuda else
                   "highest rank's peak RSS (the whole process: on a CPU it hides most of the saving)"))
    peak = ("its peak allocated (the CUDA caching allocator's)" if cuda
            else "its peak RSS, the whole process: torch itself, the data and memory the allocator keeps count "
                 "too, so on a CPU it hides most of a small model's saving (docs/distributed.md)")
    missing = [run_id for run_id, _, ranks in runs if ranks.state_per_rank() is None]
    return ("memory per rank: state/rank = the parameters + optimizer state a rank keeps, from its start record "
            "(FSDP: its shards; DDP or one process: the whole model's; gradients and activations come on top); "
            "state saving = 1 - state/rank / the first run's; peak mem = the highest rank's peak, "
            + peak + (f"; state not recorded by {', '.join(missing)}" if missing else ""))


def rank_files(run_dir: Path) -> dict[int, Path]:
    """{rank: its events file} for the ranks other than rank 0 (events.rank<N>.jsonl)."""
    out = {}
    for path in Path(run_dir).glob("events.rank*.jsonl"):
        number = path.name[len("events.rank"):-len(".jsonl")]
        if number.isascii() and number.isdigit() and path.is_file() and not path.is_symlink():
            out[int(number)] = path
    return dict(sorted(out.items()))


def read_other_ranks(run_dir: Path, primary: Path, into: RankMemory) -> None:
    """Every rank file but `primary` (already read) into `into`, in chunks: only the start records'
    state and the memory figures are kept, so a long run costs a read, not memory."""
    for rank, path in rank_files(run_dir).items():
        if path == primary:
            continue
        reader = EventReader(path)
        while batch := reader.read(_CHUNK):
            for rec in batch:
                if isinstance(rec, (Start, Step, End)):
                    into.add(rec, rank)

