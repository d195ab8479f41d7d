"""Why the loss scale moves: overflow attribution, alarms, an lr schedule that skipped steps
do not advance, and achieved FLOP/s in the step records."""

import pytest

from amptui.telemetry.alarms import CALIBRATION_STREAK, ScaleAlarms, calibration_streak


def backoff(step, old, new, names=("fc.weight",)):
    return {"step": step, "event": "backoff", "old_scale": old, "new_scale": new, "overflow": list(names)}


def growth(step, old, new):
    return {"step": step, "event": "growth", "old_scale": old, "new_scale": new}


def codes(alarms):
    return [a.code for a in alarms]


def test_alarm_scale_below_one_once():
    alarms = ScaleAlarms(growth_interval=2000, dtype="float16", bf16_available=False)
    assert codes(alarms.observe([backoff(1, 2.0, 1.0)], 1, 1.0, 0.5)) == []
    got = alarms.observe([backoff(2, 1.0, 0.5)], 2, 0.5, 0.5)
    assert codes(got) == ["scale_below_one"] and "scaling cannot fix" in got[0].message
    assert alarms.observe([backoff(3, 0.5, 0.25)], 3, 0.25, 0.5) == []  # said once


def test_backoffs_with_trained_steps_between_them_are_no_streak():
    """Backoffs every 100 steps after the scale grew: the scale falls with no growth, but no steps
    were skipped 'in a row' (scale_stuck speaks for that case), so no backoff_streak."""
    alarms = ScaleAlarms(growth_interval=2000, dtype="float16", bf16_available=False)
    said = alarms.observe([growth(5, 2.0**10, 2.0**11)], 5, 2.0**11, 1.0)
    for n, step in enumerate((100, 200, 300, 400, 500, 600), start=1):
        said += alarms.observe([backoff(step, 2.0 ** (12 - n), 2.0 ** (11 - n))], step, 2.0 ** (11 - n), 1.0)
    assert "backoff_streak" not in codes(said)
    # step 600 and the four right after it are five in a row
    for n, step in enumerate(range(601, 605), start=7):
        said += alarms.observe([backoff(step, 2.0 ** (12 - n), 2.0 ** (11 - n))], step, 2.0 ** (11 - n), 1.0)
    streak = [a.message for a in said if a.code == "backoff_streak"]
    assert len(streak) == 1 and streak[0].startswith("5 optimizer steps in a row skipped (up to step 604)"), streak


def test_calibration_allowance_follows_init_scale_and_backoff_factor():
    assert calibration_streak(2.0 ** 16) == calibration_streak(None) == CALIBRATION_STREAK == 16
    assert calibration_streak(2.0 ** 32) == 32 and calibration_streak(2.0 ** 40) == 40
    assert calibration_streak(3 * 2.0 ** 30) == 32                  # the backoffs that reach 1 or below
    assert calibration_streak(2.0 ** 8) == 16                       # never fewer than 16
    assert calibration_streak(2.0 ** 48, backoff_factor=0.25) == 24  # a quarter per backoff
    for odd in ((float("inf"), 0.5), (2.0 ** 32, 1.0), (2.0 ** 32, 0.0), (2.0 ** 32, None), (0.0, 0.5)):
        assert calibration_streak(*odd) == 16, odd


def calibrating(alarms, backoffs, start=2.0 ** 32, first=None):
    said = []
    for i in range(backoffs):
        event = backoff(i + 1, start / 2 ** i, start / 2 ** (i + 1))
        if first:
            event["first_nonfinite"] = first
        said += alarms.observe([event], i + 1, start / 2 ** (i + 1), 1.0)
    return said


def test_a_very_high_init_scale_calibrates_for_longer_and_the_alarm_says_how_long():
    first = {"module": "blocks.3.mlp.proj", "where": "backward", "value": None,
             "text": "blocks.3.mlp.proj (backward, float16 max exceeded at loss scale 2^32)"}
    alarms = ScaleAlarms(growth_interval=2000, dtype="float16", bf16_available=False, init_scale=2.0 ** 32)
    assert alarms.calibration_streak == 32
    assert calibrating(alarms, 31, first=first) == []  # the old fixed 16 called this a streak
    got = alarms.observe([{**backoff(32, 2.0, 1.0), "first_nonfinite": first}], 32, 1.0, 1.0)
    assert codes(got) == ["backoff_streak"]
    assert "32 optimizer steps in a row skipped" in got[0].message
    assert "calibration from init_scale 2^32 is allowed 32 backoffs in a row" in got[0].message
    assert "first non-finite: blocks.3.mlp.proj (backward, float16 max exceeded at loss scale 2^32)" in got[0].message


def test_the_default_init_scale_keeps_the_floor_of_16():
    alarms = ScaleAlarms(growth_interval=2000, dtype="float16", bf16_available=False, init_scale=2.0 ** 16)
    assert calibrating(alarms, 15, start=2.0 ** 16) == []
    got = alarms.observe([backoff(16, 2.0, 1.0)], 16, 1.0, 1.0)
    assert codes(got) == ["backoff_streak"]
    assert "calibration from init_scale 2^16 is allowed 16 backoffs in a row" in got[0].message
    unknown = ScaleAlarms(growth_interval=2000, dtype="float16", bf16_available=False)  # init_scale not known
    said = calibrating(unknown, 16)
    assert codes(said) == ["backoff_streak"] and "calibration is allowed 16 backoffs in a row" in said[0].message


