"""log.tensorboard is a mirror like the others: written on its own thread, and a folder that
cannot be written is one line while training goes on (before, the run failed at set-up)."""

from __future__ import annotations

import pytest

from amptui.core.config import values as config
from amptui.core.stream.records import Step

pytest.importorskip("tensorboard")


def test_a_tensorboard_folder_that_cannot_be_made_is_one_line_and_steps_go_on(tmp_path, capsys):
    from amptui.telemetry.mirrors import mirror_sinks

    run_dir = tmp_path / "run-1"
    run_dir.mkdir()
    (run_dir / "tensorboard").write_text("a file where the folder would go\n")
    [sink] = mirror_sinks(config.build_config({}, {"log.tensorboard": True}), run_dir, rank=0)
    for step in (2, 4, 6):
        sink.step(Step(step=step, epoch=1, loss=1.0, lr=0.1, scale=None, skipped=0, skipped_total=0,
                       samples_per_s=None, step_time_ms=1.0, data_wait_ms=None, mem={"rss": 2**20}))
    sink.close()
    err = capsys.readouterr().err
    assert err.count("log.tensorboard") == 1 and "training goes on" in err


def test_the_scalars_are_all_written_by_close(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from amptui.telemetry.mirrors import mirror_sinks

    [sink] = mirror_sinks(config.build_config({}, {"log.tensorboard": True}), tmp_path, rank=0)
    for step in range(1, 101):
        sink.step(Step(step=step, epoch=1, loss=1.0 / step, lr=0.1, scale=None, skipped=0, skipped_total=0,
                       samples_per_s=None, step_time_ms=1.0, data_wait_ms=None, mem={}))
    sink.close()
    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    assert [e.step for e in acc.Scalars("train/loss")] == list(range(1, 101))
