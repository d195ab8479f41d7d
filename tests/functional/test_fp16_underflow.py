"""The `fp16_underflow` warning (issue 41 item 4): a float16 loop without a GradScaler is warned when its
float16 backward flushes to zero gradient values that float32 keeps, counted on a sampled step against the
same step's backward with the loss scaled (telemetry/scripthooks/underflow.py). Exact zeros that float32
gives too (a zero-initialised norm layer) are not underflow; a float32 loop is never checked. Tiny models."""

from __future__ import annotations

import pytest
from support.scripthooks import by_kind, record_script, warnings_by_code


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_a_zero_initialised_norm_layer_is_not_warned_as_float16_underflow(runs_dir, dtype):
    _, recs, error = record_script(runs_dir, "zero_norm.py", dtype, log_every=2)
    assert error is None and recs[-1]["status"] == "completed" and recs[-1]["steps"] == 6
    assert "fp16_underflow" not in warnings_by_code(recs), warnings_by_code(recs)


def test_a_real_float16_underflow_is_still_warned_with_what_float32_keeps(runs_dir):
    _, recs, error = record_script(runs_dir, "mistakes.py", "fp16-no-scaler", log_every=2)
    assert error is None
    said = [r for r in by_kind(recs, "warning") if r.get("code") == "fp16_underflow"]
    assert len(said) == 1
    message = said[0]["message"]
    assert "at step 2 the float16 backward flushed to zero 100.0% of the gradient values float32 keeps" in message
    assert "GradScaler" in message
