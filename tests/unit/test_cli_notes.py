"""Notes and advice as people read them: on a terminal wrapped at word boundaries within its width
from the first line on (one line each in a pipe); every figure in core.fmt's one form: FLOP rates
in one unit per sentence, the loss scale as a power of two, losses with four decimals."""

from __future__ import annotations

from amptui.core.numerics import describe_nonfinite
from amptui.machine import dtype_speed, hardware
from amptui.telemetry.alarms import ScaleAlarms


def test_flop_rates_read_in_one_unit_per_sentence():
    said = dtype_speed.slow_reason("bfloat16", {"bfloat16": 0.001, "float32": 0.085}, set())
    assert said == "measured 1 GFLOP/s, float32 85"
    gpu = {"index": 0, "name": "Test GPU", "bf16": True, "compute_capability": "8.0"}
    _, _, why = hardware.recommend({"gpus": [gpu]}, {"cuda:0": {"bfloat16": 312.0, "float16": 312.0,
                                                                 "float32": 19.5}})
    assert "(measured matmuls: bfloat16 312, float16 312, float32 19.5 TFLOP/s)" in why


def test_the_loss_scale_reads_as_a_power_of_two_everywhere():
    found = describe_nonfinite("head", "backward", "float16", 65504.0, None, scale=2.0 ** 19)
    assert "at loss scale 2^19" in found["text"]
    alarms = ScaleAlarms(growth_interval=2000, dtype="float16", bf16_available=False, init_scale=2.0 ** 19)
    assert "from init_scale 2^19 " in alarms._calibration_words(19)
