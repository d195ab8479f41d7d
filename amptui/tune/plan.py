"""`amptui tune`: the search space, the measurement of a trial, the result file and its table
(the accuracy guard and the verdict are in tune/verdict.py and tune/partial.py, what a result
says in tune/report.py).

No processes and no torch here (the runner, amptui/tune/runner.py, launches the trials); everything
works on event records and plain dicts, so the dashboard and the tests can use it directly.

A tune's result is one JSON file beside its trials' run folders, `runs/<tune_id>.tune.json`,
rewritten atomically after every trial (status "running" until the search ends).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from amptui.core import figures, modes, safefile, tunenames
from amptui.core.config import values as cfgmod
from amptui.core.config.precision import Precision
from amptui.core.config.presets import find_preset, save_preset
from amptui.core.config.variants import VARIANTS
from amptui.core.errors import UserError
from amptui.core.fmt import fmt_bytes
from amptui.core.rankmemory import peak_of
from amptui.core.safefile import atomic_write_text
from amptui.core.stream.records import END, STEP, End, Record, Start, Step, as_record

# --- the search space -------------------------------------------------------------------------



def precisions() -> tuple[str, ...]:
    """Tried after fp32 (the reference), in this order: what the precision modes offer tune
    (amptui/core/modes/, `tune_variants`), a mode tried last apart (its own trial: runner.try_last)."""
    return tuple(n for n in modes.tune_variants() if not Precision.from_variant(n).mode.tune_last)


PRECISIONS = precisions()  # ("bf16", "fp16+scaler") with amptui's own modes
FLOAT8_CANDIDATE = next(n for n in modes.tune_variants() if Precision.from_variant(n).mode.tune_last)
# --keys names what may vary; the three amp keys all mean "the precision setup".
KEY_DIMENSIONS = {"amp.autocast": "precision", "amp.dtype": "precision", "amp.grad_scaler": "precision",
                  "run.compile": "compile", "data.batch_size": "batch"}
DEFAULT_KEYS = "amp.dtype,amp.grad_scaler,run.compile,data.batch_size"
DEFAULT_BUDGET_MIN = 10.0  # `tune --budget` and the dashboard's budget field
ALWAYS_ON = {  # speed knobs without a preset key: the trainer applies them wherever they help
    "fused optimizer": "always on where supported (CUDA without a GradScaler; trainer/optim.py)",
    "channels_last": "always on for the built-in CNNs on CUDA (trainer/loop.py)",
}

# --- one trial --------------------------------------------------------------------------------

TRIAL_STEPS = 20          # optimizer steps per trial
LOG_EVERY = 4             # steps per timing window
# windows dropped from the timing (first batches, allocator; with run.compile, compilation and the
# recompile after the first step): core/figures.py's, the one definition every view uses
WARMUP_WINDOWS, COMPILE_WARMUP_WINDOWS = figures.WARMUP_WINDOWS, figures.COMPILE_WARMUP_WINDOWS
BATCH_DOUBLINGS = 4       # at most batch x16
SLOW_FACTOR = 2.5         # a trial this much slower than fp32 is stopped early: it cannot win
MIN_GAIN = 0.05           # a speed-up below this (or below fp32's own run-to-run spread) is noise
STORM_FRACTION = 0.2      # more skipped optimizer steps than this is a skipped-step storm
BAND_FLOOR = 0.02         # the noise band is at least 2% of fp32's loss


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
    accuracy_only: str = ""         # why its speed is not judged (its GEMMs emulated here), "" when it is


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


def parse_budget(text: str) -> float:
    """Minutes for the whole search, as `--budget` and the dashboard's field take them (> 0)."""
    try:
        minutes = float(str(text).strip())
    except ValueError:
        minutes = float("nan")
    if not minutes > 0 or minutes == float("inf"):
        raise UserError(f"budget {str(text).strip()!r}: give the minutes the search may take (a number > 0)")
    return minutes


def trial_overrides(preset_name: str, tid: str, k: int) -> dict[str, Any]:
    """What every trial shares: short, no evaluation or periodic checkpoints, one group name."""
    return {"run.max_steps": TRIAL_STEPS, "run.epochs": 1000, "log.every": LOG_EVERY, "log.eval_every": 0,
            "log.checkpoint_every": 0, "log.checkpoint_every_steps": 0, "log.tensorboard": False,
            "run.name": group_name(preset_name, tid, k)}


