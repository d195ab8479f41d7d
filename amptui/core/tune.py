"""`amptui tune`: the search space, the measurement of a trial, the accuracy guard and the verdict.

No processes and no torch here (the runner, amptui/tune_runner.py, launches the trials); everything
works on event records and plain dicts, so the dashboard and the tests can use it directly.

A tune's result is one JSON file beside its trials' run folders, `runs/<tune_id>.tune.json`,
rewritten atomically after every trial (status "running" until the search ends).
"""

from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import config as cfgmod
from .ab import VARIANTS
from .compare import _peak_of
from .errors import UserError
from .fmt import fmt_bytes
from .presets import atomic_write_text

# --- the search space -------------------------------------------------------------------------

PRECISIONS = ("bf16", "fp16+scaler")  # tried after fp32 (the reference) and in this order
# --keys names what may vary; the three amp keys all mean "the precision setup".
KEY_DIMENSIONS = {"amp.autocast": "precision", "amp.dtype": "precision", "amp.grad_scaler": "precision",
                  "run.compile": "compile", "data.batch_size": "batch"}
DEFAULT_KEYS = "amp.dtype,amp.grad_scaler,run.compile,data.batch_size"
ALWAYS_ON = {  # speed knobs without a preset key: the trainer applies them wherever they help
    "fused optimizer": "always on where supported (CUDA without a GradScaler; trainer/optim.py)",
    "channels_last": "always on for the built-in CNNs on CUDA (trainer/loop.py)",
}

# --- one trial --------------------------------------------------------------------------------

TRIAL_STEPS = 20          # optimizer steps per trial
LOG_EVERY = 4             # steps per timing window
WARMUP_WINDOWS = 1        # windows dropped from the timing (first batches, allocator) ...
COMPILE_WARMUP_WINDOWS = 2  # ... and with run.compile (compilation, the recompile after the first step)
BATCH_DOUBLINGS = 4       # at most batch x16
SLOW_FACTOR = 2.5         # a trial this much slower than fp32 is stopped early: it cannot win
MIN_GAIN = 0.05           # a speed-up below this (or below fp32's own run-to-run spread) is noise
STORM_FRACTION = 0.2      # more skipped optimizer steps than this is a skipped-step storm
BAND_FLOOR = 0.02         # the noise band is at least 2% of fp32's loss
INPUT_BOUND_SHARE = 0.3   # data wait above this share of the step time: input-bound


def tune_id(preset_name: str) -> str:
    import secrets

    return f"{time.strftime('%Y%m%d-%H%M%S')}-{preset_name}-tune-{secrets.token_hex(2)}"


def result_path(root: Path, tid: str) -> Path:
    return Path(root) / f"{tid}.tune.json"


def parse_keys(spec: str | None) -> set[str]:
    """--keys amp.dtype,run.compile -> {"precision", "compile"}."""
    names = [k.strip() for k in (spec or DEFAULT_KEYS).split(",") if k.strip()]
    if not names:
        raise UserError(f"--keys: name at least one of {', '.join(KEY_DIMENSIONS)}")
    dims = set()
    for name in names:
        if name in KEY_DIMENSIONS:
            dims.add(KEY_DIMENSIONS[name])
        elif any(word in name for word in ("fused", "channels_last")):
            knob = "fused optimizer" if "fused" in name else "channels_last"
            raise UserError(f"--keys {name}: not a preset key; the {knob} is {ALWAYS_ON[knob]}")
        else:
            raise UserError(f"--keys {name}: not searchable (searchable: {', '.join(KEY_DIMENSIONS)})")
    return dims


def check_overrides(overrides: dict[str, Any], dims: set[str]) -> None:
    """--set may not fix what the search varies."""
    clash = sorted(k for k in overrides if KEY_DIMENSIONS.get(k) in dims)
    if clash:
        raise UserError(f"--set {', '.join(clash)}: tune searches that; leave it out of --keys to keep it fixed")


@dataclass
class Candidate:
    name: str                       # "bf16", "bf16 +compile", "bf16 batch 256"
    knobs: dict[str, Any]           # the preset overrides that make this candidate
    role: str = "candidate"         # "reference" (fp32), "band" (fp32, second seed) or "candidate"


