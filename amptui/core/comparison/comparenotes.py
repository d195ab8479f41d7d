"""What `amptui compare` and the dashboard's compare screen say under the table: warnings when the
runs differ in more than precision (so a speed-up is not AMP's alone), the fp32 baseline's TF32, the
narrowest range headroom, what per-rank memory measured, and how the figures were measured."""

from __future__ import annotations

from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from amptui.core import distribution, hygiene, modes
from amptui.core.comparison.comparestep import common_step, load_differs, never_stepped, noisy_note, stopped_early
from amptui.core.comparison.tf32note import baseline_line
from amptui.core.comparison.whyamp import why_lines
from amptui.core.config.precision import PRECISION_KEYS, Precision, precision_or_unseen
from amptui.core.config.scriptview import APPLIED_BY, SCALER_KEYS
from amptui.core.config.variants import RAN_AS_FP32, chosen_label
from amptui.core.inputbound import notice
from amptui.core.numerics import LayerStats, downstream_words, fmt_bits, nonfinite_text, some_names
from amptui.core.rankmemory import note as rank_memory_note
from amptui.core.scriptcode import changed_files
from amptui.core.stream.records import START
from amptui.core.tunenames import source_preset

if TYPE_CHECKING:
    from amptui.core.comparison.runsummary import RunSummary

TIMING_NOTE = ("speed-up = steady-state samples/s of training steps against the first run (evaluation, "
               "checkpoints, start-up and the first 10% of steps left out), ± the two runs' spread of step time "
               "from one timed window to the next (or a control's, the first run's setup run again), \"same speed\" within "
               "it when it is within ±10%; memory saving = 1 - peak / first run's peak (\"same\" inside the peaks' "
               "run-to-run spread); data wait = share of step time spent waiting for the next batch")


def variant_label(s: RunSummary) -> str:
    """The `ab --script --variant NAME` a run ran as (config run.variant) as its A/B named it, "" for others."""
    name = s.flat_config.get("run.variant")
    return chosen_label(str(name), s.precision.short if s.precision is not None else "") if name else ""


def variant_notes(summaries: list[RunSummary]) -> list[str]:
    """A `--variant bf16` whose run was float32: the script's own flag did nothing on this device."""
    return [f"warning: {label} (the script's own flag did nothing here: amptui's hooks saw no autocast)"
            for s in summaries if (label := variant_label(s)).endswith(RAN_AS_FP32)]


def short_precision(said: str) -> str:
    """A row's precision as `amptui ab` and `runs` name it: "fp16+scaler" for "autocast float16 +
    GradScaler" (UNSEEN when unknown)."""
    applied = said.endswith(APPLIED_BY)  # "autocast bfloat16, applied by amptui" -> "bf16 applied"
    precision = Precision.from_record(said.removesuffix(APPLIED_BY))
    return precision.short + (" applied" if applied else "") if precision is not None else precision_or_unseen(said)


def narrowest_headroom(s: RunSummary) -> str | None:
    """A run's narrowest range headroom in words: "2.4 bits to float16 max in blocks.1.mlp", or where
    inf/NaN came from: "inf/NaN first in blocks.3.mlp.proj (forward, float16 max exceeded: 3.8e5),
    2 later layers downstream of it" (the layers it flowed into are no findings of their own); None
    when it has no range samples. No "; " inside: headroom_note joins the runs with it. A run whose
    first non-finite step was replayed says what that replay found, not what later samples credit
    (once the weights are NaN every step's first layer holds inf/NaN first)."""
    cause = s.cause or {}
    if cause.get("cause") == "precision_overflow" and isinstance(cause.get("module"), str):
        how = "found by sampling the steps after it" if cause.get("sampled") else "found by replaying that step"
        return (f"inf/NaN first in {cause['module']} ({cause.get('where', 'forward')}, past {cause.get('dtype')}'s "
                f"range at step {cause.get('step')}, {how})")
    found = s.numerics.narrowest(1)
    if not found:
        return None
    source = s.numerics.nonfinite_source()
    if source is not None:
        return _inf_source(s, *source)
    broken = [x.name for x in s.numerics.nonfinite_layers()]
    # inf/NaN with no forward finding to say where it began: the layers plainly, in the model's order
    said = (_plain_layers(broken) if broken else
            f"{fmt_bits(found[0].narrowest)} bits to {s.numerics.dtype} max in {found[0].name}")
    first = s.numerics.latest_first()  # e.g. an overflow in backward: a loss scale too high
    return f"{said}, first non-finite: {nonfinite_text(first)}" if first else said


