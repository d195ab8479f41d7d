"""A speed-up's verdict does not depend on the order of the runs, a busy machine is said and never called
a difference, and a speed-up too short or too noisy to resolve is not printed as a figure (issue 43).
Event files in the real format, read by the CLI in this process."""

from __future__ import annotations

import json

from support.records import record, write_records

from amptui.core.stream.records import End, Start, Step


def write_run(root, run_id, step_ms: list[float], others_cpu: float | None = None, every: int = 10,
              precision: str = "bf16"):
    """A completed run whose step records' windows took `step_ms` each (ms per step), under `others_cpu`."""
    run = root / run_id
    run.mkdir(parents=True)
    (run / "config.toml").write_text('[run]\nname = "quickstart"\n')
    steps, t = every * len(step_ms), 1_000.0
    recs = [record(Start(run_id=run_id, preset="quickstart", config={}, precision=precision, world_size=1,
                         device={"type": "cpu", "name": "Test CPU", "count": 1}, torch="2.x", host="test", pid=1,
                         total_steps=steps, steps_per_epoch=steps, epochs=1), t)]
    for i, ms in enumerate(step_ms):
        t += every * ms / 1000
        recs.append(record(Step(step=every * (i + 1), epoch=1, loss=1.0, lr=None, scale=None, skipped=0,
                                skipped_total=0, samples_per_s=64 * 1000 / ms, step_time_ms=ms, data_wait_ms=0.0,
                                mem={"rss": 1e9}, load=1.0, others_cpu=others_cpu), t))
    recs.append(record(End(status="completed", total_time_s=t - 1_000.0, steps=steps, final_loss=1.0), t))
    write_records(run / "events.jsonl", recs)


def speedups(cli, *ids):
    return [row for row in json.loads(cli("compare", *ids, "--format", "json", check=True).stdout)]


def test_two_identical_runs_on_a_busy_machine_say_the_same_in_both_orders(cli, runs_dir):
    """Issue 43 finding 4: A B said "0.39x ±0.56", B A "same speed"; now both say the same."""
    noisy_a = [10, 30, 12, 45, 11, 9, 40, 10, 25, 12]
    noisy_b = [30, 11, 44, 10, 28, 12, 9, 39, 10, 33]
    write_run(runs_dir, "20261127-100000-qs-a", noisy_a)
    write_run(runs_dir, "20261127-100001-qs-b", noisy_b)
    ab = speedups(cli, "20261127-100000-qs-a", "20261127-100001-qs-b")[1]
    ba = speedups(cli, "20261127-100001-qs-b", "20261127-100000-qs-a")[1]
    assert (ab["same_speed"], ab["speed_unresolved"]) == (ba["same_speed"], ba["speed_unresolved"])
    table = cli("compare", "20261127-100000-qs-a", "20261127-100001-qs-b", check=True).stdout
    assert "0.39x" not in table and ("can't tell" in table or "too noisy to tell" in table)


def test_identical_quiet_runs_are_the_same_speed_either_way(cli, runs_dir):
    steady = [10.0, 10.1, 9.9, 10.0, 10.2, 9.8, 10.0, 10.1, 9.9, 10.0]
    write_run(runs_dir, "20261127-100000-qs-a", steady)
    write_run(runs_dir, "20261127-100001-qs-b", [ms * 1.01 for ms in steady])
    for ids in (("20261127-100000-qs-a", "20261127-100001-qs-b"), ("20261127-100001-qs-b", "20261127-100000-qs-a")):
        row = speedups(cli, *ids)[1]
        assert row["same_speed"] is True and row["speed_unresolved"] is None
        assert "same speed" in cli("compare", *ids, check=True).stdout


def test_runs_under_different_load_are_said_and_not_called_a_difference(cli, runs_dir):
    steady = [10.0, 10.1, 9.9, 10.0, 10.2, 9.8, 10.0, 10.1, 9.9, 10.0]
    write_run(runs_dir, "20261127-100000-qs-quiet", steady, others_cpu=0.02)
    write_run(runs_dir, "20261127-100001-qs-busy", [ms * 2 for ms in steady], others_cpu=0.7)
    row = speedups(cli, "20261127-100000-qs-quiet", "20261127-100001-qs-busy")[1]
    assert row["same_speed"] is None and "different load" in row["speed_unresolved"]
    table = cli("compare", "20261127-100000-qs-quiet", "20261127-100001-qs-busy", check=True).stdout
    assert "0.50x" not in table
    assert "ran under different load (other processes used 2% of the CPUs during 20261127-100000-qs-quiet, 70%" in table


