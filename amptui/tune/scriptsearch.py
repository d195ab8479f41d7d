"""`amptui tune --script FILE`: the tune's search over the precisions amptui can apply to an
unmodified float32 script (run.apply_amp, telemetry/scripthooks/applyamp.py), as `amptui ab --script
--variants` applies them. Each trial is the script's whole run (its own length and batch size: the
script's loop decides those) with `-- ARGS`; the runner (tune/runner.py) follows and judges them as
a preset's trials.

The plan: the script as written (fp32, the reference), then SCRIPT_PRECISIONS in order, fp32 again
after the first (the timing noise); a precision this machine cannot run fast is skipped with why.
A script that sets its own precision is refused in one line (APPLY_REFUSAL), as `ab --script` does.
"""

from __future__ import annotations

import contextlib
import shlex
from pathlib import Path
from typing import Any, Callable

from amptui.core import modes
from amptui.core.config.modefacts import SCALER_UNNEEDED, RunFacts
from amptui.core.config.precision import Precision, narrow, wide
from amptui.core.config.schema import APPLIED_AMP
from amptui.core.config.scriptsets import APPLY_REFUSAL
from amptui.core.errors import UserError
from amptui.jobs import launch
from amptui.tune import plan as T
from amptui.tune.runner import Search

AS_WRITTEN = "fp32"  # the script as written: its own float32 loop


def script_precisions() -> tuple[str, ...]:
    """What tune --script tries after fp32, in order: the modes' own tune picks that amptui can apply
    to a script (run.apply_amp), then its other applicable variants, wide dtypes first."""
    applied = [v for v in APPLIED_AMP if v]
    first = [v for v in modes.tune_variants() if v in applied]
    return (*first, *sorted((v for v in applied if v not in first), key=lambda v: narrow(Precision.from_variant(v).dtype)))


SCRIPT_PRECISIONS = script_precisions()  # ("bf16", "fp16+scaler", "bf16+scaler", "fp16") with amptui's modes
BF16_SCALER = ("bfloat16 keeps float32's range, so a GradScaler buys it nothing and costs a little each step "
               "(amptui warns about it in a run): bf16 is the same math without it")
OWN_PRECISION = "so amptui applies none on top"  # in the hooks' refusal (applyamp.refuse)


def script_keys(spec: str | None) -> set[str]:
    """--keys with --script: only the precision may vary (a script's own loop decides its batch size
    and whether it compiles); anything else is refused in one line naming it."""
    if spec is None:
        return {"precision"}
    names = [k.strip() for k in spec.split(",") if k.strip()]
    other = [k for k in names if T.KEY_DIMENSIONS.get(k) != "precision"]
    if other or not names:
        raise UserError(f"--keys {', '.join(other) or '(none)'}: not for a script: its own loop decides its batch "
                        "size and compilation; tune --script searches the precision amptui applies to it "
                        "(amp.dtype, amp.grad_scaler)")
    return {"precision"}


def candidate(name: str, role: str = "") -> T.Candidate:
    return T.Candidate(name if role != "band" else "fp32 again", {"run.apply_amp": "" if name == AS_WRITTEN else name},
                       role or ("reference" if name == AS_WRITTEN else "candidate"))


def use_command(script: str, script_args: list[str], variant: str) -> str:
    """The command that runs the script with the winner's precision (as written for fp32)."""
    words = ["amptui", "run", "--script", script]
    if variant:
        words += ["--set", f"run.apply_amp={variant}"]
    return shlex.join(words + (["--", *script_args] if script_args else []))


