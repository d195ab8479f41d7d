"""Home screen launches: r runs the highlighted preset with its toggles, a starts an A/B of it, t a
tune. Each starts `amptui` as a detached process (torch is imported only there, never in the
dashboard); a run opens its run screen once started, or its refusal shows in the toggles."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.worker import Worker

from ...core import ab as abmod
from ...core import presets as presetmod
from ...core import runops
from ...core.errors import UserError
from ...core.precision import PRECISION_KEYS
from ...core.runops import toml_value
from ..launcher import amptui_detached
from ..widgets.toggles import TogglesPanel
from .base import in_background

LAUNCH_GROUP = "home-launch"  # runs and resumes: one start at a time


def amptui_args(sub: str, preset: presetmod.Preset, overrides: dict[str, Any], *extra: str) -> list[str]:
    """`SUB PRESET EXTRA --set ...`: the arguments of `amptui` for a child process."""
    ref = preset.name if preset.builtin else str(preset.path)
    command = [sub, ref, *extra]
    for key, value in overrides.items():
        command += ["--set", f"{key}={toml_value(value)}"]
    return command


class LaunchActions:
    _launching: bool  # a run or resume is starting (cleared by _launched, or when its worker fails)

    def _launch_problem(self) -> str | None:
        """Why nothing can be launched now (before any process starts)."""
        if self.preset is None:
            return "no preset highlighted"
        return runops.runs_folder_problem(self.app.runs_root)

    def action_run(self) -> None:
        problem = self._launch_problem()
        if problem:
            self.notify(problem, title="Run refused", severity="error", timeout=10)
            return
        if self._launching:
            self.notify("a run is already starting…")
            return
        overrides = self._changed_toggles()
        if overrides is None:
            return
        self._launching = True
        self.notify(f"starting {self.preset.name}…", timeout=3)
        self._launch(self.preset, overrides)

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
        screen opens on them when the last one ends."""
        problem = self._launch_problem()
        if problem:
            self.notify(problem, title="A/B refused", severity="error", timeout=10)
            return
        overrides = self._changed_toggles()
        if overrides is None:
            return
        overrides = {k: v for k, v in overrides.items() if k not in PRECISION_KEYS}
        ref = self.preset.name if self.preset.builtin else str(self.preset.path)
        try:
            group = abmod.start_group(self.app.runs_root, ref, self.preset.name, overrides)
        except (UserError, OSError) as exc:
            self.notify(str(exc), title="A/B refused", severity="error", timeout=10)
            return
        self._watched_groups.add(group.group_id)
        self.notify(f"A/B {group.label} of {self.preset.name} started: its precision variants run one after "
                    f"another, marked {group.label} in Runs; the compare screen opens when the last ends",
                    timeout=10)
        self.set_timer(2.0, self.refresh_runs)

    def action_tune(self) -> None:
        """`amptui tune` on the highlighted preset and toggles, in the background (screens/tune.py)."""
        overrides = self._changed_toggles() if self.preset is not None else None
        if overrides is not None:
            from .tune import launch_tune

            launch_tune(self, self.preset, overrides)

    @in_background(LAUNCH_GROUP, "starting the run")
    def _launch(self, preset: presetmod.Preset, overrides: dict[str, Any]) -> None:
        """`amptui run PRESET --set ... --detach`: the same detached trainer the CLI starts."""
        self._child(amptui_args("run", preset, overrides, "--detach", "--runs-dir", str(self.app.runs_root)))

    def _child(self, args: list[str]) -> None:
        """Run `amptui ARGS` (a detached start) and open the run it prints, or show why it was refused."""
        run_id, error = amptui_detached(args)
        self.app.from_thread(self._launched, args[0], run_id, error)

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

    def worker_failed(self, worker: Worker) -> None:
        if worker.group == LAUNCH_GROUP:
            self._launching = False  # its reply (_launched) never comes: r and R work again
