"""`amptui ab`'s variants: one preset, several precision setups, everything else identical.
(The A/B itself, its loop and its group, is in jobs/ab.py and jobs/groups.py.)"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from amptui.core.config.dtypes import FULL_DTYPE
from amptui.core.config.precision import (
    DTYPES,
    PRECISION_KEYS,
    TF32,
    Precision,
    auto_dtype,
    fsdp_variant_names,
    grouped_variants,
    variant_names,
)
from amptui.core.errors import UserError


class _Variants(Mapping[str, dict[str, object]]):
    """Variant name -> its amp.* overrides ("fp32", "bf16", "fp16+scaler", ...), made from
    `precision.DTYPES` when read: nothing else differs between the runs of an A/B."""

    def __getitem__(self, name: str) -> dict[str, object]:
        if name not in known_variants():
            raise KeyError(name)
        return Precision.from_variant(name).overrides()

    def __iter__(self) -> Iterator[str]:
        return iter(variant_names())

    def __len__(self) -> int:
        return len(variant_names())


VARIANTS: Mapping[str, dict[str, object]] = _Variants()


RAN_AS_FP32 = ": ran as fp32"


def chosen_label(name: str, seen: str) -> str:
    """A run of `amptui ab --script --variant NAME='ARGS'` (config run.variant) as the tables name it:
    "--variant bf16", or "--variant bf16: ran as fp32" where NAME is a reduced precision and the run's
    precision `seen` (its short name) is float32's: the script's own flag did nothing."""
    try:
        meant = Precision.from_variant(name)
    except ValueError:  # a name of the user's own ("fast", "baseline"): nothing to hold it to
        return f"--variant {name}"
    return f"--variant {name}" + (RAN_AS_FP32 if meant.autocast and seen == FULL_DTYPE.short else "")


def known_variants() -> list[str]:
    """Every name --variants takes: the plain ones, then each group's (the FSDP policies', torchao's recipes)."""
    return variant_names() + [n for _, names in grouped_variants() for n in names]


def default_variants(device_type: str) -> list[str]:
    """fp32 (the reference) and the device's "auto" dtype; for a dtype that needs a GradScaler also
    without it (what the scaler buys): fp32,fp16,fp16+scaler on CUDA, fp32,bf16 on a CPU."""
    auto = DTYPES[auto_dtype(device_type)]
    return ["fp32", auto.short] + ([auto.short + "+scaler"] if auto.needs_scaler else [])


def expand(spec: str | None, device_type: str, dist_mode: str | None = None) -> list[tuple[str, dict[str, object]]]:
    """"fp32,bf16" -> [(name, overrides), ...]; None means the default for the device. `dist_mode`
    (the preset's with --set): a "+reduce" variant is refused unless it is "fsdp"."""
    if spec is None:
        names = default_variants(device_type)
    else:
        names = [n.strip() for n in spec.split(",") if n.strip()]
    known = known_variants()  # the "+reduce" ones: dist.mode = "fsdp" only
    if not names:
        raise UserError("--variants: name at least one of " + ", ".join(known))
    unknown = [n for n in names if n not in known and not n.startswith(PLAN_PREFIX)]
    if unknown:
        raise UserError(f"--variants: unknown {', '.join(unknown)} (known: {', '.join(known)})")
    if len(set(names)) != len(names):
        raise UserError("--variants: each variant once")
    if TF32 in names and device_type != "cuda":
        raise UserError(f"--variants {TF32}: TF32 runs float32 matmuls on CUDA tensor cores (Ampere or later); "
                        f"on the {device_type.upper()} float32 has no TF32 mode, so drop {TF32} from --variants")
    _check_reduce_variants(names, dist_mode)
    planned = {n: plan_overrides(n) for n in names if n.startswith(PLAN_PREFIX)}
    for n in names:
        if n in planned:
            continue
        missing = Precision.from_variant(n).mode.missing()
        if missing:
            raise UserError(f"--variants {n}: {missing}")
    # Next to tf32, fp32 means IEEE float32 (torch's default leaves cuDNN convolutions on TF32).
    strict = {"amp.tf32": False} if TF32 in names else {}
    if planned:  # beside a plan, every other variant is the model as a whole: no [amp.layers] of the preset's
        return [(n, planned[n] if n in planned else {**VARIANTS[n], "amp.layers": {}}) for n in names]
    return [(n, {**VARIANTS[n], **(strict if n == "fp32" else {})}) for n in names]


PLAN_PREFIX = "plan:"  # `--variants bf16,plan:NAME`: the [amp.layers] of saved preset NAME (`amptui plan --save NAME`)


def plan_overrides(name: str) -> dict[str, object]:
    """A `plan:NAME` variant: bf16 autocast with the per-layer precision saved in preset NAME."""
    from amptui.core.config import presets

    preset = presets.find_preset(name[len(PLAN_PREFIX):])
    table = dict(preset.config().amp.layers)
    if not table:
        raise UserError(f"--variants {name}: preset {preset.name!r} has no [amp.layers]; make one with "
                        f"`amptui plan PRESET --for GPU --save {preset.name}`")
    return {**VARIANTS["bf16"], "amp.layers": table}


def _check_reduce_variants(names: list[str], dist_mode: str | None) -> None:
    """A "+reduce" variant is an FSDP policy (gradients reduced in the compute dtype): say so in the
    user's words (the variant, not the amp.reduce_dtype key it sets, which they never wrote)."""
    reducing = [n for n in names if n in fsdp_variant_names()]
    if reducing and dist_mode is not None and dist_mode != "fsdp":
        raise UserError(f"--variants {', '.join(reducing)}: reducing gradients in the compute dtype is an FSDP "
                        f"policy, and this run is dist.mode = \"{dist_mode}\"; add --set dist.mode=fsdp "
                        "(with --set dist.nproc_per_node=N), or drop the +reduce variant")


def check_overrides(overrides: dict[str, object]) -> None:
    """--set may not decide what the variants decide."""
    clash = sorted(k for k in overrides if k in PRECISION_KEYS)
    if clash:
        raise UserError(f"--set {', '.join(clash)}: the variants set the precision; choose them with --variants")


def variants_help() -> str:
    """Every name --variants takes, for `amptui ab --help`: read from the precision modes, so a new
    mode's variants are listed the day it is added."""
    said = ", ".join(variant_names())
    for needs, names in grouped_variants():
        said += f"; {needs} also {', '.join(names)}"
    return said