def test_a_run_too_short_to_time_prints_no_speed_up(cli, runs_dir):
    """24-step A/Bs printed 0.78x, 1.59x and 22.3x on three tries: one timed window is not a figure."""
    write_run(runs_dir, "20261127-100000-qs-a", [10.0, 10.0], every=12)
    write_run(runs_dir, "20261127-100001-qs-b", [5.0, 5.0], every=12)
    row = speedups(cli, "20261127-100000-qs-a", "20261127-100001-qs-b")[1]
    assert "too short to tell" in row["speed_unresolved"]
    assert "2.00x" not in cli("compare", "20261127-100000-qs-a", "20261127-100001-qs-b", check=True).stdout


def write_precision_run(root, run_id, precision: dict, step_ms: float, step_flops: float, peak_tflops: float):
    run = root / run_id
    run.mkdir(parents=True)
    (run / "config.toml").write_text('[run]\nname = "quickstart"\n')
    t, steps = 1_000.0, 100
    recs = [record(Start(run_id=run_id, preset="quickstart", config={}, precision=precision, world_size=1,
                         device={"type": "cpu", "name": "Test CPU", "count": 1}, torch="2.x", host="test", pid=1,
                         total_steps=steps, steps_per_epoch=steps, epochs=1, step_flops=step_flops,
                         peak_tflops=peak_tflops), t)]
    for i in range(10):
        ms = step_ms * (1 + 0.005 * (i % 3))
        t += 10 * ms / 1000
        recs.append(record(Step(step=10 * (i + 1), epoch=1, loss=1.0, lr=None, scale=None, skipped=0, skipped_total=0,
                                samples_per_s=64 * 1000 / ms, step_time_ms=ms, data_wait_ms=0.0, mem={"rss": 1e9}), t))
    recs.append(record(End(status="completed", total_time_s=t - 1_000.0, steps=steps, final_loss=1.0), t))
    write_records(run / "events.jsonl", recs)


FP32 = {"autocast": False, "dtype": "float32", "grad_scaler": False, "short": "fp32", "words": "float32"}
BF16 = {"autocast": True, "dtype": "bfloat16", "grad_scaler": False, "short": "bf16", "words": "autocast bfloat16"}


def test_an_ab_of_a_small_model_says_why_bf16_is_not_faster(cli, runs_dir):
    """Issue 43 finding 3: doctor measured bfloat16 14x float32 on large matmuls, the A/B said "same speed",
    nothing said why. 2 MFLOP a step at 0.1 TFLOP/s is 0.02 ms of a 2 ms step: nothing for bf16 to speed up."""
    write_precision_run(runs_dir, "20261127-100000-qs-fp32", FP32, 2.0, step_flops=2e6, peak_tflops=0.1)
    write_precision_run(runs_dir, "20261127-100001-qs-bf16", BF16, 1.98, step_flops=2e6, peak_tflops=1.4)
    out = cli("compare", "20261127-100000-qs-fp32", "20261127-100001-qs-bf16", check=True).stdout
    why = [line for line in out.splitlines() if line.startswith("why bf16")]
    assert len(why) == 1, out
    assert "matmuls are 1% of the 2.01 ms fp32 step" in why[0] and "too small for AMP to help" in why[0], why[0]


def test_an_ab_that_helped_needs_no_why(cli, runs_dir):
    write_precision_run(runs_dir, "20261127-100000-qs-fp32", FP32, 2.0, step_flops=2e8, peak_tflops=0.1)
    write_precision_run(runs_dir, "20261127-100001-qs-bf16", BF16, 0.5, step_flops=2e8, peak_tflops=1.4)
    out = cli("compare", "20261127-100000-qs-fp32", "20261127-100001-qs-bf16", check=True).stdout
    assert "why bf16" not in out


def test_two_noisy_runs_read_too_noisy_in_the_table_not_same_speed(cli, runs_dir):
    noisy = [10, 14, 8, 12, 16, 9, 11, 15, 8, 13]  # about +-25% from window to window
    write_run(runs_dir, "20261127-100000-qs-a", noisy)
    write_run(runs_dir, "20261127-100001-qs-b", [ms * 0.96 for ms in reversed(noisy)])
    row = speedups(cli, "20261127-100000-qs-a", "20261127-100001-qs-b")[1]
    assert row["same_speed"] is None and row["speed_unresolved"].startswith("too noisy to tell")
    table = cli("compare", "20261127-100000-qs-a", "20261127-100001-qs-b", check=True, env={"COLUMNS": "200"}).stdout
    assert "same speed" not in table.split("\n\n")[0]


