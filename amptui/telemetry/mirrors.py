"""Which sinks mirror a run's records beyond its event stream (sinks.py), on rank 0: TensorBoard
scalars (log.tensorboard), MLflow (log.mlflow) and, inside a Kubeflow TrainJob (its status
variables set), the TrainJob's status (trainjob.py), and a webhook told of failures (log.notify_url,
notify.py). Used alike by amptui's trainer, a script under
the hooks (`amptui run --script`) and an `amptui.Monitor`."""

from __future__ import annotations

from pathlib import Path

from amptui.core.config.values import Config
from amptui.telemetry.outbound import describe, say
from amptui.telemetry.sinks import Sink


def mirror_sinks(cfg: Config, run_dir: Path, rank: int) -> list[Sink]:
    """The sinks `cfg` asks for after the event stream. Preflight checked that their libraries are
    installed; should an import still fail (a Monitor in a loop amptui did not start), or MLflow's
    tracking server refuse the run, one line says so and training goes on."""
    if rank != 0:
        return []
    sinks: list[Sink] = []
    if cfg.log.tensorboard:
        try:
            from amptui.telemetry.tensorboard import TensorBoardScalars

            sinks.append(TensorBoardScalars(Path(run_dir)))
        except ImportError as exc:
            say(f"log.tensorboard: TensorBoard is not installed ({exc}): pip install 'amptui[tensorboard]'")
    if cfg.log.mlflow:
        try:
            from amptui.telemetry.mlflow_series import MLflowSeries

            sinks.append(MLflowSeries(Path(run_dir), cfg))
        except ImportError as exc:
            say(f"log.mlflow: MLflow is not installed ({exc}): pip install 'amptui[mlflow]'")
        except Exception as exc:  # noqa: BLE001 - the tracking server's failure is not the run's
            say(f"log.mlflow: MLflow refused the run ({describe(exc)}); the run goes on without it")
    if cfg.log.notify_url:
        from amptui.telemetry.notify import notifier_from

        notifier = notifier_from(cfg.log.notify_url, Path(run_dir).name)
        if notifier is not None:
            sinks.append(notifier)
    from amptui.telemetry import trainjob

    status = trainjob.from_env()
    if status is not None:
        sinks.append(status)
    return sinks
