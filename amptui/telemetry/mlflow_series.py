"""`log.mlflow = true`: the step and epoch series mirrored into MLflow, beside TensorBoard: one
MLflow run per amptui run, in the tracking server MLFLOW_TRACKING_URI names (experiment:
MLFLOW_EXPERIMENT_NAME, else MLflow's default), written by rank 0 as one more Recorder sink
(sinks.py). Its params are the resolved config (dotted keys) and its tags the precision, preset
and amptui run id; its metrics are loss, lr, loss scale, skipped steps, samples/s, step time,
memory, the epoch figures and the numerics summaries (narrowest headroom, each mode's probe's lowest figure).

Through `MlflowClient`, never MLflow's global "active run": a script under `amptui run --script`
that logs to MLflow itself keeps its own run. Every call to the tracking server -- importing MLflow,
making the run, each batch, ending it -- runs on the mirror's own thread (outbound.Outbox), begun at
the first step record so that importing MLflow stays out of the run's set-up, so a
refusing or hanging server (MLflow retries for minutes) never stalls set-up or a step: the queue
drops when full, the first failure is one line and the mirror stops calling; `close` waits at most
outbound.CLOSE_S for what is queued (with the run's other mirrors, at once).
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from pathlib import Path
from typing import Any

from amptui.core.config.values import Config
from amptui.core.stream.records import EPOCH, STEP, End, Epoch, Numerics, Record, Start, Step
from amptui.telemetry.outbound import Outbox
from amptui.telemetry.sinks import Mirror, numerics_summary

STEP_METRICS = {STEP.loss: "loss", STEP.lr: "lr", STEP.scale: "loss_scale", STEP.skipped: "skipped",
                STEP.skipped_total: "skipped_total", STEP.samples_per_s: "samples_per_s",
                STEP.step_time_ms: "step_time_ms", STEP.data_wait_ms: "data_wait_ms", STEP.grad_norm: "grad_norm",
                STEP.tflops: "tflops"}
EPOCH_METRICS = (EPOCH.train_loss, EPOCH.val_loss, EPOCH.val_acc, EPOCH.epoch_time_s)
END_STATUS = {"completed": "FINISHED", "stopped": "KILLED", "failed": "FAILED"}
SECRET_KEYS = {"log.notify_url"}  # a webhook's address is its secret: never sent to another system
BATCH = 100  # params per call (MLflow's limit per log_batch)


def flat_params(config: dict[str, Any]) -> dict[str, str]:
    """{section: {key: value}} -> {"section.key": "value"} (lists and tables as JSON)."""
    out = {}
    for section, keys in config.items():
        for key, value in (keys or {}).items():
            if f"{section}.{key}" in SECRET_KEYS:
                continue
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
            out[f"{section}.{key}"] = text[:6000]  # MLflow's longest param value
    return out


class MLflowSeries(Mirror):
    def __init__(self, run_dir: Path, cfg: Config):
        if importlib.util.find_spec("mlflow") is None:
            raise ImportError("No module named 'mlflow'")
        self.run_name, self.preset = Path(run_dir).name, cfg.run.name
        self.client: Any = None
        self.run_id: str | None = None
        self.ended = "FINISHED"
        self.broken = False
        # Begun at the first step record: importing MLflow (seconds of CPU) stays out of the run's set-up.
        self.outbox = Outbox("mlflow", "log.mlflow (MLflow)", size=1024, deferred=True)
        self.outbox.put(self._open)

    def _open(self) -> None:
        """On the mirror's thread: the client (MLFLOW_TRACKING_URI, as every MLflow user sets it), the experiment, the run."""
        try:
            from mlflow.tracking import MlflowClient

            self.client = MlflowClient()
            name = os.environ.get("MLFLOW_EXPERIMENT_NAME")
            experiment = self.client.get_experiment_by_name(name) if name else None
            experiment_id = experiment.experiment_id if experiment is not None else (
                self.client.create_experiment(name) if name else "0")
            run = self.client.create_run(experiment_id, run_name=self.run_name,
                                         tags={"amptui_run_id": self.run_name, "amptui_preset": self.preset})
            self.run_id = run.info.run_id
        except Exception:
            self.broken = True  # no call after a failed one: each would wait out MLflow's retries again
            raise

    def _log(self, metrics=(), params=(), tags=()) -> None:
        """One batch, queued for the mirror's thread; a tracking server that fails is said once, and
        training goes on without it."""
        if self.broken or not (metrics or params or tags):
            return
        self.outbox.put(lambda: self._send(list(metrics), list(params), list(tags)))

    def _send(self, metrics, params, tags) -> None:
        """On the mirror's thread: (key, value, ms, step) / (key, value) tuples as MLflow's entities."""
        if self.broken or self.run_id is None:
            return
        from mlflow.entities import Metric, Param, RunTag

        try:
            self.client.log_batch(self.run_id, metrics=[Metric(*m) for m in metrics],
                                  params=[Param(*p) for p in params], tags=[RunTag(*t) for t in tags])
        except Exception:
            self.broken = True
            raise

    def _metrics(self, values: dict[str, Any], step: int):
        now = int(time.time() * 1000)
        return [(key, float(value), now, step) for key, value in values.items()
                if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value]

    def step(self, step_record: Step) -> None:
        record = step_record.fields()
        values = {name: record.get(key) for key, name in STEP_METRICS.items()}
        values.update({f"memory_{key}_mib": value / 2**20 for key, value in (record.get(STEP.mem) or {}).items()
                       if isinstance(value, (int, float))})
        self._log(metrics=self._metrics(values, record[STEP.step]))
        self.outbox.begin()

    def epoch(self, epoch_record: Epoch, step: int) -> None:
        record = epoch_record.fields()
        self._log(metrics=self._metrics({f"epoch_{key}": record.get(key) for key in EPOCH_METRICS}, step))

    def note(self, record: Record) -> None:
        if isinstance(record, Start):
            self._start(record)
        elif isinstance(record, Numerics):
            summary = numerics_summary(record)
            self._log(metrics=self._metrics({f"numerics_{k}": v for k, v in summary.items()}, record.step))
        elif isinstance(record, End):
            self.ended = END_STATUS.get(record.status, "FINISHED")

    def _start(self, record: Start) -> None:
        precision = record.precision
        tags = [("amptui_precision", json.dumps(precision, sort_keys=True) if isinstance(precision, dict)
                 else str(precision)), ("amptui_world_size", str(record.world_size))]
        if record.resumed_from is not None:  # a resumed run logs into a new MLflow run: say from where
            tags.append(("amptui_resumed_from_step", str(record.resumed_from)))
        params = list(flat_params(record.config).items())
        if isinstance(precision, dict):
            params += [(f"precision.{k}", str(v)) for k, v in precision.items() if not isinstance(v, (dict, list))]
        self._log(tags=tags)
        for first in range(0, len(params), BATCH):
            self._log(params=params[first:first + BATCH])

    def last_jobs(self) -> None:
        def end() -> None:
            if not self.broken and self.run_id is not None:
                self.client.set_terminated(self.run_id, self.ended)

        self.outbox.put(end)
