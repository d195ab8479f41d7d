"""Inside a stand-in Kubeflow TrainJob -- an HTTPS stub on 127.0.0.1 whose certificate a throwaway
CA signed, a token file and a CA file, named by the variables the Trainer's status plugin sets --
a quickstart run's rank 0 posts its trainerStatus (progress, remaining time, AMP metrics) with the
bearer token; without the variables nothing posts; a failing endpoint is one warning."""

from __future__ import annotations

import pytest
from support.cli import amptui
from support.records import events, only_run
from support.webstub import TRAINJOB_TOKEN

TINY = ["--set", "run.max_steps=6", "--set", "log.every=2", "--set", "data.train_samples=256",
        "--set", "data.val_samples=64", "--set", "amp.dtype=float16", "--set", "amp.grad_scaler=true"]
TOKEN = TRAINJOB_TOKEN


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_run_in_a_trainjob_posts_progress_and_amp_metrics_with_the_token(runs_dir, trainjob_stub):
    env, posts = trainjob_stub
    amptui("run", "quickstart", *TINY, env=env, check=True, timeout=200)
    steps = [r for r in events(only_run(runs_dir)) if r["kind"] == "step"]
    assert posts, "nothing was posted"
    assert all(p["auth"] == f"Bearer {TOKEN}" and p["path"].endswith("/trainjobs/job/status") for p in posts)
    first, last = posts[0]["body"]["trainerStatus"], posts[-1]["body"]["trainerStatus"]
    assert 0 <= first["progressPercentage"] < 100 and "estimatedRemainingSeconds" in first
    assert (last["progressPercentage"], last["estimatedRemainingSeconds"]) == (100, 0)  # at the end
    metrics = {m["name"]: m["value"] for m in last["metrics"]}
    assert {"loss", "lr", "loss_scale", "skipped_steps"} <= set(metrics)
    assert float(metrics["loss_scale"]) == steps[-1]["scale"] and int(metrics["step"]) == steps[-1]["step"]
    assert all(isinstance(m["value"], str) for m in last["metrics"]) and last["lastUpdatedTime"].endswith("Z")
