"""Home screen launches: r runs the highlighted preset with its toggles, a starts an A/B of it, t a
tune. Each is `amptui run|ab|tune ... --detach` through jobs.detached.start (torch is imported only
there, never in the dashboard); a run opens its run screen once started, or its refusal shows in
the toggles. HomeLaunches is the home screen's part that starts them (and resumes, R); its workers
are the screen's, so a failed one is said as any of the screen's."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

from textual.worker import Worker

from amptui.core.config import presets as presetmod
from amptui.core.config.precision import PRECISION_KEYS
from amptui.core.run import runops
from amptui.core.run.runs import RunInfo
from amptui.dashboard.screens.base import DashboardScreen
from amptui.dashboard.screens.home.presets import HomePresets, toggle_values
from amptui.dashboard.widgets.runtable import RunTable
from amptui.dashboard.widgets.toggles import TogglesPanel
from amptui.jobs import detached
from amptui.jobs import groups as groupmod
from amptui.jobs.ab import LONG_AB_S
from amptui.tune import plan as T

LAUNCH_GROUP = "home-launch"  # runs and resumes: one start at a time


def preset_ref(preset: presetmod.Preset) -> str:
    """How a child `amptui` is told the preset: a built-in by name, any other by its file."""
    return preset.name if preset.builtin else str(preset.path)


class HomeLaunches:
    """r, a, t, e and R of `screen`, the home screen: the preset and toggles come from `presets`;
    `refresh_runs` reads the run list again once something started."""

    def __init__(self, screen: DashboardScreen, presets: HomePresets, refresh_runs: Callable[[], None]) -> None:
        self.screen = screen
        self.presets = presets
        self.refresh_runs = refresh_runs
        self.launching = False  # a run or resume is starting (cleared by _launched, or when its worker fails)
        self._watched_groups: set[str] = set()  # A/Bs started here: compare opens when they end

    def _in_background(self, group: str, name: str, work: Callable[..., None], *args: Any) -> None:
        """`work(*args)` in a thread worker of the screen, one at a time per `group` (as in_background)."""
        self.screen.run_worker(partial(work, *args), thread=True, exclusive=True, exit_on_error=False,
                               group=group, name=name)

    def _launch_preset(self, refused: str) -> presetmod.Preset | None:
        """The preset to launch, or None with a notice titled `refused` saying why nothing can be
        launched now (before any process starts)."""
        preset = self.presets.preset
        problem = self.no_preset_reason() if preset is None else runops.runs_folder_problem(self.screen.app.runs_root)
        if problem:
            self.screen.notify(problem, title=refused, severity="error", timeout=10)
            return None
        return preset

    def no_preset_reason(self) -> str:
        words = self.screen.query_one(RunTable).filter_words
        if words:
            return f"no preset shown: the filter {' '.join(words)!r} hides them all (/ to change it)"
        return "no preset highlighted"

    def run(self) -> None:
        preset = self._launch_preset("Run refused")
        if preset is None:
            return
        if self.launching:
            self.screen.notify("a run is already starting…")
            return
        overrides = self._changed_toggles()
        if overrides is None:
            return
        self.launching = True
        self.screen.notify(f"starting {preset.name}…", timeout=3)
        self._launch(preset, overrides)

    def _changed_toggles(self) -> dict[str, Any] | None:
        """The toggles that differ from the preset (None, with a notice, when one is invalid or the
        machine cannot run them)."""
        if toggle_values(self.screen) is None:
            return None
        toggles = self.screen.query_one(TogglesPanel)
        problem = toggles.hardware_problem()
        if problem:
            toggles.refresh_summary()
            self.screen.notify(problem, title="Fix the toggles first", severity="error")
            return None
        overrides = {}
        for key, value in toggles.overrides().items():
            if toggles.base.get(key) != value:
                overrides[key] = value
        return overrides

    def ab(self) -> None:
        """An A/B of the highlighted preset and toggles: one run per precision variant (the device's
        default variants), one after another, in the background, as one group in Runs; the compare
        screen opens on them when the last one ends. With a script run highlighted in Runs (the
        table focused): the A/B of that script, with the arguments its run recorded (jobs/ab.py)."""
        if self._script_ab():
            return
        preset = self._launch_preset("A/B refused")
        if preset is None:
            return
        overrides = self._changed_toggles()
        if overrides is None:
            return
        overrides = {k: v for k, v in overrides.items() if k not in PRECISION_KEYS}
        # First how long it would take (one step of each variant timed, in a child amptui: torch):
        # a long one is confirmed in a dialog that offers fewer steps.
        self.screen.notify(f"A/B of {preset.name}: timing one step of each variant to say how long it takes…", timeout=6)
        # not one-at-a-time: a second `a` goes on too, and `amptui ab` refuses a second A/B of the preset
        self.screen.run_worker(lambda: self._estimate_ab(preset, overrides), thread=True, group="home-ab-estimate",
                        exclusive=False, exit_on_error=False, name="estimating the A/B")

    def _estimate_ab(self, preset: presetmod.Preset, overrides: dict[str, Any]) -> None:
        args = detached.amptui_args("ab", preset_ref(preset), overrides, "--runs-dir", str(self.screen.app.runs_root),
                                    "--estimate", "--format", "json")
        found, error = detached.ask([a for a in args if a != detached.DETACH], "estimate")
        self.screen.app.from_thread(self._ab_estimated, preset, overrides, found, error)

    def _ab_estimated(self, preset: presetmod.Preset, overrides: dict[str, Any], found: dict[str, Any] | None,
                      error: str | None) -> None:
        if error or not found:
            self.screen.notify(error or "no estimate", title="A/B refused", severity="error", timeout=10)
            return
        if found.get("error") or found.get("high_s", 0) <= LONG_AB_S:  # no estimate: advice, not a refusal
            self._start_ab(preset, overrides, f"estimate: {found.get('words', '')}")
            return
        from amptui.dashboard.screens.ab.start import AbStartModal

        def answered(answer: str | None) -> None:
            if answer == "shorter":
                steps = int(found.get("shorter_steps", 10))
                self._start_ab(preset, {**overrides, "run.max_steps": steps}, f"shorter: {steps} steps per variant")
            elif answer == "start":
                self._start_ab(preset, overrides, f"estimate: {found.get('words', '')}")

        self.screen.app.push_screen(AbStartModal(preset.name, found), answered)

    def _start_ab(self, preset: presetmod.Preset, overrides: dict[str, Any], said: str) -> None:
        args = detached.amptui_args("ab", preset_ref(preset), overrides, "--runs-dir", str(self.screen.app.runs_root))
        self.screen.notify(f"starting the A/B of {preset.name}… ({said})", timeout=6)
        # Not one-at-a-time here: a second A/B of the same preset is refused by `amptui ab` itself.
        name = preset.name
        self.screen.run_worker(lambda: self._start_ab_now(name, args), thread=True, group="home-ab",
                        exclusive=False, exit_on_error=False, name="starting the A/B")

    def _script_ab(self) -> bool:
        from amptui.dashboard.widgets.runtable import RunTable
        from amptui.jobs.ab import script_ab_args

        table = self.screen.focused
        if not isinstance(table, RunTable):
            return False
        info = table.runs.get(table.highlighted_run() or "")
        if info is None or not any(ref.startswith("run.script") for ref in info.code):
            return False
        args, said = script_ab_args(info.path, Path(self.screen.app.runs_root))
        if args is None:
            self.screen.notify(said, title="A/B refused", severity="error", timeout=10)
            return True
        self.screen.notify(f"starting {said}…", timeout=5)
        name = Path(args[2]).stem
        self.screen.run_worker(lambda: self._start_ab_now(name, args), thread=True, group="home-ab",
                        exclusive=False, exit_on_error=False, name="starting the A/B")
        return True

    def _start_ab_now(self, preset_name: str, args: list[str]) -> None:
        started, error = detached.start(args)
        self.screen.app.from_thread(self._ab_started, preset_name, started, error)

    def _ab_started(self, preset_name: str, started: dict[str, Any] | None, error: str | None) -> None:
        if error or not started:
            self.screen.notify(error or "the A/B did not start", title="A/B refused", severity="error", timeout=10)
            return
        self._watched_groups.add(started["group_id"])
        label = started.get("label", "")
        self.screen.notify(f"A/B {label} of {preset_name} started: its precision variants run one after "
                    f"another, marked {label} in Runs; the compare screen opens when the last ends",
                    timeout=10)
        self.screen.set_timer(2.0, self.refresh_runs)

    def tune(self) -> None:
        """`amptui tune --detach` on the highlighted preset and toggles; its screen opens once started.
        Toggles of what the tune searches (precision, compile, batch size) are left to the search.
        With a script run highlighted in Runs: `amptui tune --script FILE --detach -- ARGS` (as `a`)."""
        if self._script_tune():
            return
        preset = self._launch_preset("Tune refused")
        overrides = self._changed_toggles() if preset is not None else None
        if preset is None or overrides is None:
            return
        kept = {k: v for k, v in overrides.items() if k not in T.KEY_DIMENSIONS}
        from amptui.dashboard.screens.tune.start import TuneStartModal

        def budget_given(minutes: float | None) -> None:  # first the budget (tune --budget), then the search
            if minutes is None:
                return  # "tuning … for up to N min" comes from the tune screen once the search is under way
            self._start_tune(detached.amptui_args("tune", preset_ref(preset), kept, "--runs-dir",
                                                  str(self.screen.app.runs_root), "--format", "json",
                                                  "--budget", f"{minutes:g}"), preset.name)

        self.screen.app.push_screen(TuneStartModal(preset.name, kept), budget_given)

    def _script_tune(self) -> bool:
        from amptui.dashboard.screens.tune.start import TuneStartModal
        from amptui.jobs.ab import script_ab_args

        table = self.screen.focused
        info = table.runs.get(table.highlighted_run() or "") if isinstance(table, RunTable) else None
        if info is None or not any(ref.startswith("run.script") for ref in info.code):
            return False
        args, said = script_ab_args(info.path, Path(self.screen.app.runs_root), "tune", "--format", "json")
        if args is None:
            self.screen.notify(said, title="Tune refused", severity="error", timeout=10)
            return True
        name = Path(args[2]).stem

        def budget_given(minutes: float | None) -> None:
            if minutes is not None and args is not None:
                self.screen.notify(f"starting {said}…", timeout=5)
                self._start_tune([*args[:6], "--budget", f"{minutes:g}", *args[6:]], name)

        self.screen.app.push_screen(TuneStartModal(name, {}, "Each trial is the script's whole run with its recorded "
                                                   "arguments, with AMP applied by amptui (fp32 as written, bf16, "
                                                   "fp16+scaler, ...), one after another, in the background."),
                                    budget_given)
        return True

    def _start_tune(self, args: list[str], preset_name: str) -> None:
        self._in_background("home-tune", "starting the tune", self._start_tune_now, args, preset_name)

    def _start_tune_now(self, args: list[str], preset_name: str) -> None:
        started, error = detached.start(args)
        self.screen.app.from_thread(self._tune_started, started, error, preset_name)

    def _tune_started(self, started: dict[str, Any] | None, error: str | None, preset_name: str = "") -> None:
        if error or not started:
            self.screen.notify(f"could not start the tune: {error}", severity="error", timeout=10)
            return
        from amptui.dashboard.screens.tune.screen import TuneScreen

        self.screen.app.push_screen(TuneScreen(Path(started["result"]), Path(started["log"]), preset_name, announce=True))

    def _launch(self, preset: presetmod.Preset, overrides: dict[str, Any]) -> None:
        """`amptui run PRESET --set ... --detach`: the same detached trainer the CLI starts."""
        self._in_background(LAUNCH_GROUP, "starting the run", self._child,
                            detached.amptui_args("run", preset_ref(preset), overrides, "--runs-dir",
                                                 str(self.screen.app.runs_root)))

    def _child(self, args: list[str]) -> None:
        """Run `amptui ARGS` (a detached start) and open the run it started, or show why it was refused."""
        started, error = detached.start(args)
        self.screen.app.from_thread(self._launched, args[0], started["run_id"] if started else None, error,
                                    started["notes"] if started else [])

    def _launched(self, verb: str, run_id: str | None, error: str | None, notes: list[str] | None = None) -> None:
        self.launching = False
        for note in notes or []:  # the CLI's `note:` lines (automatic precision's fallback, a CPU-only torch)
            self.screen.notify(note, title="Note", timeout=20)
        if error or not run_id:
            error = error or "the run did not start"
            self.screen.notify(error, title=f"{verb.capitalize()} refused", severity="error", timeout=10)
            if verb == "run":
                self.screen.query_one(TogglesPanel).show_refusal(f"run refused: {error}")
            return
        self.refresh_runs()
        self.screen.app.open_run(Path(self.screen.app.runs_root) / run_id)

    def script(self) -> None:
        """Run a script by path with its arguments (`amptui run --script PATH --detach -- ARGS`)."""
        from amptui.dashboard.screens.script_modal import ScriptModal

        problem = runops.runs_folder_problem(self.screen.app.runs_root)
        if problem:
            self.screen.notify(problem, title="Script refused", severity="error", timeout=10)
            return

        def chosen(words: list[str] | None) -> None:
            if not words or self.launching:
                return
            self.launching = True
            self.screen.notify(f"starting {words[0]}…", timeout=3)
            self._in_background(LAUNCH_GROUP, "starting the script", self._child,
                                ["run", "--script", words[0], detached.DETACH, "--runs-dir",
                                 str(self.screen.app.runs_root), "--", *words[1:]])

        self.screen.app.push_screen(ScriptModal(), chosen)

    def resume(self, run_id: str, flags: list[str]) -> None:
        """`amptui resume RUN_ID --detach`: startchecks.check_resumable (which needs torch, so not in this
        process) and launch.start(resume=True), as the CLI does. `flags`: --trust-code once the
        user said yes to the code the run names (core/trust.py)."""
        if self.launching:
            return
        self.launching = True
        self.screen.notify(f"resuming {run_id}…", timeout=3)
        self._in_background(LAUNCH_GROUP, "resuming the run", self._child,
                            ["resume", run_id, detached.DETACH, *flags, "--runs-dir", str(self.screen.app.runs_root)])

    def groups_ended(self, groups: Iterable[groupmod.Group], runs: dict[str, RunInfo]) -> None:
        """An A/B started here that has ended opens the compare screen on its runs."""
        for group in groups:
            if group.group_id not in self._watched_groups:
                continue
            ended = group.state in ("done", "failed", "stopped") and \
                all(runs.get(r) and runs[r].status != "running" for r in group.runs)
            if group.state in groupmod.ACTIVE_STATES and not group.active:  # its process is gone, unsaid how
                ended, group.state = True, "failed"
                group.error = group.error or f"the A/B's process is gone (see {group.log})"
            if not ended:
                continue
            self._watched_groups.discard(group.group_id)
            dirs = [self.screen.app.runs_root / r for r in group.runs]
            if group.state == "failed":  # as `amptui ab` says it: what failed, by variant name
                title = f"A/B {group.label} failed" if group.runs else f"A/B {group.label} refused"
                self.screen.notify(group.error or "the A/B did not start", title=title, severity="error", timeout=10)
            elif group.state == "stopped":
                self.screen.notify(f"A/B {group.label} of {group.preset} stopped: {group.error or 'cancelled'}")
            else:
                self.screen.notify(f"A/B {group.label} of {group.preset} finished: comparing its runs")
            if len(dirs) >= 2:  # the table of what did run, failed variants included (as the CLI prints it)
                self.screen.app.open_compare(dirs)

    def worker_failed(self, worker: Worker) -> None:
        if worker.group == LAUNCH_GROUP:
            self.launching = False  # its reply (_launched) never comes: r and R work again