def precision_candidate(name: str) -> Candidate:
    return Candidate(name, dict(VARIANTS[name]), "reference" if name == "fp32" else "candidate")


def derived(base: Candidate, *, compile_: bool | None = None, batch: int | None = None) -> Candidate:
    knobs = dict(base.knobs)
    name = base.name
    if compile_:
        knobs["run.compile"] = True
        name += " +compile"
    if batch is not None:
        knobs["data.batch_size"] = batch
        name = name.split(" batch ")[0] + f" batch {batch}"
    return Candidate(name, knobs)


def trial_overrides(preset_name: str, tid: str, k: int) -> dict[str, Any]:
    """What every trial shares: short, no evaluation or periodic checkpoints, one group name."""
    return {"run.max_steps": TRIAL_STEPS, "run.epochs": 1000, "log.every": LOG_EVERY, "log.eval_every": 0,
            "log.checkpoint_every": 0, "log.checkpoint_every_steps": 0, "log.tensorboard": False,
            "run.name": group_name(preset_name, tid, k)}


def group_name(preset_name: str, tid: str, k: int) -> str:
    """Trials of one tune share '<preset>-tune-<hex>' and count up: the run list shows them together."""
    return f"{preset_name}-tune-{tid.rsplit('-', 1)[-1]}-{k}"


# --- measuring a finished trial -----------------------------------------------------------------

@dataclass
class Trial:
    candidate: str
    knobs: dict[str, Any]
    role: str = "candidate"
    run_id: str = ""
    status: str = "pending"         # completed, stopped, failed, oom, skipped
    reason: str = ""                # why skipped / stopped / failed
    windows: list[dict[str, Any]] = field(default_factory=list)
    ms_per_step: float | None = None
    samples_per_s: float | None = None
    data_wait_share: float | None = None
    peak_mem: float | None = None
    steps: int = 0
    skipped_steps: int = 0
    wall_s: float | None = None
    speedup: float | None = None
    verdict: str = ""               # reference, winner, accepted, rejected: ..., skipped: ..., ...

    @property
    def measured(self) -> bool:
        return self.ms_per_step is not None


def warmup_windows(knobs: dict[str, Any]) -> int:
    return COMPILE_WARMUP_WINDOWS if knobs.get("run.compile") else WARMUP_WINDOWS


def is_oom(error: dict[str, Any] | None) -> bool:
    """An end record's error that means "does not fit": torch's OutOfMemoryError, or its message."""
    error = error or {}
    text = f"{error.get('type', '')} {error.get('message', '')}".lower()
    return "outofmemory" in text or "out of memory" in text


def measure(trial: Trial, records: list[dict[str, Any]]) -> Trial:
    """Fill a trial's numbers from its event records: the steady windows' medians (a shared
    machine's hiccups land in single windows), after WARMUP_WINDOWS windows (and compilation)."""
    steps = [r for r in records if r.get("kind") == "step"]
    trial.windows = [{k: r.get(k) for k in ("step", "loss", "step_time_ms", "samples_per_s", "data_wait_ms",
                                            "skipped_total")} for r in steps]
    end = next((r for r in reversed(records) if r.get("kind") == "end"), None)
    peaks = [p for p in (_peak_of(r.get("mem")) for r in steps) if p is not None]
    if end and end.get("peak_mem") is not None:
        peaks.append(float(end["peak_mem"]))
    trial.peak_mem = max(peaks) if peaks else None
    trial.steps = steps[-1]["step"] if steps else 0
    trial.skipped_steps = (steps[-1].get("skipped_total") or 0) if steps else 0
    steady = [w for w in trial.windows[warmup_windows(trial.knobs):] if w.get("step_time_ms")]
    if not steady and trial.windows and trial.status == "stopped":
        steady = [w for w in trial.windows[1:] or trial.windows if w.get("step_time_ms")]  # all it measured
    if steady:
        trial.ms_per_step = statistics.median(w["step_time_ms"] for w in steady)
        rates = [w["samples_per_s"] for w in steady if w.get("samples_per_s")]
        trial.samples_per_s = statistics.median(rates) if rates else None
        waits = [w["data_wait_ms"] for w in steady if w.get("data_wait_ms") is not None]
        if waits:
            trial.data_wait_share = min(1.0, sum(waits) / sum(w["step_time_ms"] for w in steady[:len(waits)]))
    if end is not None and trial.status in ("pending", "running"):
        trial.status = end.get("status", "failed")
    if end is not None and end.get("status") == "failed":
        error = end.get("error") or {}
        trial.status = "oom" if is_oom(error) else "failed"
        trial.reason = f"{error.get('type', 'Error')}: {str(error.get('message', '')).splitlines()[0][:160]}" \
            if error.get("message") else error.get("type", "failed")
    return trial


