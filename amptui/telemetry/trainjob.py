"""Inside a Kubeflow Trainer TrainJob (KEP-2779): rank 0 posts the run's `trainerStatus` --
progressPercentage, estimatedRemainingSeconds and metrics as name/value pairs (loss, lr, loss
scale, skipped steps, the narrowest headroom and each mode probe's lowest figure) -- to the status
URL the Trainer's status plugin injects, over HTTPS with its CA and bearer token (outbound.py: the
one way amptui sends; https only, redirects never followed, the token never in a message):

    KUBEFLOW_TRAINER_STATUS_URL      the endpoint (POST)
    KUBEFLOW_TRAINER_STATUS_TOKEN    a file holding the projected service-account token (re-read each post: it rotates)
    KUBEFLOW_TRAINER_STATUS_CA_CERT  a file holding the CA that signed the endpoint's certificate

One more Recorder sink (sinks.py), so amptui's trainer, a script under `amptui run --script` and a
Monitor all post. Standard library only. On the log cadence, at most every MIN_INTERVAL_S (the
Trainer rate-limits), and once at the end; a background thread posts, so a slow endpoint never
stalls training; a failed post is one warning, never a failed run; an http:// URL, or a CA file that
is missing or not a certificate, is one warning naming the variable and the file, and nothing is
posted. Nothing without the variables.
"""

from __future__ import annotations

import json
import os
import ssl
import time
from datetime import datetime, timezone

from amptui.core.stream.records import STEP, End, Epoch, Numerics, Record, Start, Step
from amptui.core.urls import url_problem
from amptui.telemetry.outbound import OutboundError, Outbox, post, read_token, say, tls_context
from amptui.telemetry.sinks import Mirror, numerics_summary

URL_ENV, TOKEN_ENV, CA_ENV = ("KUBEFLOW_TRAINER_STATUS_URL", "KUBEFLOW_TRAINER_STATUS_TOKEN",
                              "KUBEFLOW_TRAINER_STATUS_CA_CERT")
MIN_INTERVAL_S = 5.0
TIMEOUT_S = 5.0


def from_env(env=os.environ) -> TrainJobStatus | None:
    """The status sink the variables ask for; None without them, or (one warning naming the
    variable and the file) when the URL is not https or the CA file cannot be used."""
    url = env.get(URL_ENV)
    if not url:
        return None
    problem = url_problem(url)
    if problem:
        say(f"warning: {URL_ENV} {problem}; the TrainJob status is not posted, training goes on")
        return None
    try:
        context = tls_context(env.get(CA_ENV), CA_ENV)
    except OutboundError as exc:
        say(f"warning: {exc}; the TrainJob status is not posted, training goes on")
        return None
    return TrainJobStatus(url, env.get(TOKEN_ENV), context)


class TrainJobStatus(Mirror):
    def __init__(self, url: str, token_file: str | None, context: ssl.SSLContext):
        self.url, self.token_file, self.context = url, token_file, context
        self.total_steps: int | None = None
        self.first_step = 0
        self.started = time.monotonic()
        self.metrics: dict[str, str] = {}
        self.progress: int | None = None
        self.remaining: int | None = None
        self.last_sent = float("-inf")
        self.outbox = Outbox("trainjob-status", "posting the TrainJob status")

    # --- what the run says ------------------------------------------------------------------------

    def note(self, record: Record) -> None:
        if isinstance(record, Start):
            self.total_steps = record.total_steps
            self.first_step = record.resumed_from or 0
        elif isinstance(record, Numerics):
            summary = numerics_summary(record)
            for key, value in summary.items():  # the narrowest headroom and each probe's lowest figure
                if key.startswith("min_"):
                    self.metrics[key] = f"{value:.4g}"
        elif isinstance(record, End):
            if record.status == "completed":
                self.progress, self.remaining = 100, 0
            self._send(self.status(), force=True)

    def step(self, step_record: Step) -> None:
        record = step_record.fields()
        step = record[STEP.step]
        for key, name in ((STEP.loss, "loss"), (STEP.lr, "lr"), (STEP.scale, "loss_scale"),
                          (STEP.skipped_total, "skipped_steps"), (STEP.samples_per_s, "samples_per_s")):
            value = record.get(key)
            if isinstance(value, (int, float)) and value == value:
                self.metrics[name] = str(value) if isinstance(value, int) else f"{value:.6g}"
        self.metrics["step"] = str(step)
        if self.total_steps:
            self.progress = max(0, min(100, int(100 * step / self.total_steps)))
            done = step - self.first_step
            if done > 0:
                per_step = (time.monotonic() - self.started) / done
                self.remaining = max(0, int(per_step * (self.total_steps - step)))
        self._send(self.status(), force=self.last_sent == float("-inf"))

    def epoch(self, epoch_record: Epoch, step: int) -> None:
        record = epoch_record.fields()
        for key in ("val_loss", "val_acc"):
            value = record.get(key)
            if isinstance(value, (int, float)) and value == value:
                self.metrics[key] = f"{value:.6g}"

    def status(self) -> dict:
        status: dict = {"lastUpdatedTime": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                        "metrics": [{"name": k, "value": v} for k, v in self.metrics.items()]}
        if self.progress is not None:
            status["progressPercentage"] = self.progress
        if self.remaining is not None:
            status["estimatedRemainingSeconds"] = self.remaining
        return {"trainerStatus": status}

    # --- posting, off the training loop ----------------------------------------------------------------

    def _send(self, payload: dict, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last_sent < MIN_INTERVAL_S:
            return
        self.last_sent = now
        self.outbox.put(lambda: self._post(payload), latest=True)  # a newer status replaces one not yet posted

    def _post(self, payload: dict) -> None:
        token = read_token(self.token_file, TOKEN_ENV) if self.token_file else None  # re-read: it rotates
        post(self.url, json.dumps(payload).encode(), "application/json", token=token, context=self.context,
             timeout=TIMEOUT_S)

    close_wait_s = 2 * TIMEOUT_S + 1  # the last status, bounded