def test_alarm_stuck_scale_and_bfloat16_suggestion():
    alarms = ScaleAlarms(growth_interval=8, dtype="float16", bf16_available=True)
    alarms.observe([growth(5, 1.0, 2.0)], 5, 2.0, 1.0)
    got = []
    for i in range(10):
        got += alarms.observe([backoff(10 + 20 * i, 2.0, 1.0), growth(20 + 20 * i, 1.0, 2.0)], 20 + 20 * i, 2.0, 1.0)
    assert "use_bfloat16" in codes(got)
    stuck = ScaleAlarms(growth_interval=8, dtype="float16", bf16_available=False)
    stuck.observe([growth(1, 1.0, 2.0), backoff(2, 2.0, 1.0)], 2, 1.0, 1.0)
    assert codes(stuck.observe([], 150, 1.0, 1.0)) == ["scale_stuck"]


def test_alarm_non_finite_loss():
    alarms = ScaleAlarms(growth_interval=8, dtype="bfloat16", bf16_available=True)
    assert codes(alarms.observe([], 3, None, float("nan"))) == ["loss_not_finite"]
    assert codes(alarms.observe([], 4, None, None)) == []


FORWARD_OVERFLOW = {"module": "blocks.3.mlp.proj", "where": "forward", "value": 3.5e5,
                    "text": "blocks.3.mlp.proj (forward, float16 max exceeded: 3.5e5)"}


@pytest.mark.parametrize("own_loop, fix", [
    (False, "use amp.dtype=bfloat16 (slow on this device, as `amptui doctor` measures it), or scale that layer's "
            "init/output"),
    (True, "autocast to torch.bfloat16 in your loop (torch.autocast(..., dtype=torch.bfloat16), no GradScaler "
           "needed) (slow on this device, as `amptui doctor` measures it), or scale that layer's init/output")])
def test_a_non_finite_loss_after_a_forward_float16_overflow_names_it_as_the_cause(own_loop, fix):
    """The step's range sample (or replay) found a forward float16 overflow: that is why the loss is
    inf/NaN, so the warning says so and gives the range advice first, the data/lr advice second, in
    preset keys for amptui's trainer and in code for the user's own loop; bfloat16, slow on this
    device, is said to be."""
    alarms = ScaleAlarms(growth_interval=8, dtype="float16", bf16_available=False, own_loop=own_loop)
    said = alarms.observe([], 4, 256.0, float("nan"), loss_at="at step 3", loss_source=FORWARD_OVERFLOW)
    assert codes(said) == ["loss_not_finite"]
    text = said[0].message
    assert text.startswith("the loss is not finite (NaN or inf) at step 3 because blocks.3.mlp.proj's forward output "
                           "exceeded float16's range (first non-finite: blocks.3.mlp.proj (forward, float16 max "
                           f"exceeded: 3.5e5)), which no loss scale can fix: {fix}. "), text
    data = "lower your optimizer's learning rate" if own_loop else "lower optim.lr"
    assert text.index(fix) < text.index("check the data for NaN/inf") < text.index(data)
    assert "try amp.autocast=false" not in text and "without torch.autocast" not in text


@pytest.mark.parametrize("dtype, where", [("float16", "backward"), ("bfloat16", "forward")])
def test_a_non_finite_loss_keeps_the_general_advice_without_a_forward_float16_overflow(dtype, where):
    """A gradient overflow, or a bfloat16 forward (its range is float32's: bfloat16 is no fix), does
    not explain the loss: the data/lr advice stays first."""
    alarms = ScaleAlarms(growth_interval=8, dtype=dtype, bf16_available=True)
    said = alarms.observe([], 4, None, float("inf"), loss_source={**FORWARD_OVERFLOW, "where": where})
    assert said[0].message.startswith("the loss is not finite (NaN or inf) at step 4: this is not an overflow the "
                                      "GradScaler can fix. Check the data for NaN/inf"), said[0].message


def test_the_scale_falling_below_one_after_a_forward_overflow_blames_it_not_the_inputs():
    alarms = ScaleAlarms(growth_interval=2000, dtype="float16", bf16_available=False)
    alarms.observe([{**backoff(1, 2.0, 1.0), "first_nonfinite": FORWARD_OVERFLOW}], 1, 1.0, None)
    said = alarms.observe([backoff(2, 1.0, 0.5)], 2, 0.5, None)
    assert codes(said) == ["scale_below_one"]
    assert said[0].message == (
        "the loss scale fell below 1 (0.5) at step 2: the gradients hold inf/NaN even unscaled, because the forward "
        "pass already exceeds float16's range (first non-finite: blocks.3.mlp.proj (forward, float16 max exceeded: "
        "3.5e5)), which no loss scale can fix: use amp.dtype=bfloat16 (slow on this device, as `amptui doctor` "
        "measures it), or scale that layer's init/output")


def test_the_loss_is_blamed_on_the_first_non_finite_module_of_its_own_step():
    """The Recorder's choice: the module found on the step whose own loss went non-finite, else the
    window's earliest finding; nothing when the loss is finite."""
    from types import SimpleNamespace

    from amptui.telemetry.tally import loss_source

    found = {6: {"module": "a"}, 8: {"module": "b"}}
    kept_apart = SimpleNamespace(loss=float("nan"), step_losses={0: 1.0, 1: 1.0, 2: 1.0, 3: float("nan"), 4: 1.0})
    assert loss_source(kept_apart, 5, found) == {"module": "b"}  # step 8's loss: step 8's module
    summed = SimpleNamespace(loss=float("inf"), step_losses={})
    assert loss_source(summed, 5, found) == {"module": "a"}
    assert loss_source(SimpleNamespace(loss=2.0, step_losses={}), 5, found) is None
    assert loss_source(summed, 5, {}) is None
