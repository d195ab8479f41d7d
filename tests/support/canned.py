"""A run folder as the trainer writes it, with known timings and memory (`canned_run`), for the tests of A/B
tables, compare and the runs list."""


from amptui.core.stream.records import End, Epoch, Start, Step
from support.records import record, write_records


def canned_run(root, name, ms_per_step, batch, peak, acc, steps=100, every=10, precision="fp32",
               preset="canned", config='[run]\nname = "canned"\n'):
    """An event file as the trainer writes it, with known timings and memory; the run's session
    lasts 3 s more than its steps."""
    run = root / name
    run.mkdir(parents=True)
    (run / "config.toml").write_text(config)
    t0 = 1_800_000_000.0
    recs = [record(Start(run_id=name, preset=preset, config={}, precision=precision, world_size=1,
                         device={"type": "cpu", "name": "test", "count": 1}, torch="2.x", host="test", pid=1,
                         total_steps=steps), t0)]
    for step in range(every, steps + 1, every):
        first = step == every  # the warm-up window is slow and must not count
        ms = ms_per_step * (5 if first else 1)
        recs.append(record(Step(step=step, epoch=1, loss=1.0 / step, lr=None, scale=None, skipped=0, skipped_total=1,
                                samples_per_s=batch / (ms / 1000), step_time_ms=ms, data_wait_ms=None,
                                mem={"rss": peak, "peak_rss": peak}), t0 + step * ms_per_step / 1000))
    recs.append(record(Epoch(epoch=1, train_loss=0.5, val_acc=acc, epoch_time_s=steps * ms_per_step / 1000),
                       t0 + steps * ms_per_step / 1000))
    recs.append(record(End(status="completed", total_time_s=steps * ms_per_step / 1000 + 5.0, steps=steps,
                           final_loss=0.01, val_acc=acc, peak_mem=peak), t0 + steps * ms_per_step / 1000 + 3.0))
    write_records(run / "events.jsonl", recs)
    return run