# --- the accuracy guard -------------------------------------------------------------------------

def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def noise_band(reference: Trial, second: Trial | None) -> tuple[float, str]:
    """How far fp32's own loss wanders: the largest gap between two fp32 seeds at the same step,
    else the spread of fp32's window-to-window changes; at least BAND_FLOOR of its final loss."""
    ref = {w["step"]: w["loss"] for w in reference.windows if _finite(w.get("loss"))}
    final = abs(list(ref.values())[-1]) if ref else 0.0
    floor = BAND_FLOOR * final
    if second is not None and second.windows:
        gaps = [abs(w["loss"] - ref[w["step"]]) for w in second.windows
                if _finite(w.get("loss")) and w["step"] in ref]
        if gaps:
            return max(max(gaps), floor), "two fp32 seeds"
    losses = list(ref.values())
    diffs = [abs(b - a) for a, b in zip(losses, losses[1:])]
    spread = statistics.median(diffs) * 2 if diffs else 0.0
    return max(spread, floor), "fp32's window-to-window spread"


def guard(trial: Trial, reference: Trial, band: float) -> str | None:
    """Why this candidate's accuracy cannot be trusted, or None. One-sided: learning faster than
    fp32 (e.g. with a larger batch) is not a fault, ending up worse than its band is."""
    for w in trial.windows:
        if w.get("loss") is None or not _finite(w.get("loss")):
            return f"non-finite loss at step {w.get('step')}"
    if trial.steps and trial.skipped_steps > max(1, STORM_FRACTION * trial.steps):
        return f"skipped-step storm: {trial.skipped_steps} of {trial.steps} optimizer steps skipped"
    ref = {w["step"]: w["loss"] for w in reference.windows if _finite(w.get("loss"))}
    for w in trial.windows:
        if w["step"] in ref and w["loss"] - ref[w["step"]] > band:
            return (f"loss left fp32's noise band at step {w['step']}: {w['loss']:.4f} vs {ref[w['step']]:.4f} "
                    f"± {band:.4f}")
    return None


# --- the verdict --------------------------------------------------------------------------------

def rate(trial: Trial) -> float | None:
    """Throughput to compare candidates by: samples/s (batch sizes differ), else 1 / ms per step."""
    if trial.samples_per_s:
        return trial.samples_per_s
    return 1000.0 / trial.ms_per_step if trial.ms_per_step else None


def fp32_rate(reference: Trial, second: Trial | None) -> tuple[float | None, float]:
    """(fp32's throughput, the gain a candidate needs): the mean of the two fp32 runs, and enough
    to beat the faster of them (at least MIN_GAIN): what one machine's run-to-run noise allows."""
    a, b = rate(reference), rate(second) if second is not None else None
    if a and b:
        mean = (a + b) / 2
        return mean, max(MIN_GAIN, max(a, b) / mean - 1.0)
    return a, MIN_GAIN


