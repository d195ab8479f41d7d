"""The precision autopilot's settings and rules (issue 54), in process: [amp.autopilot] is off by default
and checked like any key; rule scale_collapse fires on a collapsing float16 run's records and not on a
healthy GradScaler's calibration; `runs` shows a switched run's precision as its segments."""

from __future__ import annotations

import pytest

from amptui.core.autopilot import segments
from amptui.core.config import autopilot, values
from amptui.core.errors import ConfigError


def test_autopilot_is_off_by_default_and_its_keys_are_checked():
    assert autopilot.of(values.build_config({}).amp).mode == "off"
    cfg = values.build_config({"amp": {"autopilot": {"mode": "act", "floor_steps": 5}}})
    assert autopilot.of(cfg.amp) == autopilot.Autopilot(mode="act", floor_steps=5)
    assert autopilot.of(values.build_config({"amp": {"autopilot": {"rules": []}}}).amp).rules == ()  # off: nothing to fire is fine
    for table, said in (({"mod": "act"}, "unknown key 'amp.autopilot.mod'"),
                        ({"mode": "always"}, "amp.autopilot.mode must be one of off, advise, act"),
                        ({"floor_steps": 0}, "amp.autopilot.floor_steps must be an integer >= 1"),
                        ({"scale_floor": -1}, "amp.autopilot.scale_floor must be a number > 0"),
                        ({"rules": ["demote"]}, "amp.autopilot.rules must be a list of rule names"),
                        ({"promote_for": "H1000"}, "amp.autopilot.promote_for: unknown GPU 'H1000'"),
                        ({"promote_after": -1}, "amp.autopilot.promote_after must be an integer >= 0"),
                        ({"mode": "act", "rules": []}, "amp.autopilot.rules is empty, so mode = \"act\" has no rule")):
        with pytest.raises(ConfigError, match=said):
            values.build_config({"amp": {"autopilot": table}}, source="p.toml")


def switch_record(step: int, before: str, after: str) -> dict:
    return {"v": 1, "kind": "precision_switch", "t": 1.0, "rank": 0, "step": step, "rule": "scale_collapse",
            "from": {"short": before}, "to": {"short": after}, "why": "", "evidence": {}, "checkpoint": ""}


def test_segments_name_each_precision_and_the_step_it_began():
    assert segments([]) == ""
    assert segments([switch_record(1200, "fp16+scaler", "bf16")]) == "fp16+scaler -> bf16 at step 1200"


def test_a_switch_record_names_the_layers_it_changed_on_each_side_and_old_records_still_read():
    """precision_switch `from`/`to` hold `layers` (PRODUCT: "from and to (precision, layers)"): each module the
    switch changed with its precision on that side, {"*": short} for the whole model. A record written before
    `layers` existed (only `keys`) is read from its keys."""
    from amptui.core.autopilot import layer_precisions, switch_layers, switch_line
    from amptui.core.config.precision import Precision

    fp8 = values.build_config({"amp": {"dtype": "bfloat16", "float8": "tensorwise", "float8_skip": ["head"]}})
    after = fp8.with_overrides({"amp.float8_skip": ["head", "outlier"]})
    bf16 = Precision(True, "bfloat16", False)
    assert layer_precisions(bf16, fp8.flat(), ("outlier",)) == {"outlier": "fp8 tensorwise"}
    assert layer_precisions(bf16, after.flat(), ("outlier",)) == {"outlier": "bf16"}
    widened = values.build_config({"amp": {"dtype": "float16", "layers": {"blocks.*.proj": "fp32"}}})
    assert layer_precisions(Precision(True, "float16", True), widened.flat(), ("blocks.3.proj", "inp")) == \
        {"blocks.3.proj": "fp32", "inp": "fp16"}
    assert layer_precisions(Precision(True, "float16", True), widened.flat(), ()) == {"*": "fp16+scaler"}

    new = {**switch_record(6, "fp8", "fp8, outlier out of float8"), "rule": "float8_sqnr", "why": "low SQNR"}
    new["from"]["layers"], new["to"]["layers"] = {"outlier": "fp8 tensorwise"}, {"outlier": "bf16"}
    assert switch_line(new) == ("autopilot: switched fp8 -> fp8, outlier out of float8 at step 6: low SQNR "
                                "(rule float8_sqnr) [outlier fp8 tensorwise -> bf16]")
    old = switch_record(1, "fp16+scaler", "fp16+scaler + 1 fp32 layer")  # keys only: widen_overflow's
    old["from"]["keys"], old["to"]["keys"] = {"amp.layers": {}}, {"amp.layers": {"blocks.3.mlp.proj": "fp32"}}
    assert switch_layers(old) == ({"blocks.3.mlp.proj": "?"}, {"blocks.3.mlp.proj": "fp32"})
    collapse = switch_record(35, "fp16+scaler", "bf16")
    assert switch_layers(collapse) == ({"*": "fp16+scaler"}, {"*": "bf16"}) and "[" not in switch_line(collapse)


def test_under_torchrun_a_scripts_advice_comes_from_rank_0_only():
    """A script's hooks and the Monitor run in every rank: only rank 0's get the advisor (its rules, its line), as
    amptui's trainer has rank 0 decide; every rank printing the same advice was one line a rank."""
    import torch

    from amptui.core.config.precision import Precision
    from amptui.telemetry.autopilot import advisors

    cfg = values.build_config({"amp": {"dtype": "float16", "autopilot": {"mode": "act"}}})
    precision = Precision.from_config(cfg, "cpu")
    said = lambda code, message: None  # noqa: E731
    assert len(advisors(cfg.amp, precision, torch.device("cpu"), said, rank=0)) == 1
    assert advisors(cfg.amp, precision, torch.device("cpu"), said, rank=1) == []
