"""Home screen runs: the filter (`/`), the run table, and one line on the highlighted run. RunsPane is
the widget that holds them and reads the run list (every 2 s, in a thread worker); it posts what the
screen reacts to: the runs listed (A/Bs started there that ended, presets changed on disk), the filter
changed (the presets are filtered alike), the keys that apply changed (the footer is redrawn). Below,
the plain functions behind x (delete)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Input, Static
from textual.worker import Worker, WorkerState

from amptui.core.config.precision import precision_or_unseen
from amptui.core.distribution import dist_label
from amptui.core.errors import UserError
from amptui.core.fmt import fmt_accuracy as fmt_acc
from amptui.core.fmt import fmt_duration, fmt_loss, shown
from amptui.core.run import runops
from amptui.core.run.runs import RunInfo
from amptui.dashboard.notice import Notice
from amptui.dashboard.runscache import RunsCache
from amptui.dashboard.screens.base import in_background, say_failure
from amptui.dashboard.widgets.runtable import RunTable
from amptui.dashboard.widgets.wordline import WordLine
from amptui.jobs import groups as groupmod

if TYPE_CHECKING:
    from amptui.dashboard.shell import DashboardApp

NO_RUN = "no run highlighted"
RUNS_REFRESH_S = 2.0
RUNS_GROUP = "home-runs"  # the worker that reads the run list


class FilterInput(Input):
    BINDINGS = [Binding("escape", "done", "Done")]

    class Done(Message):
        """Escape in the filter: leave it."""

    def action_done(self) -> None:
        self.post_message(self.Done())


class RunsPane(Vertical):
    """The runs box: `table` lists the runs of the app's runs folder (filtered), the line below says
    more of the highlighted one; `resume_refusal` says why R does not apply to it (None: it does)."""
    if TYPE_CHECKING:
        app: DashboardApp  # self.app is the dashboard's app (runs_root, from_thread)

    class Listed(Message):
        """The run list was read and shown: its runs (by id) and A/B groups."""

        def __init__(self, runs: dict[str, RunInfo], groups: list[groupmod.Group]) -> None:
            super().__init__()
            self.runs = runs
            self.groups = groups

    class FilterChanged(Message):
        def __init__(self, words: list[str]) -> None:
            super().__init__()
            self.words = words

    class KeysChanged(Message):
        """What applies to the highlighted run changed (none highlighted, R refused or not)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.resume_refusal: str | None = NO_RUN
        self._keys_shown: tuple | None = None  # what the footer's keys were last drawn for
        self._cache = RunsCache()
        self._failure_said: tuple[str, str] | None = None  # the last failure shown (say_failure)
        self._read_again = False  # a read was asked for while one was going

    def compose(self):
        yield FilterInput(placeholder="filter presets and runs: words in name, status, precision, A/B group, id",
                          id="runs-filter", compact=True)
        yield RunTable(id="runs")
        yield Static("no runs yet: pick a preset and press r", id="runs-empty")
        yield WordLine(id="run-detail")

    def on_mount(self) -> None:
        self.border_title = "Runs"
        self.query_one("#runs-filter").display = False
        self.refresh_runs()
        self.set_interval(RUNS_REFRESH_S, self.refresh_runs)

    def refresh_runs(self, anew: bool = False) -> None:
        """Read the run list again (`anew`: from scratch, another folder). While a read is still going
        (a slow one would be cancelled before it showed anything) the next starts when it ends."""
        if anew:
            self._cache = RunsCache()
        if any(w.group == RUNS_GROUP and w.is_running for w in self.workers):
            self._read_again = True
        else:
            self._load_runs()

    @in_background(RUNS_GROUP, "reading the run list")
    def _load_runs(self) -> None:
        root = self.app.runs_root
        try:
            runs = self._cache.scan(root)
            groups = groupmod.groups(root) if root.is_dir() else []
        except OSError:
            return
        self.app.from_thread(self._read, root, runs, groups)

    def _read(self, root: Path, runs: list[RunInfo], groups: list[groupmod.Group]) -> None:
        if root == self.app.runs_root:  # not a folder left meanwhile (o)
            self.show_runs(runs, groups)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            self._failure_said = say_failure(self, event.worker, self._failure_said)
        if event.worker.group == RUNS_GROUP and event.worker.is_finished and self._read_again:
            self._read_again = False
            self._load_runs()

    @property
    def table(self) -> RunTable:
        return self.query_one(RunTable)

    def highlighted(self) -> RunInfo | None:
        table = self.table
        return table.runs.get(table.highlighted_run() or "")

    def show_runs(self, runs: list[RunInfo], groups: list[groupmod.Group]) -> None:
        self.table.set_runs(runs, {rid: g.label for g in groups for rid in g.runs})
        self._shown()
        self.post_message(self.Listed({r.run_id: r for r in runs}, groups))

    def _shown(self) -> None:
        """What goes with the table's rows: the empty note, the filter's count, the highlighted run."""
        table = self.table
        self.query_one("#runs-empty").display = not table.total
        table.display = bool(table.total)
        words = " ".join(table.filter_words)
        self.border_title = f"Runs · filter {words!r}: {len(table.runs)} of {table.total}" if words else "Runs"
        self._show_detail()

    @on(DataTable.RowHighlighted, "#runs")
    def _run_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        detail = self.query_one("#run-detail", WordLine)
        info = self.highlighted()
        self.resume_refusal = runops.resume_refusal(info.path, info) if info is not None else NO_RUN
        keys = (info is None, self.resume_refusal)
        if keys != self._keys_shown:  # the footer is rebuilt on each refresh (every 2 s): only on a change
            self._keys_shown = keys
            self.post_message(self.KeysChanged())
        if info is None:
            detail.update("")
        elif info.error:
            detail.update(Text.assemble((f"{info.run_id}: ", "bold"), (shown(info.error), "red")))
        else:
            detail.show_forms(*detail_forms(info))

    def open_filter(self) -> None:
        box = self.query_one("#runs-filter", FilterInput)
        box.display = True
        box.focus()

    @on(Input.Changed, "#runs-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        words = event.value.lower().split()
        if self.table.refilter(words):  # the runs as last read: a key press reads no run folder
            self._shown()
        self.post_message(self.FilterChanged(words))

    @on(Input.Submitted, "#runs-filter")
    @on(FilterInput.Done)
    def close_filter(self) -> None:
        """Leave the filter field; an empty filter hides it, a set one stays shown."""
        box = self.query_one("#runs-filter", FilterInput)
        box.display = bool(box.value.strip())
        self.table.focus()


def detail_forms(info: RunInfo) -> list[Text]:
    """The line on a run, widest first: its id, how it ran, its figures; narrower: the run id left
    out (the list shows it), then the figures before the precision."""
    word = "loss" if info.status == "running" else "final loss"
    extra = f" · {word} {fmt_loss(info.final_loss)}" if info.final_loss is not None else ""
    if info.val_acc is not None:
        extra += f" · val acc {fmt_acc(info.val_acc)}"
    spread = dist_label(info.dist)  # "DDP x2": how it ran; an FSDP policy's words already say FSDP
    if spread and (info.precision_words or "").startswith("FSDP"):
        spread = f"{info.world_size} ranks"
    how = (f"{shown(precision_or_unseen(info.precision_words or info.precision))}"
           + (f" · {spread}" if spread else "") + f" · {fmt_duration(info.duration_s)}")
    figures_first = [Text(f"{extra.removeprefix(' · ')} · {how}", style="dim")] if extra else []
    return [Text.assemble((info.run_id, "bold"), f" · {how}{extra}", style="dim"),
            Text(f"{how}{extra}", style="dim"), *figures_first]


def delete_question(info: RunInfo) -> str | Notice:
    """What x asks before deleting the run, or why it will not (a running run)."""
    if info.status == "running":
        return Notice(f"run {info.run_id} is running; stop it before deleting it (w, then s)",
                      severity="warning", timeout=6)
    return (f"Delete run {info.run_id} ({info.preset or 'no preset'}, {info.status})?\nIts folder {info.path} "
            "goes, with its checkpoints and log.")


def delete(info: RunInfo, alive: Callable[[dict], bool]) -> Notice:
    """Delete the run's folder (never a live run's: `alive` says whether its process runs)."""
    try:
        runops.delete_run(info.path, alive=alive)
    except (UserError, OSError) as exc:
        return Notice(str(exc), title="Not deleted", severity="error", timeout=8)
    return Notice(f"deleted run {info.run_id}")