def judge(trials: list[Trial]) -> tuple[Trial | None, float | None, float]:
    """Set each trial's speed-up and verdict; return (winner, band, needed gain). The winner is the
    fastest candidate that passes the guard and beats fp32 by more than the noise; else fp32."""
    reference = next((t for t in trials if t.role == "reference" and t.measured), None)
    second = next((t for t in trials if t.role == "band" and t.measured), None)
    for t in trials:
        if t.status == "skipped":
            t.verdict = f"skipped: {t.reason}"
        elif t.status == "oom":
            t.verdict = "out of memory"
        elif not t.measured:
            t.verdict = f"no timing: {t.reason or t.status}"
    if reference is None:
        for t in trials:
            t.verdict = t.verdict or "no fp32 reference to judge against"
        return None, None, MIN_GAIN
    band, _ = noise_band(reference, second)
    base, needed = fp32_rate(reference, second)
    best, best_rate = reference, base
    for t in trials:
        if t.measured and base and rate(t):
            t.speedup = rate(t) / base
        if t.verdict:
            continue
        if t.role in ("reference", "band"):
            t.verdict = "fp32 reference" if t.role == "reference" else "fp32, second seed (noise band)"
            continue
        reason = guard(t, reference, band)
        if reason:
            t.verdict = f"rejected: {reason}"
        elif t.status == "stopped" and t.reason:
            t.verdict = t.reason if t.reason.startswith("stopped") else f"stopped: {t.reason}"
        elif t.speedup is not None and t.speedup < 1.0 + needed:
            t.verdict = "accurate, not faster" if t.speedup < 1.0 else "accurate, within timing noise"
        else:
            t.verdict = "accurate, faster"
            if rate(t) > best_rate:
                best, best_rate = t, rate(t)
    best.verdict = "WINNER" + (" (stay in fp32)" if best is reference else "")
    return best, band, needed


def describe_limits(winner: Trial, trials: list[Trial], device_type: str) -> list[str]:
    """What holds the winner back: input-bound, launch-bound, memory-bound (when the numbers say so)."""
    out = []
    if winner.data_wait_share is not None and winner.data_wait_share >= INPUT_BOUND_SHARE:
        out.append(f"Input-bound: the loop waited for data {100 * winner.data_wait_share:.0f}% of the step time; "
                   "a faster input pipeline helps more than any precision setting.")
    ooms = [t for t in trials if t.status == "oom"]
    if ooms:
        batches = sorted(t.knobs.get("data.batch_size", 0) for t in ooms)
        out.append(f"Memory-bound: batch {batches[0]} ran out of memory, so the batch size stops below it.")
    if device_type == "cuda" and winner.ms_per_step is not None and winner.ms_per_step < 5:
        out.append(f"Launch-bound: a step takes {winner.ms_per_step:.1f} ms, short enough that kernel launches, "
                   "not math, set the pace; torch.compile or a larger batch lets lower precision pay off.")
    return out


def explain(trials: list[Trial], winner: Trial | None, needed: float, device_type: str,
            hardware_note: str = "") -> list[str]:
    """A few plain sentences: why the winner won, and what limits it."""
    if winner is None:
        return ["No fp32 reference was measured, so nothing could be judged (the search ended before it)."]
    lines = []
    rejected = [t for t in trials if t.verdict.startswith("rejected")]
    ref = next(t for t in trials if t.role == "reference" and t.measured)
    if winner is ref or winner.role == "reference":
        faster = [t for t in trials if t.speedup and t.speedup > 1.0 and t.role == "candidate"]
        why = f"no candidate was both accurate and more than {100 * needed:.0f}% faster than fp32"
        if needed > MIN_GAIN:
            why += " (this machine's timing noise: the two fp32 runs differed that much)"
        if not any(t.role == "band" and t.measured for t in trials):
            why += ("; the timing noise was not measured (no second fp32 run fitted in the budget), so a close "
                    "call could go either way: a larger --budget settles it")
        lines.append(f"Stay in fp32: {why}.")
        if hardware_note:
            lines.append(f"{hardware_note[0].upper()}{hardware_note[1:]}.")
        if faster:
            best = max(faster, key=lambda t: t.speedup)
            lines.append(f"The fastest other candidate, {best.candidate}, measured {best.speedup:.2f}x "
                         f"({best.verdict}).")
    else:
        parts = []
        dtype = winner.knobs.get("amp.dtype")
        if winner.knobs.get("amp.autocast"):
            if dtype == "bfloat16":
                parts.append("bfloat16 autocast: " + (hardware_note or "lower-precision math is faster here") +
                             "; bfloat16 keeps float32's range, so no loss scaling is needed")
            else:
                parts.append("float16 autocast with a GradScaler: fast half-precision math, the scaler keeps "
                             "small gradients from underflowing")
        if winner.knobs.get("run.compile"):
            parts.append("torch.compile fuses kernels and removes per-op launch overhead")
        if "data.batch_size" in winner.knobs:
            parts.append(f"batch {winner.knobs['data.batch_size']} keeps the hardware busier per step")
        lines.append(f"{winner.candidate} wins at {winner.speedup:.2f}x fp32's samples/s with its loss inside "
                     f"fp32's noise band: " + "; ".join(parts or ["it measured fastest"]) + ".")
    for t in rejected:
        lines.append(f"{t.candidate} was rejected: {t.verdict.removeprefix('rejected: ')}.")
    lines += describe_limits(winner, trials, device_type)
    return lines


