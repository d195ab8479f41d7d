"""`amptui plan`'s table: one row per linear, largest share of the step's FLOPs first, each
recipe's lowest SQNR in dB (fp16: its range headroom in bits), the best predicted speed-up, the
choice; then each choice's reason and the whole step's prediction."""

from __future__ import annotations

from typing import Any

from amptui.core.planning.plan import FAMILY, FLOAT8, LayerPlan, Plan

COLUMNS = ("layer", "FLOPs", "M x K x N", "bf16", "fp16", "fp8", "row", "mx", "gain", "choice")
WIDTHS = (16, 5, 13, 5, 5, 5, 5, 5, 5, 11)


def short(n: int) -> str:
    """4096 -> 4k, 1536 -> 1536, 300000 -> 293k: shapes that fit a column."""
    return f"{n // 1024}k" if n >= 4096 and n % 1024 == 0 else (f"{n // 1024}k" if n >= 100_000 else str(n))


def _db(value: Any) -> str:
    return "-" if not isinstance(value, (int, float)) else f"{value:.0f}" if value < 100 else "99+"


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else "…" + text[-(width - 1):]


def row(layer: LayerPlan) -> list[str]:
    fp16 = layer.recipes.get("fp16") or {}
    heads = [fp16.get("headroom_forward"), fp16.get("headroom_grad")]
    headroom = min((h for h in heads if isinstance(h, (int, float))), default=None)
    gains = [g for g in layer.speedup.values() if g is not None]
    share = f"{100 * layer.flops_share:.0f}%" if layer.flops_share is not None else "-"
    return [_fit(layer.name, WIDTHS[0]), share, f"{short(layer.m)}x{short(layer.k)}x{short(layer.n)}",
            _db((layer.recipes.get("bf16") or {}).get("sqnr_db")),
            "-" if headroom is None else f"{headroom:.0f}b",
            *(_db(layer.lowest_sqnr(r)) for r in FLOAT8),
            f"{max(gains):.2f}" if gains else "-", layer.choice]


def cells_line(cells: list[str]) -> str:
    """Layer name and choice left-aligned, the figures right-aligned, no trailing spaces."""
    return "  ".join(c.ljust(w) if i in (0, len(cells) - 1) else c.rjust(w)
                     for i, (c, w) in enumerate(zip(cells, WIDTHS, strict=True))).rstrip()


def as_text(run_id: str, plan: Plan, where: Any = None) -> str:
    lines = [f"plan from run {run_id}: {plan.samples} sampled steps ({', '.join(map(str, plan.steps))})"]
    lines.append(cells_line(list(COLUMNS)))
    lines += [cells_line(row(layer)) for layer in sorted(plan.layers, key=lambda x: -(x.flops_share or 0))]
    lines.append("")
    lines.append("bf16/fp8/row(wise)/mx(fp8): lowest SQNR in dB against float32 (output, grad input, grad "
                 f"weight); fp16: range headroom in bits to 65,504; gain: the best {FAMILY} recipe's predicted "
                 f"speed-up of the linear's three GEMMs over bf16 on {plan.device.name}")
    lines += [f"{x.name}: {x.reason}" for x in plan.layers]
    lines.append("")
    lines.append(summary(plan, where))
    return "\n".join(lines)


def summary(plan: Plan, where: Any = None) -> str:
    converted = len(plan.float8_layers)
    text = f"{converted} of {len(plan.layers)} linears in {FAMILY}"
    if plan.predicted_speedup is not None and plan.gemm_speedup is not None:
        text += (f"; predicted on {plan.device.name}: the step {plan.predicted_speedup:.2f}x as fast as all-bf16 "
                 f"(the linears' GEMMs {plan.gemm_speedup:.2f}x")
        text += ", the rest of the step unchanged)" if plan.step_flops else "; the step's other work not counted)"
    if plan.risk:
        text += (f"; risk: lowest kept SQNR {plan.risk['lowest_sqnr_db']:.1f} dB ({plan.risk['layer']}, "
                 f"{plan.risk['recipe']})")
    if plan.too_small:
        text += "; too small to gain: " + ", ".join(plan.too_small)
    device = where.get("type") if isinstance(where, dict) else None
    if not getattr(plan.device, "measured", False):
        text += (f". Speed-ups are predictions for the {plan.device.name} from its roofline (no overlap, no "
                 "launch cost)" + (f", numerics measured on this CPU ({FAMILY} emulated: the rounding is real)"
                                   if device == "cpu" else "") + ".")
    return text
