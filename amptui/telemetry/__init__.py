"""Telemetry shared by amptui's trainer and `amptui.Monitor`: one recorder of the event stream
(step windows, scaler events, alarms, memory, start/epoch/end records). Below both: it imports
core and torch, never the trainer, the Monitor or Textual."""

from amptui.telemetry.recorder import Recorder  # noqa: F401
from amptui.telemetry.tally import Counters  # noqa: F401