# --- the result file ----------------------------------------------------------------------------

def trial_from_dict(d: dict[str, Any]) -> Trial:
    return Trial(**{k: v for k, v in d.items() if k in Trial.__dataclass_fields__})


def write_result(path: Path, result: dict[str, Any]) -> None:
    atomic_write_text(path, json.dumps(result, indent=2, default=str) + "\n")


def read_result(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: not a readable tune result ({exc})") from None
    if not isinstance(data, dict) or "trials" not in data:
        raise UserError(f"{path}: not a tune result")
    return data


HEADERS = ("candidate", "ms/step", "samples/s", "peak mem", "speed-up", "verdict")


def cells(t: dict[str, Any]) -> tuple[str, ...]:
    """One trial (as stored in the result) as display strings, in HEADERS order."""
    ms, sps, sp = t.get("ms_per_step"), t.get("samples_per_s"), t.get("speedup")
    return (t["candidate"], "-" if ms is None else f"{ms:.1f}", "-" if sps is None else f"{sps:.0f}",
            fmt_bytes(t.get("peak_mem")), "-" if sp is None else f"{sp:.2f}x", short_verdict(t))


def short_verdict(t: dict[str, Any]) -> str:
    """The table's verdict: the words before the reason (notes() gives the reasons)."""
    verdict = t.get("verdict") or t.get("status", "")
    return verdict.split(":")[0] + ("*" if ":" in verdict else "")


def notes(result: dict[str, Any]) -> list[str]:
    """'candidate: verdict with its reason' for every trial whose verdict the table shortened."""
    return [f"* {t['candidate']}: {t['verdict']}" for t in result.get("trials", []) if ":" in (t.get("verdict") or "")]


def winner_preset_values(result: dict[str, Any]) -> tuple[str, dict[str, dict[str, Any]], str]:
    """(name, full preset values, source preset name) of the winner: the tuned preset's content."""
    from .presets import find_preset

    winner = result.get("winner")
    if not winner:
        raise UserError("this tune has no winner to save (no fp32 reference was measured)")
    preset = find_preset(result["preset_ref"])
    knobs = next(t["knobs"] for t in result["trials"] if t["candidate"] == winner)
    values = preset.config({**result.get("overrides", {}), **knobs}).to_dict()
    name = f"{preset.name}-tuned"
    speed = next((t.get("speedup") for t in result["trials"] if t["candidate"] == winner), None)
    values["run"]["name"] = name
    values["run"]["description"] = (f"{preset.name} tuned by amptui tune on {result.get('device_name', 'this machine')}"
                                    f": {winner}" + (f", {speed:.2f}x fp32's samples/s" if speed else "") +
                                    f" ({time.strftime('%Y-%m-%d', time.localtime(result.get('started', time.time())))})")
    cfgmod.build_config(values, source=f"preset {name!r}")
    return name, values, preset.name


def save_winner(result: dict[str, Any]) -> Path:
    """Write the winner as the saved preset `<preset>-tuned` (atomic; replaces an older tune's)."""
    from .presets import save_preset

    name, values, source = winner_preset_values(result)
    return save_preset(name, values, force=True, source=f"{source} by amptui tune {result.get('tune_id', '')}")


def as_dicts(trials: list[Trial]) -> list[dict[str, Any]]:
    return [asdict(t) for t in trials]