class ScriptSearch(Search):
    planned = SCRIPT_PRECISIONS

    def __init__(self, script: str, script_args: list[str], overrides: dict[str, Any], budget_s: float, root: Path,
                 tid: str, device_type: str, say: Callable[[str], None] = print, t0: float | None = None):
        super().__init__(None, overrides, {"precision"}, budget_s, root, tid, device_type, say, t0,
                         name=Path(script).stem)
        self.script, self.script_args = script, list(script_args)
        self.result.update(script=script, script_args=self.script_args)
        self.result["always_on"] = {}  # the trainer's speed knobs: a script's loop is its own

    def run(self) -> dict[str, Any]:
        try:
            result = super().run()
        except UserError:  # the script sets its own precision: no search to report (its trial runs stay)
            with contextlib.suppress(OSError):
                self.path.unlink()
            raise
        winner = T.winner_of(result)
        if winner:
            knobs = next(t["knobs"] for t in result["trials"] if t["candidate"] == winner)
            result["use"] = use_command(self.script, self.script_args, str(knobs.get("run.apply_amp") or ""))
            self.save()
        return result

    def _plan(self) -> None:
        fp32 = self.trial(candidate(AS_WRITTEN))
        self.check_own_precision(fp32)
        for i, name in enumerate(SCRIPT_PRECISIONS):
            cand = candidate(name)
            reason = self.cannot_apply(cand) or ("" if fp32.measured else
                                                 f"the script as written measured nothing ({fp32.reason or fp32.status})")
            if reason:
                self.skip(cand, reason)
            else:
                self.check_own_precision(self.trial(cand))
            if i == 0 and fp32.measured:
                self.trial(candidate(AS_WRITTEN, "band"))

    def check_own_precision(self, t: T.Trial) -> None:
        """A script that autocasts or scales itself is refused (APPLY_REFUSAL): seen by the hooks
        under applied AMP (they end it at once), or in what the script as written trained in."""
        if not t.run_id:
            return
        from amptui.core.run import runs

        info = runs.load_run(self.root / t.run_id)
        refused = (info.error or "").partition("SystemExit: ")[2]
        if OWN_PRECISION in refused:
            raise UserError(refused.strip())
        if t.role == "reference" and info.precision not in ("", AS_WRITTEN):
            raise UserError(APPLY_REFUSAL.format(script=self.script, what=info.precision_words))
        if t.role == "reference":  # the device the script put its model on (the hooks saw it), not a guess
            from amptui.core.config import values as cfgmod
            from amptui.core.errors import ConfigError
            from amptui.core.run.runfiles import RunFolder
            from amptui.tune.machine_notes import device_name

            try:
                device = cfgmod.build_config(cfgmod.read_toml(RunFolder(self.root / t.run_id).config)).run.device
            except (ConfigError, OSError):
                device = self.device_type
            if device in ("cpu", "cuda") and device != self.device_type:
                self.device_type = device
                self.result.update(device_type=device, device_name=device_name(device))

    def cannot_apply(self, cand: T.Candidate) -> str:
        """What makes no sense here: bfloat16 on a GPU without it, float16 on a CPU that only emulates
        it (the slow one could never win; fp32 and bf16 are always tried on a CPU), a GradScaler on
        bfloat16 anywhere (BF16_SCALER)."""
        precision = Precision.from_variant(str(cand.knobs["run.apply_amp"]))
        dtype = precision.dtype
        if any(note.code == SCALER_UNNEEDED for note in precision.mode.warnings(precision, RunFacts(script=True))):
            return BF16_SCALER  # the mode's rule, in tune's words
        if self.device_type == "cuda" and wide(dtype):
            return super().cannot_apply(T.Candidate(cand.name, {"amp.dtype": dtype}))
        if self.device_type == "cpu" and narrow(dtype):
            from amptui.machine.dtype_speed import slow_dtypes

            why = slow_dtypes("cpu", dtypes=(dtype,)).get(dtype)
            if why:
                return f"{dtype} is slow on this CPU ({why}): it cannot win"
        return ""

    def create(self, cand: T.Candidate, k: int) -> Path:
        overrides = {"log.every": T.LOG_EVERY, **self.overrides, **cand.knobs, "run.script": self.script,
                     "run.name": T.group_name(self.name, self.tid, k)}
        run_dir, _ = launch.create_run(None, overrides, self.root)
        return run_dir

    def start(self, run_dir: Path):
        return launch.start(run_dir, script_args=self.script_args)
