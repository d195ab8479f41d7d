"""`compare` (every format) and the compare screen set runs side by side at one step: each run's
steps and status, its loss at the last step every run reached (the final loss beside it, labelled,
where runs stopped at different steps), a run stopped early marked; and a speed-up carries the
step-time noise, so two identical runs read "same speed". Event files in the real format, read by
the CLI in this process."""

from __future__ import annotations

import csv
import io
import json

from support.variants import BF16, FP32, two_variants, write_run


def test_runs_stopped_at_different_steps_are_compared_at_the_common_step(cli, runs_dir):
    two_variants(runs_dir)
    table = cli("compare", FP32, BF16, check=True).stdout
    header, first, second = table.splitlines()[:3]
    assert "loss @ step 10" in header and "steps" in header and "status" in header and "final loss" in header
    assert first.count("2.2560") == 1 and second.count("2.2560") == 2  # at step 10 both 2.2560; fp32's final 2.0594
    assert "2.0594" in first and "20/20" in first and "completed" in first
    assert "10/20" in second and "stopped early" in second
    assert "the loss column compares them at step 10" in table and f"{BF16} stopped at step 10 of 20" in table

    base, variant = json.loads(cli("compare", FP32, BF16, "--format", "json", check=True).stdout)
    assert base["final_loss"] == 2.0594 and base["loss_at_common"] == 2.256 == variant["loss_at_common"]
    assert base["common_step"] == variant["common_step"] == 10 and base["steps"] == 20
    assert variant["stopped_early"] is True and base["stopped_early"] is False and variant["total_steps"] == 20
    markdown = cli("compare", FP32, BF16, "--format", "markdown", check=True).stdout
    assert "| loss @ step 10 |" in markdown and "stopped early" in markdown
    rows = list(csv.DictReader(io.StringIO(cli("compare", FP32, BF16, "--format", "csv", check=True).stdout)))
    assert rows[0]["loss_at_common"] == rows[1]["loss_at_common"] == "2.256"


def test_runs_of_equal_length_show_one_loss_column(cli, runs_dir):
    write_run(runs_dir, FP32, losses=[2.5, 2.2], step_ms=[20.0], total=10)
    write_run(runs_dir, BF16, losses=[2.5, 2.3], step_ms=[10.0], total=10, precision="autocast bfloat16")
    header = cli("compare", FP32, BF16, check=True).stdout.splitlines()[0]
    assert "loss @ step 10" in header and "final loss" not in header


def test_identical_runs_within_a_wide_noise_band_are_too_noisy_not_same_speed(cli, runs_dir):
    """Issue 51: "same speed" only inside a narrow band; the same training twice on a busy machine
    (windows wander by +-20%, the means differ by 17%) cannot tell same speed from 1.4x."""
    write_run(runs_dir, FP32, losses=[2.0] * 10, step_ms=[23.4, 16.0, 30.0, 24.0], total=50)
    write_run(runs_dir, "20261123-100002-qs-fp32", losses=[2.0] * 10, step_ms=[20.0, 14.0, 26.0, 20.0], total=50)
    ids = [FP32, "20261123-100002-qs-fp32"]
    base, again = json.loads(cli("compare", *ids, "--format", "json", check=True).stdout)
    assert again["speedup"] > 1.1 and again["speedup_noise"] > again["speedup"] - 1.0 and again["same_speed"] is None
    assert again["speed_unresolved"].startswith("too noisy to tell (1.17x, inside its noise")
    assert base["speedup"] == 1.0 and base["speedup_noise"] is None
    table = cli("compare", *ids, check=True).stdout
    assert "same speed" not in table.split("\n\n")[0] and "too noisy to tell" in table
    assert "needs a band within ±10%; rerun when the machine is quieter, or with more steps" in " ".join(table.split())


def test_a_real_speed_up_beyond_the_noise_keeps_its_figure_and_its_noise(cli, runs_dir):
    write_run(runs_dir, FP32, losses=[2.0] * 10, step_ms=[20.0, 21.0], total=50)
    write_run(runs_dir, BF16, losses=[2.0] * 10, step_ms=[10.0, 10.5], total=50, precision="autocast bfloat16")
    _, fast = json.loads(cli("compare", FP32, BF16, "--format", "json", check=True).stdout)
    assert fast["same_speed"] is False and 0 < fast["speedup_noise"] < 0.2
    assert f"{fast['speedup']:.2f}x ±{fast['speedup_noise']:.2f}" in cli("compare", FP32, BF16, check=True).stdout


def test_the_compare_screen_reads_the_same_common_step(runs_dir):
    import asyncio

    from support.dashboard import app_for, until
    from textual.widgets import DataTable

    from amptui.dashboard.screens.compare.screen import CompareScreen

    two_variants(runs_dir)

    async def scenario():
        app = app_for(runs_dir)
        async with app.run_test(size=(160, 40)) as pilot:
            app.open_compare([runs_dir / FP32, runs_dir / BF16])
            await until(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.rows)
            await pilot.pause()
            table = app.screen.query_one("#compare-table", DataTable)
            labels = [str(c.label) for c in table.columns.values()]
            assert "loss @ step 10" in labels and "final loss" in labels and "steps" in labels
            short = [str(c) for c in table.get_row(BF16)]
            assert "stopped early" in short and "10/20" in short and "2.2560" in short
            notes = str(app.screen.query_one("#compare-notes").render())
            assert "compares them at step 10" in notes

    asyncio.run(scenario())
