"""Panel 6: the run's output.log, as its lines arrive (the run screen feeds them at its flush rate,
faster than the plots are drawn)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult

from amptui.core.fmt import shown
from amptui.core.run.runfiles import OUTPUT_LOG
from amptui.dashboard.panels.base import RunPanel
from amptui.dashboard.runmodel import RunModel
from amptui.dashboard.widgets.runlog import RunLog

LOG_LINES = 400  # kept on screen (output.log keeps them all)


class LogPanel(RunPanel):
    KEY, NAME, TITLE, PLACE = "log", "log", OUTPUT_LOG, 6
    _seq = 0  # the model's log_seq when its lines were last shown

    def compose(self) -> ComposeResult:
        yield RunLog(max_lines=LOG_LINES, id="log")

    def follow(self, model: RunModel) -> None:
        new_lines = model.log_seq - self._seq
        self._seq = model.log_seq
        if new_lines > 0:
            log = self.query_one(RunLog)
            for line in list(model.log_lines)[-new_lines:]:
                log.add(Text(shown(line)))

    def caught_up(self, model: RunModel) -> bool:
        # a written line shows once the log has scrolled to it (RichLog scrolls after the next refresh)
        return self._seq == model.log_seq and self.query_one(RunLog).is_vertical_scroll_end