def write_memory_run(root, run_id, peak: float, precision: str = "fp32"):
    run = root / run_id
    run.mkdir(parents=True)
    (run / "config.toml").write_text('[run]\nname = "quickstart"\n')
    recs = [record(Start(run_id=run_id, preset="quickstart", config={}, precision=precision, world_size=1,
                         device={"type": "cpu", "name": "Test CPU", "count": 1}, torch="2.x", host="test", pid=1,
                         total_steps=20, steps_per_epoch=20, epochs=1), 1000.0)]
    recs += [record(Step(step=10 * (i + 1), epoch=1, loss=1.0, lr=None, scale=None, skipped=0, skipped_total=0,
                         samples_per_s=6400.0, step_time_ms=10.0, data_wait_ms=0.0,
                         mem={"rss": peak, "peak_rss": peak}), 1000.0 + i) for i in range(2)]
    recs.append(record(End(status="completed", total_time_s=2.0, steps=20, final_loss=1.0, peak_mem=peak), 1002.0))
    write_records(run / "events.jsonl", recs)


def test_identical_runs_peak_memory_spread_is_no_saving(cli, runs_dir):
    """Issue 51 item 4: two identical fp32 runs showed "mem saving -3.3%" as if it were real."""
    write_memory_run(runs_dir, "20261127-100000-qs-fp32", 1.00e9)
    write_memory_run(runs_dir, "20261127-100001-qs-fp32", 1.033e9)
    write_memory_run(runs_dir, "20261127-100002-qs-bf16", 0.70e9, precision="bf16")
    ids = ("20261127-100000-qs-fp32", "20261127-100001-qs-fp32", "20261127-100002-qs-bf16")
    rows = speedups(cli, *ids)
    assert rows[1]["memory_same"] is True and rows[2]["memory_same"] is False
    table = cli("compare", *ids, check=True, env={"COLUMNS": "200"}).stdout
    assert "-3.3%" not in table and "+30.0%" in table


def test_the_compare_screen_says_why_too_noisy_and_what_to_do(runs_dir):
    """The dashboard decides by the same verdict and says under its table what `amptui compare` says."""
    from amptui.core.comparison import runsummary
    from amptui.dashboard.screens.compare.screen import numerics_notes

    noisy = [10, 14, 8, 12, 16, 9, 11, 15, 8, 13]
    write_run(runs_dir, "20261127-100000-qs-a", noisy)
    write_run(runs_dir, "20261127-100001-qs-b", [ms * 0.96 for ms in reversed(noisy)])
    summaries = [runsummary.summarize(runs_dir / r) for r in ("20261127-100000-qs-a", "20261127-100001-qs-b")]
    said = numerics_notes(summaries).plain
    assert "speed-up too noisy to tell (20261127-100001-qs-b: " in said and "rerun when the machine is quieter" in said


def test_a_control_is_the_first_runs_setup_again_whatever_its_seed_or_how_its_precision_was_spelled(tmp_path):
    """An `ab` fp32 variant (amp.grad_scaler = false) and `amptui run` of the same preset with another
    seed (grad_scaler "auto") are one setup: the second is the first's control; another batch size is not."""
    from amptui.core.comparison import comparestep, runsummary

    def run(name: str, config: str, precision: str = "fp32"):
        write_run(tmp_path, name, [10.0] * 4, precision=precision)
        (tmp_path / name / "config.toml").write_text('[run]\nname = "quickstart"\n' + config)
        return runsummary.summarize(tmp_path / name)

    base = run("a", "seed = 0\n[amp]\nautocast = false\ngrad_scaler = false\n")
    bf16 = run("b", "seed = 0\n[amp]\nautocast = true\ndtype = \"bfloat16\"\n", "bf16")
    again = run("c", "seed = 7\n[amp]\nautocast = false\ngrad_scaler = \"auto\"\n")
    bigger = run("d", "seed = 7\n[data]\nbatch_size = 128\n")
    assert comparestep.control_of([base, bf16, again]) is again
    assert comparestep.control_of([base, bf16, bigger]) is None
