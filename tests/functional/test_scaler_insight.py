"""Why the loss scale moves: overflow attribution, alarms, an lr schedule that skipped steps
do not advance, and achieved FLOP/s in the step records."""


from amptui.telemetry.alarms import ScaleAlarms


def backoff(step, old, new, names=("fc.weight",)):
    return {"step": step, "event": "backoff", "old_scale": old, "new_scale": new, "overflow": list(names)}


def growth(step, old, new):
    return {"step": step, "event": "growth", "old_scale": old, "new_scale": new}


def codes(alarms):
    return [a.code for a in alarms]


def test_alarm_backoff_streak_after_the_scale_settled():
    alarms = ScaleAlarms(growth_interval=4, dtype="float16", bf16_available=False)
    alarms.observe([growth(10, 8.0, 16.0)], 10, 16.0, 1.0)
    events = [backoff(11 + i, 2.0 ** (10 - i), 2.0 ** (9 - i), ["layer3.1.conv2.weight"]) for i in range(5)]
    got = alarms.observe(events, 15, 32.0, 1.0)
    assert codes(got) == ["backoff_streak"] and "layer3.1.conv2.weight" in got[0].message


def test_calibration_from_a_high_init_scale_is_not_an_alarm():
    alarms = ScaleAlarms(growth_interval=2000, dtype="float16", bf16_available=False)
    events = [backoff(i + 1, 2.0 ** (32 - i), 2.0 ** (31 - i)) for i in range(10)]
    assert alarms.observe(events, 10, 2.0 ** 22, 1.0) == []


def test_the_monitor_and_the_trainer_take_the_allowance_from_their_scaler(runs_dir):
    import torch
    from support.numerics import FP16, trainer_for

    import amptui

    model = torch.nn.Linear(2, 1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 40)
    with amptui.Monitor("high", scaler=scaler, model=model, run_dir=runs_dir / "m") as mon:
        assert mon.recorder.alarms is None or mon.recorder.alarms.calibration_streak == 40
        loss = model(torch.ones(1, 2)).sum()
        scaler.scale(loss).backward()
        scaler.step(torch.optim.SGD(model.parameters(), lr=0.1))
        scaler.update()
        mon.step(loss)
        assert mon.recorder.alarms.calibration_streak == 40
    trainer = trainer_for(runs_dir, **FP16, **{"amp.init_scale": 2.0 ** 36, "amp.backoff_factor": 0.25})
    try:
        assert trainer.recorder.alarms.calibration_streak == 18
    finally:
        trainer.finish("completed")