def _plain_layers(names: list[str], shown: int = 3) -> str:
    """"inf/NaN in blocks.3", "inf/NaN in 4 layers (blocks.3, ln_f, head +1)"."""
    if len(names) == 1:
        return f"inf/NaN in {names[0]}"
    return f"inf/NaN in {len(names)} layers ({some_names(names, shown)})"


def _inf_source(s: RunSummary, layer: LayerStats, downstream: list[LayerStats]) -> str:
    first = layer.forward_finding  # the source's own newest finding: never a backward one
    said = f"inf/NaN first in {nonfinite_text(first) if first else layer.name}"
    return f"{said}, {downstream_words(len(downstream))}" if downstream else said


def headroom_words(s: RunSummary) -> str:
    """narrowest_headroom, or why there is none (for a per-run list, where every run needs a line)."""
    return narrowest_headroom(s) or ("no layer sampled" if s.numerics.records else "not sampled (numerics off)")


def headroom_note(summaries: list[RunSummary]) -> str | None:
    """One line: each sampled run's narrowest range headroom (compare's answer to "which layer is
    closest to overflowing, in which precision")."""
    parts = [f"{s.run_id} ({short_precision(s.precision_words)}): {said}"
             for s in summaries if (said := narrowest_headroom(s))]
    return "narrowest range headroom: " + "; ".join(parts) if parts else None


def tf32_baseline_note(summaries: list[RunSummary], name: str | None = None) -> str | None:
    """Whether the fp32 baseline (the first run) used TF32 (core.comparison.tf32note), where that matters;
    `name` stands for its run id (the dashboard says "run 1")."""
    first = summaries[0] if summaries else None
    if first is None or first.precision is None or first.precision.autocast:
        return None
    return baseline_line(name or first.run_id, (first.start or {}).get("tf32"))


def memory_note(summaries: list[RunSummary], brief: bool = False) -> str | None:
    """What the per-rank memory figures measured, when a run ran on several processes (rankmemory.note)."""
    return rank_memory_note([(s.run_id, distribution.dist_label(s.dist), s.ranks) for s in summaries], brief)


# Keys an A/B varies on purpose, and keys that do not change what is trained (amp.autopilot: a precision
# policy; a switch it made shows in the runs' precision segments instead).
_SAME_EXPERIMENT_IGNORES = (*PRECISION_KEYS, "amp.autopilot", "run.apply_amp", "run.variant", "run.name", "run.description", "numerics.every", "numerics.depth",
                            "numerics.trace_nonfinite")  # measuring, not training


def differing_keys(summaries: list[RunSummary]) -> dict[str, list[Any]]:
    """{key: each run's value} for the resolved config keys where the runs differ in anything but
    precision (runs whose config.toml cannot be read are left out). A script run's config.toml
    holds only what its loop was seen to do (core/config/scriptview.py): it is compared on those
    keys alone, and a key it lacks is no difference (its value None: "-"); nor are the GradScaler
    settings of a run that had none."""
    configs = [(s.flat_config, s.config_said) for s in summaries if s.flat_config]
    if len(configs) < 2:
        return {}
    held = [set(c) if said is None else said & c.keys() for c, said in configs]
    for (c, _), keys in zip(configs, held, strict=True):
        if not c.get("amp.grad_scaler"):  # a run without a GradScaler never used its settings
            keys -= {f"amp.{k}" for k in SCALER_KEYS}
    differ = {}
    for key in sorted(set().union(*held) - set(_SAME_EXPERIMENT_IGNORES)):
        values = [c[key] if key in keys else None for (c, _), keys in zip(configs, held, strict=True)]
        said = [v for v, keys in zip(values, held, strict=True) if key in keys]
        if any(v != said[0] for v in said):
            differ[key] = values
    return differ


THREADED_STEPS = "threaded_steps"  # the script hooks' warning code (telemetry/scripthooks/stephooks.py)


def code_note(summaries: list[RunSummary]) -> str | None:
    """When script runs ran different code (the script, or a module it imports from its folder,
    changed between them: a script that edits itself between an A/B's variants): which files, and
    each run's code hash."""
    recorded = [(s.run_id, code) for s in summaries if isinstance(code := (s.start or {}).get(START.code), dict)]
    files = changed_files([code for _, code in recorded])
    if not files:
        return None
    hashes = ", ".join(f"{code.get('sha256')} in {run_id}" for run_id, code in recorded)
    return (f"warning: these runs ran different code: {', '.join(files)} changed between them (code {hashes}); "
            "the table compares different programs, not only precision")


