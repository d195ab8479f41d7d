"""Home screen launches as plain functions: r runs the highlighted preset with its toggles, a starts
an A/B of it, t a tune, e a script, R resumes a run. Each is `amptui run|ab|tune|resume ... --detach`
through jobs.detached.start (torch is imported only there, never in the dashboard).

Nothing here knows the screen: a function is given the preset, the toggles' overrides and the runs
folder and returns what to start (`Start`) or why not (`Notice`); `start` and `estimate_ab` block
(the screen runs them in thread workers) and return what happened (`Started`, `AbEstimate`), which
the screen shows when the worker's state says it is done (home/screen.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amptui.core.config import presets as presetmod
from amptui.core.config.precision import PRECISION_KEYS
from amptui.core.run import runops
from amptui.core.run.runs import RunInfo
from amptui.dashboard.notice import Notice, refused
from amptui.jobs import detached
from amptui.jobs import groups as groupmod
from amptui.jobs.ab import LONG_AB_S, script_ab_args
from amptui.tune import plan as T

ONE_AT_A_TIME = ("run", "resume")  # verbs started one at a time (a second r waits for the first's reply)


def preset_ref(preset: presetmod.Preset) -> str:
    """How a child `amptui` is told the preset: a built-in by name, any other by its file."""
    return preset.name if preset.builtin else str(preset.path)


def launch_refusal(preset: presetmod.Preset | None, filter_words: list[str], runs_root: Path) -> str | None:
    """Why nothing can be launched now, before any process starts (None: it can)."""
    if preset is None:
        if filter_words:
            return f"no preset shown: the filter {' '.join(filter_words)!r} hides them all (/ to change it)"
        return "no preset highlighted"
    return runops.runs_folder_problem(runs_root)


@dataclass(frozen=True)
class Start:
    """A detached `amptui` to start: its arguments, the name of what it starts (a preset, a script)
    for what is said once it has started, and what to say meanwhile."""

    args: list[str]
    name: str = ""
    said: Notice | None = None

    @property
    def verb(self) -> str:
        return self.args[0]


@dataclass(frozen=True)
class Started:
    """What `start` answered: the start line `reply` (run_id, group_id, label, result, log, notes),
    or the `error` that says why nothing started."""

    start: Start
    reply: dict[str, Any] | None
    error: str | None

    @property
    def failed(self) -> bool:
        return bool(self.error or not self.reply)

    def notices(self) -> list[Notice]:
        """What to say about it: the CLI's `note:` lines (automatic precision's fallback, a CPU-only
        torch), then that it started or why not."""
        verb, name, reply = self.start.verb, self.start.name, self.reply or {}
        out = [Notice(note, title="Note", timeout=20) for note in reply.get("notes", [])]
        if verb == "ab":
            if self.failed:
                return [refused(self.error or "the A/B did not start", "A/B refused")]
            label = reply.get("label", "")
            return [Notice(f"A/B {label} of {name} started: its precision variants run one after another, "
                           f"marked {label} in Runs; the compare screen opens when the last ends", timeout=10)]
        if verb == "tune":
            return [Notice(f"could not start the tune: {self.error}", severity="error", timeout=10)] if self.failed else []
        if self.failed:
            out.append(refused(self.error or "the run did not start", f"{verb.capitalize()} refused"))
        return out


def start(launch: Start) -> Started:
    """Start it (blocks until the child says it started or refused: in a thread worker)."""
    reply, error = detached.start(launch.args)
    return Started(launch, reply, error)


def run_start(preset: presetmod.Preset, overrides: Mapping[str, Any], runs_root: Path) -> Start:
    """`amptui run PRESET --set ... --detach`: the same detached trainer the CLI starts."""
    return Start(detached.amptui_args("run", preset_ref(preset), overrides, "--runs-dir", str(runs_root)),
                 preset.name, Notice(f"starting {preset.name}…", timeout=3))


def script_start(words: list[str], runs_root: Path) -> Start:
    """`amptui run --script PATH --detach -- ARGS` (the e dialog's words: the path, then its arguments)."""
    return Start(["run", "--script", words[0], detached.DETACH, "--runs-dir", str(runs_root), "--", *words[1:]],
                 words[0], Notice(f"starting {words[0]}…", timeout=3))


def resume_start(run_id: str, flags: list[str], runs_root: Path) -> Start:
    """`amptui resume RUN_ID --detach`: startchecks.check_resumable (which needs torch, so not in the
    dashboard's process) and launch.start(resume=True), as the CLI does. `flags`: --trust-code once
    the user said yes to the code the run names (core/run/trust.py)."""
    return Start(["resume", run_id, detached.DETACH, *flags, "--runs-dir", str(runs_root)], run_id,
                 Notice(f"resuming {run_id}…", timeout=3))


def is_script_run(info: RunInfo | None) -> bool:
    return info is not None and any(ref.startswith("run.script") for ref in info.code)


def script_ab_start(info: RunInfo, runs_root: Path) -> Start | Notice:
    """a on a script run: the A/B of that script with the arguments its run recorded (jobs/ab.py)."""
    args, said = script_ab_args(info.path, runs_root)
    if args is None:
        return refused(said, "A/B refused")
    return Start(args, Path(args[2]).stem, Notice(f"starting {said}…", timeout=5))


def ab_overrides(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The toggles an A/B keeps: all but the precision, which its variants set."""
    return {k: v for k, v in overrides.items() if k not in PRECISION_KEYS}


@dataclass(frozen=True)
class AbEstimate:
    """How long the A/B of `preset` with `overrides` would take (`amptui ab --estimate`: one step of
    each variant timed in a child amptui, for torch): `found` its JSON line, or `error`."""

    preset: presetmod.Preset
    overrides: dict[str, Any]
    runs_root: Path
    found: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def refusal(self) -> Notice | None:
        return refused(self.error or "no estimate", "A/B refused") if self.error or not self.found else None

    @property
    def long(self) -> bool:
        """Long enough to confirm first, in a dialog that offers fewer steps (no estimate: advice only)."""
        return not self.found.get("error") and self.found.get("high_s", 0) > LONG_AB_S

    def start(self, shorter: bool = False) -> Start:
        """The A/B to start: as asked, or `shorter` (the estimate's fewer steps per variant)."""
        if shorter:
            steps = int(self.found.get("shorter_steps", 10))
            overrides, said = {**self.overrides, "run.max_steps": steps}, f"shorter: {steps} steps per variant"
        else:
            overrides, said = self.overrides, f"estimate: {self.found.get('words', '')}"
        args = detached.amptui_args("ab", preset_ref(self.preset), overrides, "--runs-dir", str(self.runs_root))
        return Start(args, self.preset.name, Notice(f"starting the A/B of {self.preset.name}… ({said})", timeout=6))


def estimate_ab(preset: presetmod.Preset, overrides: dict[str, Any], runs_root: Path) -> AbEstimate:
    """Time one step of each variant (blocks: in a thread worker)."""
    args = detached.amptui_args("ab", preset_ref(preset), overrides, "--runs-dir", str(runs_root),
                                "--estimate", "--format", "json")
    found, error = detached.ask([a for a in args if a != detached.DETACH], "estimate")
    return AbEstimate(preset, overrides, runs_root, found or {}, error)


@dataclass(frozen=True)
class TuneAsk:
    """A tune of `name` to start once the user gave its budget (TuneStartModal, which shows `kept`,
    the toggles the tune keeps, and `hint`); `args` without the budget."""

    name: str
    kept: dict[str, Any]
    args: list[str]
    hint: str = ""
    said: Notice | None = None

    def start(self, minutes: float) -> Start:
        at = self.args.index("--") if "--" in self.args else len(self.args)  # before a script's own arguments
        return Start([*self.args[:at], "--budget", f"{minutes:g}", *self.args[at:]], self.name, self.said)


def tune_ask(preset: presetmod.Preset, overrides: Mapping[str, Any], runs_root: Path) -> TuneAsk:
    """`amptui tune --detach` on the preset and toggles; toggles of what the tune searches (precision,
    compile, batch size) are left to the search."""
    kept = {k: v for k, v in overrides.items() if k not in T.KEY_DIMENSIONS}
    return TuneAsk(preset.name, kept, detached.amptui_args("tune", preset_ref(preset), kept, "--runs-dir",
                                                           str(runs_root), "--format", "json"))


def script_tune_ask(info: RunInfo, runs_root: Path) -> TuneAsk | Notice:
    """t on a script run: `amptui tune --script FILE --detach -- ARGS`, with the arguments it recorded."""
    args, said = script_ab_args(info.path, runs_root, "tune", "--format", "json")
    if args is None:
        return refused(said, "Tune refused")
    return TuneAsk(Path(args[2]).stem, {}, args, "Each trial is the script's whole run with its recorded arguments, "
                   "with AMP applied by amptui (fp32 as written, bf16, fp16+scaler, ...), one after another, in "
                   "the background.", Notice(f"starting {said}…", timeout=5))


@dataclass(frozen=True)
class AbEnded:
    """An A/B started here has ended: what to say, and its runs to compare (two or more)."""

    group_id: str
    notice: Notice
    compare: list[Path]


def ended_abs(watched: set[str], groups: Iterable[groupmod.Group], runs: dict[str, RunInfo],
              runs_root: Path) -> list[AbEnded]:
    """The A/Bs among `watched` (their group ids) that have ended, as the CLI says it: what failed,
    by variant name; the compare table of what did run, failed variants included."""
    out = []
    for group in groups:
        if group.group_id not in watched:
            continue
        ended = group.state in ("done", "failed", "stopped") and \
            all(runs.get(r) and runs[r].status != "running" for r in group.runs)
        state, error = group.state, group.error
        if state in groupmod.ACTIVE_STATES and not group.active:  # its process is gone, unsaid how
            ended, state = True, "failed"
            error = error or f"the A/B's process is gone (see {group.log})"
        if not ended:
            continue
        if state == "failed":
            title = f"A/B {group.label} failed" if group.runs else f"A/B {group.label} refused"
            notice = refused(error or "the A/B did not start", title)
        elif state == "stopped":
            notice = Notice(f"A/B {group.label} of {group.preset} stopped: {error or 'cancelled'}")
        else:
            notice = Notice(f"A/B {group.label} of {group.preset} finished: comparing its runs")
        dirs = [runs_root / r for r in group.runs]
        out.append(AbEnded(group.group_id, notice, dirs if len(dirs) >= 2 else []))
    return out