def toggles_words(kept: dict[str, Any]) -> str:
    """What the user's own settings do to the trials, as it will really happen: the ones that apply
    to every trial, and the ones every trial replaces (trial_overrides: "run.max_steps=12 does not:
    every trial runs 20 steps")."""
    fixed = set(trial_overrides("preset", "tune-0", 1)) - {"run.name"}
    said = ", ".join(f"{k}={v}" for k, v in kept.items() if k not in fixed)
    replaced = [f"{k}={v}" for k, v in kept.items() if k in fixed]
    text = f"Your toggles {said} apply to every trial." if said else "The preset's own settings apply to every trial."
    if replaced:
        verb = "does" if len(replaced) == 1 else "do"
        text += (f" {', '.join(replaced)} {verb} not: every trial runs {TRIAL_STEPS} steps, with no evaluation "
                 "or checkpoints.")
    return text


def group_name(preset_name: str, tid: str, k: int) -> str:
    """Trials of one tune share '<preset>-tune-<hex>' and count up: the run list shows them together."""
    return tunenames.trial_name(preset_name, tid.rsplit('-', 1)[-1], k)


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
    spread: float | None = None     # relative spread of its steady windows' ms/step (figures.Steady.spread)
    data_wait_share: float | None = None
    peak_mem: float | None = None
    steps: int = 0
    skipped_steps: int = 0
    wall_s: float | None = None
    speedup: float | None = None
    verdict: str = ""               # reference, winner, accepted, rejected: ..., skipped: ..., ...
    accuracy_only: str = ""         # why its speed is not judged (its GEMMs emulated here), "" when it is

    @property
    def measured(self) -> bool:
        return self.ms_per_step is not None


def of_steps(t: Trial) -> str:
    """" of 20" after a trial's step: a preset's trials run TRIAL_STEPS; a script's its own length."""
    return "" if "run.apply_amp" in t.knobs else f" of {TRIAL_STEPS}"


def warmup_windows(knobs: dict[str, Any]) -> int:
    return figures.warmup_windows(bool(knobs.get("run.compile")))


def is_oom(error: dict[str, Any] | None) -> bool:
    """An end record's error that means "does not fit": torch's OutOfMemoryError, or its message."""
    error = error or {}
    text = f"{error.get('type', '')} {error.get('message', '')}".lower()
    return "outofmemory" in text or "out of memory" in text


def measure(trial: Trial, records: Sequence[Record | dict[str, Any]]) -> Trial:
    """Fill a trial's numbers from its event records: ms/step and samples/s as core/figures.py
    defines them for every view (the windows after warm-up, time-weighted), so a trial and
    `amptui compare` of its run say the same; a trial stopped before a window past warm-up is
    timed by what it measured."""
    read = [as_record(r) for r in records]
    steps = [r for r in read if isinstance(r, Step)]
    trial.windows = [{k: r.get(k) for k in (STEP.step, STEP.loss, STEP.step_time_ms, STEP.samples_per_s,
                                            STEP.data_wait_ms, STEP.skipped_total)} for r in steps]
    end = next((r for r in reversed(read) if isinstance(r, End)), None)
    peaks = [p for p in (peak_of(r.get(STEP.mem)) for r in steps) if p is not None]
    if end and end.get(END.peak_mem) is not None:
        peaks.append(float(end[END.peak_mem]))
    trial.peak_mem = max(peaks) if peaks else None
    trial.steps = steps[-1][STEP.step] if steps else 0
    trial.skipped_steps = (steps[-1].get(STEP.skipped_total) or 0) if steps else 0
    timed = figures.StepWindows()
    for r in steps:
        timed.take(r)
    start = next((r for r in read if isinstance(r, Start)), None)
    total = start.total_steps if start is not None and isinstance(start.total_steps, int) else None
    compiled = bool(trial.knobs.get("run.compile"))
    steady = [w for w in trial.windows[warmup_windows(trial.knobs):] if w.get(STEP.step_time_ms)]
    if not steady and trial.windows and trial.status == "stopped":
        steady = [w for w in trial.windows[1:] or trial.windows if w.get(STEP.step_time_ms)]  # all it measured
    if timed.windows and (timed.past_warmup(total, compiled) or trial.status == "stopped"):
        found = timed.steady(total, compiled)
        trial.ms_per_step, trial.samples_per_s, trial.spread = found.step_ms, found.samples_per_s, found.spread
    if steady:
        waits = [w[STEP.data_wait_ms] for w in steady if w.get(STEP.data_wait_ms) is not None]
        if waits:
            trial.data_wait_share = min(1.0, sum(waits) / sum(w[STEP.step_time_ms] for w in steady[:len(waits)]))
    if end is not None and trial.status in ("pending", "running"):
        trial.status = end.get(END.status, "failed")
    if end is not None and end.get(END.status) == "failed":
        error = end.get("error") or {}
        trial.status = "oom" if is_oom(error) else "failed"
        trial.reason = f"{error.get('type', 'Error')}: {str(error.get('message', '')).splitlines()[0][:160]}" \
            if error.get("message") else error.get("type", "failed")
    return trial


