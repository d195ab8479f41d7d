"""Canned tunes for the tune tests: trials as the runner measures them (plan.measure over step
records), ended by the tune's own verdict (partial.conclude), written where the tune screen reads them.

`reviewers_stop()` is the search issue 25's reviewer stopped with q: fp32 measured, bf16 stopped
early (far slower than fp32), fp32's second seed measured, fp16+scaler stopped at step 8 while it ran.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from amptui.core.config.variants import VARIANTS
from amptui.tune import partial as P
from amptui.tune import plan as T

DIMS = ("precision", "compile", "batch")
TID = "20261124-093000-quickstart-tune-aaf2"


def measured(name: str, role: str = "candidate", ms: float = 120.0, last_step: int = 20, status: str = "completed",
             reason: str = "", drift: float = 0.0, batch: int = 64) -> T.Trial:
    """A trial whose step windows (every 4 steps up to last_step) took `ms` per step."""
    t = T.Trial(name, dict(VARIANTS.get(name.split(" ")[0], {})), role, run_id=f"{TID[:15]}-{name.replace(' ', '-')}",
                status=status, reason=reason)
    records = [{"kind": "step", "step": step, "loss": 2.3 - 0.01 * step + drift, "step_time_ms": ms,
                "samples_per_s": batch * 1000.0 / ms, "data_wait_ms": 0.0, "skipped_total": 0,
                "mem": {"rss": 300 * 2**20, "peak_rss": 310 * 2**20}} for step in range(4, last_step + 1, 4)]
    return T.measure(t, records)


def reviewers_stop() -> list[T.Trial]:
    return [measured("fp32", "reference", ms=120.0),
            measured("bf16", ms=951.3, last_step=8, status="stopped",
                     reason=f"stopped early: over {T.SLOW_FACTOR:g}x slower than fp32, it cannot win"),
            measured("fp32 seed 2", "band", ms=125.0, drift=0.004),
            measured("fp16+scaler", ms=90.0, last_step=8, status="stopped", reason="interrupted"),
            T.Trial("fp8", {}, "candidate", status="skipped", reason="needs a CUDA GPU with compute capability 8.9+")]


def finished_search() -> list[T.Trial]:
    """A whole precision search on a machine where bf16 pays: bf16 wins."""
    return [measured("fp32", "reference", ms=120.0), measured("bf16", ms=60.0),
            measured("fp32 seed 2", "band", ms=122.0, drift=0.004), measured("fp16+scaler", ms=150.0)]


def write_tune(root: Path, trials: list[T.Trial], interrupted: bool, tid: str = TID) -> Path:
    """The result file of a search that ended with these trials (as runner.Search.finish writes it)."""
    result: dict[str, Any] = {
        "tune_id": tid, "preset": "quickstart", "preset_ref": "quickstart", "overrides": {}, "device_type": "cpu",
        "device_name": "Test CPU", "budget_s": 600.0, "started": 1795302900.0, "pid": 1, "always_on": T.ALWAYS_ON,
        **P.conclude(trials, interrupted, DIMS, "cpu"), "finished": 1795302960.0, "elapsed_s": 60.0}
    path = T.result_path(root, tid)
    T.write_result(path, result)
    return path


def write_old_stopped_tune(root: Path, tid: str = TID) -> Path:
    """What an amptui before issue 25's fix wrote for the reviewer's stop: status interrupted, yet a
    winner, a WINNER row and no `partial` (the dashboard still reads such files)."""
    trials = reviewers_stop()
    path = write_tune(root, trials, interrupted=True, tid=tid)
    result = T.read_result(path)
    for t in result["trials"]:
        if t["role"] == "reference":
            t["verdict"] = "WINNER (stay in fp32)"
    result.update(winner="fp32", partial=None, explanation=["Stay in fp32: no candidate was both accurate and "
                                                           "more than 5% faster than fp32."])
    T.write_result(path, result)
    return path
