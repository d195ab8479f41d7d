"""Runs a tune: each trial is a real run of the normal trainer (core.launch, its own run folder),
one after another, within a time budget; Ctrl-C stops the running trial and the search, and the
result still says what was measured. The plan adapts as numbers come in:

    1. precision: fp32 (the reference), bf16, fp16+scaler; then fp32 again with another seed
       (the accuracy guard's noise band and the timing noise)
    2. knobs on the best accurate precision: torch.compile, then the batch size doubled until it
       runs out of memory, stops paying, or the budget ends

Above core: it asks torch what this machine can do (bfloat16, fp8, the GPU's name).
"""

from __future__ import annotations

import contextlib
import os
import signal
import statistics
import threading
import time
from pathlib import Path
from typing import Any, Callable

from amptui.core.config.precision import Precision, wide
from amptui.core.config.presets import Preset
from amptui.core.errors import UserError
from amptui.core.run.runfiles import RunFolder
from amptui.core.run.runs import launch_identity
from amptui.core.stream.events import EventReader
from amptui.core.stream.records import STEP, End, Record, Start, Step
from amptui.jobs import launch, signals
from amptui.tune import partial as P
from amptui.tune import plan as T
from amptui.tune import verdict as V
from amptui.tune.machine_notes import (
    busy_note,
    compiler_missing,
    device_name,
    emulated_reason,
    hardware_note,
    missing_reason,
    tf32_note,
)

DEFAULT_TRIAL_S = 20.0     # first guess of a trial's wall time, before one is measured
COMPILE_EXTRA_S = {"cpu": 150.0, "cuda": 60.0}  # what compilation adds to a trial (measured on a small CNN)
STOP_GRACE_S = 60.0        # a trial asked to stop gets this long to reach a record and end (a busy CPU is slow)
REPORT_RESERVE_S = 20.0    # trials are asked to stop this long before the budget ends ...
KILL_RESERVE_S = 5.0       # ... and killed this long before it, if they have not stopped
BUDGET_STOP = "the budget ran out"
STOPPING = "stopping… the running trial ends at its next record (Ctrl-C again kills it); then the table of what was measured"