# --- the result file ----------------------------------------------------------------------------

def write_result(path: Path, result: dict[str, Any]) -> None:
    atomic_write_text(path, json.dumps(result, indent=2, default=str) + "\n")


RESULT_LIMIT = 16 * 1024 * 1024  # a tune result: its trials, each a few hundred bytes


def read_result(path: Path) -> dict[str, Any]:
    try:
        data = safefile.load_json(path, RESULT_LIMIT)
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


def winner_of(result: dict[str, Any]) -> str | None:
    """The winner to show and to save: only a search that ended on its own with nothing left out
    has one (a stopped or cut-short one names none, whatever an older amptui wrote)."""
    if result.get("status") != "done" or result.get("partial"):
        return None
    return result.get("winner") or None


FAILED = ("failed", "killed")  # a trial that crashed: it says nothing of its precision (an OOM does)


def failed_search(result: dict[str, Any]) -> str | None:
    """Why a search that ended on its own crowns nothing because it failed: its fp32 reference (the
    setup as written) measured nothing, or every trial that ran failed. None otherwise."""
    if result.get("status") != "done":
        return None
    ran = [t for t in result.get("trials", []) if t.get("run_id")]
    reference = next((t for t in ran if t.get("role") == "reference"), None)
    if reference is None or reference.get("ms_per_step") is None:
        said = (reference or {}).get("reason") or (reference or {}).get("status") or "it never ran"
        return f"the fp32 reference measured nothing ({said})"
    trials = [t for t in ran if t.get("role") not in ("reference", "band")]
    if trials and all(t.get("status") in FAILED for t in trials):
        return "every trial failed (" + "; ".join(f"{t['candidate']}: {t.get('reason') or t.get('status')}"
                                                  for t in trials) + ")"
    return None


TOO_NOISY = "accurate, too noisy to tell"  # a candidate whose speed the noise or fp32's control cannot tell


def no_winner_words(result: dict[str, Any]) -> str:
    if result.get("status") == "running":
        return "the search is still running"
    if not result.get("partial") and any(str(t.get("verdict", "")).startswith(TOO_NOISY) for t in result.get("trials", [])):
        return "the timings were too noisy to tell a winner"
    return result.get("partial") or ("the search was stopped before it ended" if result.get("status") == "interrupted"
                                     else "no fp32 reference was measured")


def winner_preset_values(result: dict[str, Any]) -> tuple[str, cfgmod.Config, str]:
    """(name, config, source preset name) of the winner: the tuned preset's content."""
    winner = winner_of(result)
    if not winner:
        raise UserError(f"this tune has no winner to save ({no_winner_words(result)})")
    if result.get("script"):  # a script's loop is its own: its winner is a command, not a preset
        raise UserError(f"a script's tune saves no preset; use the winner: {result.get('use', '')}")
    preset = find_preset(result["preset_ref"])
    knobs = next(t["knobs"] for t in result["trials"] if t["candidate"] == winner)
    name = f"{preset.name}-tuned"
    speed = next((t.get("speedup") for t in result["trials"] if t["candidate"] == winner), None)
    description = (f"{preset.name} tuned by amptui tune on {result.get('device_name', 'this machine')}"
                   f": {winner}" + (f", {speed:.2f}x fp32's samples/s" if speed else "") +
                   f" ({time.strftime('%Y-%m-%d', time.localtime(result.get('started', time.time())))})")
    cfg = preset.config({**result.get("overrides", {}), **knobs, "run.name": name, "run.description": description})
    return name, cfg, preset.name


def save_winner(result: dict[str, Any]) -> Path:
    """Write the winner as the saved preset `<preset>-tuned` (atomic; replaces an older tune's)."""
    name, cfg, source = winner_preset_values(result)
    return save_preset(name, cfg, force=True, source=f"{source} by amptui tune {result.get('tune_id', '')}")


def as_dicts(trials: list[Trial]) -> list[dict[str, Any]]:
    return [asdict(t) for t in trials]
