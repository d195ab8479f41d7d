"""A run read for comparison: its state (core.runstate) plus the figures only the comparison
needs, from its whole event stream (`summarize`). The table (core.comparison.compare), its notes
(core.comparison.comparenotes) and the common-step figures (core.comparison.comparestep) all read these.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amptui.core import distribution
from amptui.core.config import values as cfgmod
from amptui.core.config.scriptview import keys_said
from amptui.core.errors import ConfigError
from amptui.core.numerics import NumericsSummary
from amptui.core.rankmemory import RankMemory, peak_of, read_other_ranks
from amptui.core.run.runfiles import RunFolder
from amptui.core.run.runstate import RunState, fold
from amptui.core.series import Series
from amptui.core.stream.events import EventReader, primary_events_file
from amptui.core.stream.records import End, Epoch, Numerics, Record, Step, as_record

_CHUNK = 8 * 1024 * 1024

@dataclass
class RunSummary(RunState):
    """A run's state (core.runstate) plus the figures only the comparison needs."""

    flat_config: dict[str, Any] = field(default_factory=dict)  # the resolved config.toml: {"amp.dtype": ...}
    config_said: frozenset[str] | None = None   # a script run's: the keys its config.toml holds (scriptview.keys_said)
    peak_mem: float | None = None
    total_time_s: float | None = None            # the run's duration (see runstate.RunClock)
    time_per_epoch_s: float | None = None
    step_ms_spread: float | None = None         # relative spread (stdev / mean) of the steady windows' ms/step
    others_cpu: float | None = None             # median share of the CPUs other processes used in its windows
    load_seen: list[float] = field(default_factory=list)  # each step record's others_cpu (after the first)
    run_dir: Path | None = None                  # where the events were read (for the loss at a common step)
    data_wait_share: float | None = None        # sum of data_wait_ms / sum of step_time_ms (see inputbound)
    loss_curve: Series = field(default_factory=lambda: Series(cap=400))
    epoch_times: list[float] = field(default_factory=list)  # whole epochs' training-step seconds
    numerics: NumericsSummary = field(default_factory=lambda: NumericsSummary(cap=1))  # range headroom per layer
    ranks: RankMemory = field(default_factory=RankMemory)  # what each rank keeps, and its peak (all ranks' files)

    @property
    def dist(self) -> dict[str, Any] | None:
        """How the run was spread (core.distribution): config.toml's dist.mode, the start record's world size."""
        return distribution.of_run(self.flat_config.get("dist.mode"), self.config, self.world_size, self.start)

    def add(self, rec: Record | dict[str, Any]) -> None:
        rec = as_record(rec)
        timed = len(self.timed.windows)
        super().add(rec)  # the step windows too (core.figures: the steady rates every view shows)
        if self.redone_after is not None:  # a resume, an autopilot rewind: the redone steps drawn once
            self.loss_curve.rewind(self.redone_after)
        self.ranks.add(rec)
        if isinstance(rec, Step):
            if len(self.timed.windows) > max(1, timed) and isinstance(rec.others_cpu, (int, float)):
                self.load_seen.append(float(rec.others_cpu))  # after the first window, as the rates
            self.loss_curve.add(rec.step or 0, rec.loss)
            self._take_peak(peak_of(rec.mem))
        elif isinstance(rec, Epoch):
            if rec.epoch_time_s is not None and not rec.partial:
                self.epoch_times.append(float(rec.epoch_time_s))
        elif isinstance(rec, End) and rec.peak_mem is not None:
            self._take_peak(float(rec.peak_mem))
        elif isinstance(rec, Numerics) and self.speaks(rec):
            self.numerics.add(rec)

    def _take_peak(self, peak: float | None) -> None:
        if peak is not None:
            self.peak_mem = peak if self.peak_mem is None else max(self.peak_mem, peak)

    def finish(self) -> "RunSummary":
        """The figures over the whole run, once every record is in."""
        self.total_time_s = self.clock.seconds()
        self.data_wait_share = self.data_wait.share
        self.step_ms_spread = self.timed.steady(self.total_steps, self.compiled).spread
        self.others_cpu = statistics.median(self.load_seen) if self.load_seen else None
        if self.epoch_times:
            self.time_per_epoch_s = sum(self.epoch_times) / len(self.epoch_times)
        return self


def _flat_config(run_dir: Path) -> tuple[dict[str, Any], frozenset[str] | None]:
    """The run's resolved config.toml as {"section.key": value} (empty when it cannot be read),
    and for a script run the keys the file really holds (the rest are defaults it never used)."""
    path = RunFolder(run_dir).config
    try:
        raw = cfgmod.read_toml(path)
        return cfgmod.build_config(raw, source=str(path)).flat(), keys_said(raw)
    except ConfigError:
        return {}, None


def summarize(run_dir: Path) -> RunSummary:
    """Read a run's whole rank-0 event stream (in chunks, constant memory) into its summary; the
    other ranks' files for their memory (core.rankmemory)."""
    run_dir = Path(run_dir)
    flat, said = _flat_config(run_dir)
    summary = RunSummary(run_id=run_dir.name, flat_config=flat, config_said=said, run_dir=run_dir)
    primary = primary_events_file(run_dir)
    reader = EventReader(primary)
    while batch := reader.read(_CHUNK):
        fold(batch, summary)
    read_other_ranks(run_dir, primary, summary.ranks)  # each rank's state and peak, for memory per rank
    return summary.finish()