class Search:
    planned: tuple[str, ...] = T.PRECISIONS  # the precisions the plan tries after fp32 (what a stopped search still lacks)

    def __init__(self, preset: Preset | None, overrides: dict[str, Any], dims: set[str], budget_s: float, root: Path,
                 tid: str, device_type: str, say: Callable[[str], None] = print, t0: float | None = None,
                 name: str = ""):
        self.preset, self.overrides, self.dims = preset, overrides, dims
        self.name = name or (preset.name if preset else "script")
        self.root, self.tid, self.device_type, self.say = Path(root), tid, device_type, say
        self.t0 = time.monotonic() if t0 is None else t0  # the budget counts from the command's start
        self.deadline = self.t0 + budget_s
        self.trials: list[T.Trial] = []
        self.interrupted = False
        self.stop_said = False  # "stopping…" was said
        self.reference_tf32: Any = None  # the fp32 reference's start record's tf32 (machine/tf32.py)
        self.path = T.result_path(self.root, tid)
        self.result: dict[str, Any] = {
            "tune_id": tid, "preset": self.name,
            "preset_ref": "" if preset is None else preset.name if preset.builtin else str(preset.path),
            "overrides": overrides, "device_type": device_type, "device_name": device_name(device_type),
            "budget_s": budget_s, "started": time.time(), **launch_identity(os.getpid()), "status": "running",
            "always_on": T.ALWAYS_ON, "trials": []}

    # --- the plan ---------------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        made = not os.path.lexists(self.root)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self._write()
        except OSError as exc:  # a full disk before the first trial: one line, nothing left behind
            if made:
                with contextlib.suppress(OSError):
                    self.root.rmdir()
            raise UserError(f"cannot start tune {self.result['tune_id']} in {self.root}: "
                            f"{exc.strerror or exc}") from None
        previous = self._watch_ctrl_c()
        try:
            try:
                self._plan()
            except KeyboardInterrupt:
                self.interrupted = True
            return self.finish()
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)

    def _watch_ctrl_c(self):
        """Say "stopping…" the moment Ctrl-C (or the dashboard's q, a SIGINT) comes, wherever the
        search is (starting a trial, between trials, following one), then stop as before."""
        if threading.current_thread() is not threading.main_thread():
            return None

        def on_sigint(signum, frame):
            self.say_stopping()
            raise KeyboardInterrupt

        return signal.signal(signal.SIGINT, on_sigint)

    def say_stopping(self) -> None:
        if not self.stop_said:
            self.stop_said = True
            self.say(STOPPING)

    def _plan(self) -> None:
        first = [T.precision_candidate("fp32")]
        if "precision" in self.dims:
            self.planned = T.precisions()  # asked now: the modes registered when the search starts
            first += [T.precision_candidate(name) for name in self.planned]
        else:
            own = Precision.from_config(self.preset_config(), self.device_type).short
            if own != "fp32":
                first.append(T.Candidate(own, {}))
        # fp32, the most promising other precision, fp32 again (the noise band), the long shots
        fp32 = self.trial(first[0])
        for i, cand in enumerate(first[1:]):
            reason = self.cannot_apply(cand)
            if reason:
                self.skip(cand, reason)
            else:
                self.trial(cand)
            if i == 0 and fp32.measured:
                self.trial(T.Candidate("fp32 seed 2", dict(fp32.knobs), "band"))
        if len(first) == 1 and fp32.measured:
            self.trial(T.Candidate("fp32 seed 2", dict(fp32.knobs), "band"))
        if "precision" in self.dims:
            self.try_last()
        base = self.best()
        if "compile" in self.dims and base is not None and not self.stopped:
            cand = T.derived(T.Candidate(base.candidate, dict(base.knobs)), compile_=True)
            reason = compiler_missing(self.device_type) or self.budget_short(COMPILE_EXTRA_S[self.device_type])
            if reason:
                self.skip(cand, reason)
            else:
                self.trial(cand)
                base = self.best()
        if "batch" in self.dims and base is not None:
            self.grow_batch(base)

    def try_last(self) -> None:
        """The mode tried last (`tune_last`: torchao's fp8-rowwise, torchtitan's accurate recipe),
        compiled where compile works (it is slow uncompiled). Where the hardware has no GEMM of its
        kind it is emulated: judged on accuracy only, as its speed says nothing."""
        cand = T.precision_candidate(T.FLOAT8_CANDIDATE)
        mode = Precision.from_variant(T.FLOAT8_CANDIDATE).mode
        reason = missing_reason(mode)
        if reason:
            self.skip(cand, reason)
            return
        emulated = emulated_reason(mode, self.device_type)
        if not emulated and not compiler_missing(self.device_type):
            cand = T.derived(cand, compile_=True)
        if emulated:
            cand.accuracy_only = emulated
        t = self.trial(cand)
        t.accuracy_only = cand.accuracy_only

    def grow_batch(self, base: T.Trial) -> None:
        batch = base.knobs.get("data.batch_size") or self.preset_config().data.batch_size
        previous = base
        for _ in range(T.BATCH_DOUBLINGS):
            if self.stopped:
                return
            batch *= 2
            cand = T.derived(T.Candidate(base.candidate, dict(base.knobs)), batch=batch)
            t = self.trial(cand)
            if t.status in ("oom", "failed", "skipped") or not t.measured:
                return
            rate, rate_before = V.rate(t), V.rate(previous)
            if not (rate and rate_before and rate > (1 + T.MIN_GAIN) * rate_before):
                return  # no longer paying off: a larger batch only costs memory
            previous = t

    def best(self) -> T.Trial | None:
        """The setup ahead among what has been measured (fp32 when nothing beats it); no trial is
        called WINNER before the search has ended (the result file is read while it runs)."""
        return V.leading(self.trials)

    # --- one trial --------------------------------------------------------------------------------

    @property
    def stopped(self) -> bool:
        return self.interrupted or time.monotonic() >= self.deadline - REPORT_RESERVE_S

    def cannot_apply(self, cand: T.Candidate) -> str:
        if wide(str(cand.knobs.get("amp.dtype"))) and self.device_type == "cuda":  # bfloat16: Ampere's
            import torch

            if not torch.cuda.is_bf16_supported(including_emulation=False):
                return "this GPU has no native bfloat16 (compute capability 8.0+ needed)"
        return ""

    def budget_short(self, extra_s: float = 0.0) -> str:
        walls = [t.wall_s for t in self.trials if t.wall_s]
        need = (statistics.median(walls) if walls else DEFAULT_TRIAL_S) + extra_s
        left = self.deadline - REPORT_RESERVE_S - time.monotonic()
        if need > left:
            return f"budget: about {need:.0f} s needed, {max(0.0, left):.0f} s left"
        return ""

    def skip(self, cand: T.Candidate, reason: str) -> T.Trial:
        t = T.Trial(cand.name, cand.knobs, cand.role, status="skipped", reason=reason)
        self.trials.append(t)
        self.say(f"  {cand.name:<22} skipped: {reason}")
        self.save()
        return t

    def trial(self, cand: T.Candidate) -> T.Trial:
        if self.stopped:
            return self.skip(cand, "interrupted" if self.interrupted else "budget: the time is up")
        short = self.budget_short()
        if short:
            return self.skip(cand, short)
        k = len([t for t in self.trials if t.run_id]) + 1
        try:
            run_dir = self.create(cand, k)
        except UserError as exc:
            return self.skip(cand, str(exc))
        t = T.Trial(cand.name, cand.knobs, cand.role, run_id=run_dir.name, status="running",
                    accuracy_only=cand.accuracy_only)
        self.trials.append(t)
        self.save()
        self.say(f"  {cand.name:<22} running ({run_dir.name})")
        started = time.monotonic()
        records = self.follow(t, run_dir, self.start(run_dir))
        t.wall_s = time.monotonic() - started
        T.measure(t, records)
        if cand.role == "reference":  # did the fp32 baseline use TF32? (its start record says)
            self.reference_tf32 = next((r.tf32 for r in records if isinstance(r, Start)), None)
        if t.status == "running":
            t.status, t.reason = "killed", t.reason or "ended without an end record"
        self.say(f"  {cand.name:<22} {t.status}" + (f": {t.ms_per_step:.1f} ms/step" if t.measured else "")
                 + (f", {t.samples_per_s:.0f} samples/s" if t.samples_per_s else "")
                 + (f" ({t.reason})" if t.reason else ""))
        self.save()
        return t

    def preset_config(self):
        assert self.preset is not None  # a preset's plan (a script's search has its own: tune/scriptsearch.py)
        return self.preset.config(self.overrides)

    def create(self, cand: T.Candidate, k: int) -> Path:
        """The k-th trial's run folder (UserError: it cannot run here, a skip)."""
        assert self.preset is not None
        overrides = {**self.overrides, **cand.knobs, **T.trial_overrides(self.preset.name, self.tid, k)}
        if cand.role == "band":
            overrides["run.seed"] = self.preset_config().run.seed + 1
        run_dir, _ = launch.create_run(self.preset, overrides, self.root)
        return run_dir

    def start(self, run_dir: Path):
        return launch.start(run_dir)

    def follow(self, t: T.Trial, run_dir: Path, proc) -> list[Record]:
        """Read the trial's events until it ends; ask it to stop when it can no longer win, the
        budget ends or the user presses Ctrl-C; kill it if it does not stop in time."""
        reader = EventReader(RunFolder(run_dir).events)
        records: list[Record] = []
        stop_sent = None
        while True:
            try:
                records += reader.read()
                if any(isinstance(r, End) for r in records) or proc.poll() is not None:
                    records += reader.read()
                    break
                now = time.monotonic()
                if stop_sent is None:
                    reason = self.stop_reason(t, records)
                    if reason:
                        t.reason = reason
                        launch.request_stop(run_dir)
                        stop_sent = now
                elif now - stop_sent > STOP_GRACE_S or (now > self.deadline - KILL_RESERVE_S
                                                       and t.reason == BUDGET_STOP):
                    self.kill_trial(proc)
                    t.reason += "; killed: it did not stop in time"
                    break
                time.sleep(0.2)
            except KeyboardInterrupt:
                if self.interrupted or stop_sent is not None and t.reason == "interrupted":
                    self.kill_trial(proc)  # a second Ctrl-C: do not wait
                    t.reason = "interrupted; killed"
                    break
                self.interrupted = True
                self.say_stopping()
                t.reason = "interrupted"
                launch.request_stop(run_dir)
                stop_sent = time.monotonic()
        try:
            proc.wait(timeout=10)
        except Exception:
            pass
        return records

    def stop_reason(self, t: T.Trial, records: list[Record]) -> str:
        if time.monotonic() >= self.deadline - REPORT_RESERVE_S:
            return BUDGET_STOP
        ref = next((x for x in self.trials if x.role == "reference" and x.measured), None)
        if ref is None or t.role != "candidate" or t.accuracy_only:  # fp32's own runs are the yardstick; an
            return ""                                                 # an emulated trial is judged on its loss
        steps = [r for r in records if isinstance(r, Step)]
        skip = T.warmup_windows(t.knobs)
        for r in steps[skip:]:
            rate = r.get(STEP.samples_per_s) or (1000.0 / r[STEP.step_time_ms] if r.get(STEP.step_time_ms) else None)
            if rate and V.rate(ref) and rate * T.SLOW_FACTOR < V.rate(ref):
                return f"stopped early: over {T.SLOW_FACTOR:g}x slower than fp32, it cannot win"
        return ""

    @staticmethod
    def kill_trial(proc) -> None:
        signals.kill_child_session(proc)  # the trial runs in a session of its own

    # --- the result -------------------------------------------------------------------------------

    def save(self) -> None:
        try:
            self._write()
        except OSError as exc:  # a full disk, a quota (atomic: the last result written stays whole)
            raise UserError(f"tune {self.result['tune_id']}: cannot write {self.path}: {exc.strerror or exc}") from None

    def _write(self) -> None:
        self.result["trials"] = T.as_dicts(self.trials)
        T.write_result(self.path, self.result)

    def finish(self) -> dict[str, Any]:
        ending = P.conclude(self.trials, self.interrupted, self.dims, self.device_type, hardware_note(self.device_type),
                            planned=self.planned)
        ending["explanation"] += busy_note(self.device_type) + tf32_note(self.reference_tf32)
        self.result.update(ending, finished=time.time(), elapsed_s=time.monotonic() - self.t0)
        self.save()
        return self.result
