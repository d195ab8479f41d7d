"""`log.tensorboard = true` for amptui's trainer: the TensorBoard sink lives in
telemetry/tensorboard.py, shared with the script hooks and the Monitor."""

from __future__ import annotations

from amptui.telemetry.tensorboard import EPOCH_SCALARS, STEP_SCALARS, TensorBoardScalars  # noqa: F401
