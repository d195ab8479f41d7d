"""A speed-up's verdict does not depend on the order of the runs, a busy machine is said and never called
a difference, and a speed-up too short or too noisy to resolve is not printed as a figure (issue 43).
Event files in the real format, read by the CLI in this process."""

from __future__ import annotations


def test_doctor_says_its_rates_are_of_large_matmuls():
    from amptui.machine import hardware

    _, _, reason = hardware.recommend({"cpu": {"flags": {"amx_bf16": True}}},
                                      {"cpu": {"bfloat16": 1.4, "float16": 0.01, "float32": 0.1}})
    assert "large square matmuls" in reason and "amptui ab" in reason


def test_a_40_percent_band_is_never_same_speed():
    """Issue 51 item 2: "same speed (0.96x ±0.46)" where a careful timing measured 1.54x. Inside a band
    wider than SAME_SPEED_BAND it is "too noisy to tell" and says what to do; a narrow one may be "same"."""
    from amptui.core import figures

    for speedup in (0.75, 0.96, 1.0, 1.3):
        call = figures.speed_call(speedup, 0.40)
        assert call.same is not True and call.unresolved.startswith("too noisy to tell")
        assert "rerun when the machine is quieter" in call.unresolved
    assert figures.speed_call(1.03, 0.05).same is True
    assert figures.speed_call(2.0, 0.40).same is False  # far outside its noise: a figure
    # a control (the baseline run again) that landed 2.88x away outranks a narrow window spread
    call = figures.speed_call(2.88, 0.03, control=2.88)
    assert call.same is None and "its control, the baseline run again, measured 2.88x" in call.unresolved


def test_plan_verify_states_no_figure_its_noise_cannot_tell():
    """`plan --save --verify`'s line reads the compare row's verdict: too noisy is said, not "1.30x"."""
    from amptui.cli import planverify

    result = {"predicted_speedup": 1.5, "predicted_for": "H100", "device": "cuda", "measured_speedup": 1.3,
              "same_speed": None, "speed_unresolved": "too noisy to tell (1.30x, inside its noise: step times vary "
              "±25%): rerun when the machine is quieter, or with more steps", "loss_step": None,
              "loss": {"bf16": None, "plan": None}, "runs": ["a", "b"]}
    said = planverify.words(result)
    assert "measured here (cuda): too noisy to tell (1.30x inside its noise)" in said and "cuda) 1.30x" not in said
    result.update(speed_unresolved=None, same_speed=False)
    assert "measured here (cuda) 1.30x" in planverify.words(result)
