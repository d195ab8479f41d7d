"""Home screen launches: r runs the highlighted preset with its toggles, a starts an A/B of it, t a
tune. Each is `amptui run|ab|tune ... --detach` through jobs.detached.start (torch is imported only
there, never in the dashboard); a run opens its run screen once started, or its refusal shows in
the toggles."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.worker import Worker

from amptui.core.config import presets as presetmod
from amptui.core.config import values as cfgmod
from amptui.core.config.precision import PRECISION_KEYS
from amptui.core.run import runops
from amptui.dashboard.screens.base import DashboardScreen, in_background
from amptui.dashboard.widgets.runtable import RunTable
from amptui.dashboard.widgets.toggles import TogglesPanel
from amptui.jobs import detached
from amptui.jobs.ab import LONG_AB_S
from amptui.tune import plan as T

if TYPE_CHECKING:  # to the type checker the mixin is the screen it is part of; at run time it adds no base
    _Screen = DashboardScreen
else:
    _Screen = object

LAUNCH_GROUP = "home-launch"  # runs and resumes: one start at a time


def preset_ref(preset: presetmod.Preset) -> str:
    """How a child `amptui` is told the preset: a built-in by name, any other by its file."""
    return preset.name if preset.builtin else str(preset.path)


class LaunchActions(_Screen):
    # what it reads and sets on the home screen (HomeScreen.__init__ sets them)
    preset: presetmod.Preset | None  # the highlighted preset
    _launching: bool  # a run or resume is starting (cleared by _launched, or when its worker fails)
    _watched_groups: set[str]  # A/Bs started here: compare opens when they end

    if TYPE_CHECKING:  # the home screen's own
        def refresh_runs(self) -> None: ...
        def _current_values(self) -> cfgmod.Config | None: ...

    def _launch_preset(self, refused: str) -> presetmod.Preset | None:
        """The preset to launch, or None with a notice titled `refused` saying why nothing can be
        launched now (before any process starts)."""
        preset = self.preset
        problem = self.no_preset_reason() if preset is None else runops.runs_folder_problem(self.app.runs_root)
        if problem:
            self.notify(problem, title=refused, severity="error", timeout=10)
            return None
        return preset

    def no_preset_reason(self) -> str:
        words = self.query_one(RunTable).filter_words
        if words:
            return f"no preset shown: the filter {' '.join(words)!r} hides them all (/ to change it)"
        return "no preset highlighted"

    def action_run(self) -> None:
        preset = self._launch_preset("Run refused")
        if preset is None:
            return
        if self._launching:
            self.notify("a run is already starting…")
            return
        overrides = self._changed_toggles()
        if overrides is None:
            return
        self._launching = True
        self.notify(f"starting {preset.name}…", timeout=3)
        self._launch(preset, overrides)

    def _changed_toggles(self) -> dict[str, Any] | None:
        """The toggles that differ from the preset (None, with a notice, when one is invalid or the
        machine cannot run them)."""
        if self._current_values() is None:
            return None
        toggles = self.query_one(TogglesPanel)
        problem = toggles.hardware_problem()
        if problem:
            toggles.refresh_summary()
            self.notify(problem, title="Fix the toggles first", severity="error")
            return None
        overrides = {}
        for key, value in toggles.overrides().items():
            if toggles.base.get(key) != value:
                overrides[key] = value
        return overrides

    def action_ab(self) -> None:
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
        self.notify(f"A/B of {preset.name}: timing one step of each variant to say how long it takes…", timeout=6)
        # not one-at-a-time: a second `a` goes on too, and `amptui ab` refuses a second A/B of the preset
        self.run_worker(lambda: self._estimate_ab(preset, overrides), thread=True, group="home-ab-estimate",
                        exclusive=False, exit_on_error=False, name="estimating the A/B")

    def _estimate_ab(self, preset: presetmod.Preset, overrides: dict[str, Any]) -> None:
        args = detached.amptui_args("ab", preset_ref(preset), overrides, "--runs-dir", str(self.app.runs_root),
                                    "--estimate", "--format", "json")
        found, error = detached.ask([a for a in args if a != detached.DETACH], "estimate")
        self.app.from_thread(self._ab_estimated, preset, overrides, found, error)

    def _ab_estimated(self, preset: presetmod.Preset, overrides: dict[str, Any], found: dict[str, Any] | None,
                      error: str | None) -> None:
        if error or not found:
            self.notify(error or "no estimate", title="A/B refused", severity="error", timeout=10)
            return
        if found.get("error") or found.get("high_s", 0) <= LONG_AB_S:  # no estimate: advice, not a refusal
            self._start_ab(preset, overrides, f"estimate: {found.get('words', '')}")
            return
        from amptui.dashboard.screens.ab_start import AbStartModal

        def answered(answer: str | None) -> None:
            if answer == "shorter":
                steps = int(found.get("shorter_steps", 10))
                self._start_ab(preset, {**overrides, "run.max_steps": steps}, f"shorter: {steps} steps per variant")
            elif answer == "start":
                self._start_ab(preset, overrides, f"estimate: {found.get('words', '')}")

        self.app.push_screen(AbStartModal(preset.name, found), answered)

    def _start_ab(self, preset: presetmod.Preset, overrides: dict[str, Any], said: str) -> None:
        args = detached.amptui_args("ab", preset_ref(preset), overrides, "--runs-dir", str(self.app.runs_root))
        self.notify(f"starting the A/B of {preset.name}… ({said})", timeout=6)
        # Not one-at-a-time here: a second A/B of the same preset is refused by `amptui ab` itself.
        name = preset.name
        self.run_worker(lambda: self._start_ab_now(name, args), thread=True, group="home-ab",
                        exclusive=False, exit_on_error=False, name="starting the A/B")

    def _script_ab(self) -> bool:
        from amptui.dashboard.widgets.runtable import RunTable
        from amptui.jobs.ab import script_ab_args

        table = self.focused
        if not isinstance(table, RunTable):
            return False
        info = table.runs.get(table.highlighted_run() or "")
        if info is None or not any(ref.startswith("run.script") for ref in info.code):
            return False
        args, said = script_ab_args(info.path, Path(self.app.runs_root))
        if args is None:
            self.notify(said, title="A/B refused", severity="error", timeout=10)
            return True
        self.notify(f"starting {said}…", timeout=5)
        name = Path(args[2]).stem
        self.run_worker(lambda: self._start_ab_now(name, args), thread=True, group="home-ab",
                        exclusive=False, exit_on_error=False, name="starting the A/B")
        return True

    def _start_ab_now(self, preset_name: str, args: list[str]) -> None:
        started, error = detached.start(args)
        self.app.from_thread(self._ab_started, preset_name, started, error)

    def _ab_started(self, preset_name: str, started: dict[str, Any] | None, error: str | None) -> None:
        if error or not started:
            self.notify(error or "the A/B did not start", title="A/B refused", severity="error", timeout=10)
            return
        self._watched_groups.add(started["group_id"])
        label = started.get("label", "")
        self.notify(f"A/B {label} of {preset_name} started: its precision variants run one after "
                    f"another, marked {label} in Runs; the compare screen opens when the last ends",
                    timeout=10)
        self.set_timer(2.0, self.refresh_runs)

    def action_tune(self) -> None:
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
        from amptui.dashboard.screens.tune_start import TuneStartModal

        def budget_given(minutes: float | None) -> None:  # first the budget (tune --budget), then the search
            if minutes is None:
                return  # "tuning … for up to N min" comes from the tune screen once the search is under way
            self._start_tune(detached.amptui_args("tune", preset_ref(preset), kept, "--runs-dir",
                                                  str(self.app.runs_root), "--format", "json",
                                                  "--budget", f"{minutes:g}"), preset.name)

        self.app.push_screen(TuneStartModal(preset.name, kept), budget_given)

    def _script_tune(self) -> bool:
        from amptui.dashboard.screens.tune_start import TuneStartModal
        from amptui.dashboard.widgets.runtable import RunTable
        from amptui.jobs.ab import script_ab_args

        table = self.focused
        info = table.runs.get(table.highlighted_run() or "") if isinstance(table, RunTable) else None
        if info is None or not any(ref.startswith("run.script") for ref in info.code):
            return False
        args, said = script_ab_args(info.path, Path(self.app.runs_root), "tune", "--format", "json")
        if args is None:
            self.notify(said, title="Tune refused", severity="error", timeout=10)
            return True
        name = Path(args[2]).stem

        def budget_given(minutes: float | None) -> None:
            if minutes is not None and args is not None:
                self.notify(f"starting {said}…", timeout=5)
                self._start_tune([*args[:6], "--budget", f"{minutes:g}", *args[6:]], name)

        self.app.push_screen(TuneStartModal(name, {}, "Each trial is the script's whole run with its recorded arguments, "
                                            "with AMP applied by amptui (fp32 as written, bf16, fp16+scaler, ...), "
                                            "one after another, in the background."), budget_given)
        return True

    @in_background("home-tune", "starting the tune")
    def _start_tune(self, args: list[str], preset_name: str) -> None:
        started, error = detached.start(args)
        self.app.from_thread(self._tune_started, started, error, preset_name)

    def _tune_started(self, started: dict[str, Any] | None, error: str | None, preset_name: str = "") -> None:
        if error or not started:
            self.notify(f"could not start the tune: {error}", severity="error", timeout=10)
            return
        from amptui.dashboard.screens.tune import TuneScreen

        self.app.push_screen(TuneScreen(Path(started["result"]), Path(started["log"]), preset_name, announce=True))

    @in_background(LAUNCH_GROUP, "starting the run")
    def _launch(self, preset: presetmod.Preset, overrides: dict[str, Any]) -> None:
        """`amptui run PRESET --set ... --detach`: the same detached trainer the CLI starts."""
        self._child(detached.amptui_args("run", preset_ref(preset), overrides, "--runs-dir", str(self.app.runs_root)))

    def _child(self, args: list[str]) -> None:
        """Run `amptui ARGS` (a detached start) and open the run it started, or show why it was refused."""
        started, error = detached.start(args)
        self.app.from_thread(self._launched, args[0], started["run_id"] if started else None, error)

    def _launched(self, verb: str, run_id: str | None, error: str | None) -> None:
        self._launching = False
        if error or not run_id:
            error = error or "the run did not start"
            self.notify(error, title=f"{verb.capitalize()} refused", severity="error", timeout=10)
            if verb == "run":
                self.query_one(TogglesPanel).show_refusal(f"run refused: {error}")
            return
        self.refresh_runs()
        self.app.open_run(Path(self.app.runs_root) / run_id)

    def action_script(self) -> None:
        """Run a script by path with its arguments (`amptui run --script PATH --detach -- ARGS`)."""
        from amptui.dashboard.screens.script_modal import ScriptModal

        problem = runops.runs_folder_problem(self.app.runs_root)
        if problem:
            self.notify(problem, title="Script refused", severity="error", timeout=10)
            return

        def chosen(words: list[str] | None) -> None:
            if not words or self._launching:
                return
            self._launching = True
            self.notify(f"starting {words[0]}…", timeout=3)
            self._launch_script(["run", "--script", words[0], detached.DETACH, "--runs-dir",
                                 str(self.app.runs_root), "--", *words[1:]])

        self.app.push_screen(ScriptModal(), chosen)

    @in_background(LAUNCH_GROUP, "starting the script")
    def _launch_script(self, args: list[str]) -> None:
        self._child(args)

    def worker_failed(self, worker: Worker) -> None:
        if worker.group == LAUNCH_GROUP:
            self._launching = False  # its reply (_launched) never comes: r and R work again