def different_presets(summaries: list[RunSummary]) -> list[str]:
    """The presets the runs were made from when they are several; a tune's trials share the tuned one."""
    presets = list(dict.fromkeys(source_preset(s.preset) for s in summaries if s.preset))
    return presets if len(presets) > 1 else []


def steps_note(summaries: list[RunSummary]) -> str | None:
    """When the runs stopped at different steps: which step the loss column compares them at, and
    which runs stopped early ("stopped at step 10 of 20")."""
    if len({s.step for s in summaries}) < 2:
        return None
    early = [f"{s.run_id} {s.status} before its first step" if never_stepped(s)
             else f"{s.run_id} {s.status} at step {s.step} of {s.total_steps}" for s in summaries if stopped_early(s)]
    return (f"warning: the runs stopped at different steps ({', '.join(str(s.step) for s in summaries)}): the loss "
            f"column compares them at step {common_step(summaries)}, the last step every run reached; final loss "
            "is each run's own last" + (f" ({'; '.join(early)})" if early else ""))


def interleaved_note(summaries: list[RunSummary]) -> str | None:
    """How the speed-up was measured when runs took turns (`ab --interleave`, their start records)."""
    took = [s for s in summaries if (s.start or {}).get(START.interleaved)]
    if not took:
        return None
    which = "" if len(took) == len(summaries) else f" ({', '.join(s.run_id for s in took)} only)"
    return (f"speed-up from windows measured alternately (ab --interleave){which}: the runs took turns one step "
            "record at a time, so a drift of the machine's speed fell on all alike; their total time includes "
            "the turns spent waiting")


def notes(summaries: list[RunSummary], most: int = 6) -> list[str]:
    """Lines to print under the table: warnings first (runs that differ in more than precision,
    so a speed-up is not AMP's alone; runs stopped at different steps), then how the figures are
    measured."""
    lines = []
    steps = steps_note(summaries)
    lines += [steps] if steps else []
    lines += variant_notes(summaries)
    presets = different_presets(summaries)
    if presets:
        lines.append(f"warning: different presets ({', '.join(presets)}): the speed-up and memory saving "
                     "compare different training, not only precision")
    code = code_note(summaries)
    lines += [code] if code else []
    lines += [f"warning: {s.run_id} stepped its optimizers from several threads: its step count, loss per step, "
              "samples/s and speed-up are unreliable (amptui counts a step when every optimizer stepped once)"
              for s in summaries if THREADED_STEPS in s.warning_codes]
    differ = differing_keys(summaries)
    if differ:
        shown = [f"{k} ({' / '.join(_value(v) for v in _short(k, values))})" for k, values in list(differ.items())[:most]]
        more = f" and {len(differ) - most} more" if len(differ) > most else ""
        lines.append("warning: these runs differ in more than precision: " + ", ".join(shown) + more)
    lines += [f"{s.run_id} ({precision_or_unseen(s.precision_words)}): {bound}; its speed-up measures the input pipeline, not AMP"
              for s in summaries if (bound := notice(s.data_wait_share, s.device.get("type")))]
    lines += conversion_notes(summaries)
    lines += hygiene.compare_notes(summaries)
    load = load_differs(summaries)
    lines += [load] if load else []
    noisy = noisy_note(summaries)
    lines += [noisy] if noisy else []
    lines += why_lines(summaries)
    turns = interleaved_note(summaries)
    lines += [turns] if turns else []
    tf32_line = tf32_baseline_note(summaries)
    lines += [tf32_line] if tf32_line else []
    headroom = headroom_note(summaries)
    if headroom:
        lines.append(headroom)
    memory = memory_note(summaries)
    lines += [memory] if memory else []
    lines.append(TIMING_NOTE)
    return lines


def conversion_notes(summaries: list[RunSummary]) -> list[str]:
    """Each run whose precision mode converted its model: what converted, in the mode's words
    (an emulated conversion: that its speed says nothing)."""
    lines = []
    for s in summaries:
        precision = (s.start or {}).get("precision")
        if not isinstance(precision, dict):
            continue
        for mode in modes.MODES:
            if said := mode.conversion_note(precision):
                lines.append(f"{s.run_id} ({precision.get('short', '?')}): {said}")
    return lines


def _short(key: str, values: list[Any]) -> list[Any]:
    """A script by its file name, as the run list names the run (its whole path where two names tie)."""
    if key != "run.script":
        return values
    names = [PurePath(v).name if isinstance(v, str) else v for v in values]
    return names if len(set(names)) == len(set(values)) else values


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return "-" if v is None or v == "" else f"{v:g}" if isinstance(v, float) else str(v)
