"""`amptui plan`'s planner: from a run's `plan_sample` records (telemetry/plan_probe.py) and a
device's roofline (core/planning/roofline.py), a precision per linear with its reason, the step's predicted
speed-up and the predicted risk. Standard library only.

The rules (docs/numerics.md#plan), in order, per linear:
1. A candidate recipe (a variant of a mode plan weighs, `PrecisionMode.planned`: torchao's fp8
   ones) is a candidate where it ran on this linear and the device has its GEMM.
2. It is numerically safe when its lowest SQNR over the sampled steps (output, grad input, grad
   weight) is at least `Rules.sqnr_floor_db`; for the first and the last linear (in execution
   order: the embedding side and the head) `Rules.edge_margin_db` more ("kept unless measured safe").
3. It gains when the roofline predicts its three GEMMs at least `Rules.min_speedup` times as fast
   as in bf16; below that the linear is too small to gain.
4. The safe, gaining candidate with the highest predicted speed-up wins (the higher SQNR on a tie).
5. Otherwise bf16 where its SQNR is at least `Rules.bf16_floor_db`, else fp32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from amptui.core.modes import MODES
from amptui.core.planning import roofline

PLANNED = [m for m in MODES if m.planned]  # the modes whose variants plan weighs per linear
FAMILY = " or ".join(m.name for m in PLANNED)  # their name in plan's words ("3 of 9 linears in ...")
FLOAT8 = tuple(v for m in PLANNED for v in m.variants())  # the candidates: "fp8", "fp8-rowwise", "mxfp8"
RECIPES = ("bf16", "fp16", *FLOAT8)               # every recipe a layer's figures name
ROOF_KEY = {"fp8": "fp8", "fp8-rowwise": "fp8", "mxfp8": "mxfp8", "bf16": "bf16", "fp32": "fp32"}
SQNR_FIELDS = ("sqnr_db", "grad_input_sqnr_db", "grad_weight_sqnr_db")
TIE = 0.02  # predicted speed-ups closer than this are a tie


@dataclass(frozen=True)
class Rules:
    sqnr_floor_db: float = 20.0   # a candidate recipe's lowest SQNR (output and both gradients) at least this
    edge_margin_db: float = 5.0   # and this much more for the first and the last linear
    min_speedup: float = 1.05     # a candidate recipe must be predicted at least this much faster than bf16
    bf16_floor_db: float = 30.0   # below this bf16 SQNR a linear stays in fp32


@dataclass
class LayerPlan:
    name: str
    order: int
    m: int
    k: int
    n: int
    calls: int
    recipes: dict[str, dict[str, Any]]
    flops: float = 0.0
    flops_share: float | None = None
    speedup: dict[str, float | None] = field(default_factory=dict)
    choice: str = "bf16"
    reason: str = ""

    def lowest_sqnr(self, recipe: str) -> float | None:
        """The recipe's lowest SQNR on this linear (output and gradients); None when not measured."""
        figures = self.recipes.get(recipe) or {}
        values = [figures[f] for f in SQNR_FIELDS if isinstance(figures.get(f), (int, float))]
        return min(values) if values else None


@dataclass
class Plan:
    device: Any                    # roofline.DeviceRoof
    layers: list[LayerPlan]
    rules: Rules
    samples: int
    steps: list[int]
    step_flops: float | None       # the step's FLOPs when the run counted them (amptui's trainer)
    gemm_speedup: float | None = None
    predicted_speedup: float | None = None
    risk: dict[str, Any] | None = None
    too_small: list[str] = field(default_factory=list)

    @property
    def float8_layers(self) -> list[LayerPlan]:
        return [x for x in self.layers if x.choice in FLOAT8]


def merge_samples(records: Iterable[Mapping[str, Any]]) -> tuple[list[LayerPlan], list[int]]:
    """Each linear's figures over the sampled steps, the worst of each: the lowest SQNR and
    headroom, the highest error and underflow; its shape from its largest sampled call."""
    layers: dict[str, LayerPlan] = {}
    steps: list[int] = []
    for record in records:
        steps.append(int(record.get("step") or 0))
        for raw in record.get("layers") or []:
            if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
                continue
            name = raw["name"]
            figures = {r: raw[r] for r in RECIPES if isinstance(raw.get(r), dict)}
            if name not in layers:
                layers[name] = LayerPlan(name, int(raw.get("order", len(layers))), int(raw.get("m", 0)),
                                         int(raw.get("k", 0)), int(raw.get("n", 0)), int(raw.get("calls", 1)), figures)
                continue
            layer = layers[name]
            layer.m, layer.calls = max(layer.m, int(raw.get("m", 0))), max(layer.calls, int(raw.get("calls", 1)))
            layer.recipes = {r: worst(layer.recipes.get(r), figures.get(r)) for r in RECIPES}
    return sorted(layers.values(), key=lambda x: x.order), steps


def worst(a: Any, b: Any, key: str = "") -> Any:
    """The worse of two samples' figures, field by field (dicts recursively)."""
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: worst(a.get(k), b.get(k), k) for k in {**a, **b}}
    if isinstance(a, bool) or not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return a if a == b else b
    higher_is_worse = key in ("rel_error", "input", "weight", "grad_output")  # errors and underflow shares
    return max(a, b) if higher_is_worse else min(a, b)


def layer_seconds(roof: Any, layer: LayerPlan, recipe: str) -> float:
    """The linear's three GEMMs (forward, grad input, grad weight) in `recipe` on `roof`, per step."""
    return layer.calls * sum(roofline.gemm_seconds(roof, m, k, n, ROOF_KEY[recipe])
                             for _, m, k, n in roofline.layer_gemms(layer.m, layer.k, layer.n))


def has_gemm(roof: Any, recipe: str) -> bool:
    return ROOF_KEY[recipe] in roof.peak_tflops


def make_plan(records: Iterable[Mapping[str, Any]], roof: Any, *, step_flops: float | None = None,
              rules: Rules | None = None) -> Plan:
    rules = rules or Rules()
    layers, steps = merge_samples(records)
    plan = Plan(roof, layers, rules, len(steps), steps, step_flops)
    if not layers:
        return plan
    linear_flops = 0.0
    for layer in layers:
        layer.flops = layer.calls * sum(roofline.gemm_flops(m, k, n) for _, m, k, n in
                                        roofline.layer_gemms(layer.m, layer.k, layer.n))
        linear_flops += layer.flops
    whole = step_flops if step_flops and step_flops >= linear_flops else linear_flops
    last = max(x.order for x in layers)
    for layer in layers:
        layer.flops_share = layer.flops / whole if whole else None
        base = layer_seconds(roof, layer, "bf16")
        layer.speedup = {r: (base / layer_seconds(roof, layer, r) if has_gemm(roof, r) else None) for r in FLOAT8}
        choose(layer, rules, roof.name, edge=layer.order in (0, last))
        gains = [s for s in layer.speedup.values() if s is not None]
        if gains and max(gains) < rules.min_speedup:
            plan.too_small.append(layer.name)
    predict(plan, linear_flops / whole if whole else 1.0)
    return plan


def choose(layer: LayerPlan, rules: Rules, device: str, edge: bool) -> None:
    """The layer's choice and reason, by the rules of the module doc."""
    floor = rules.sqnr_floor_db + (rules.edge_margin_db if edge else 0.0)
    safe, unsafe, slow, absent = [], [], [], []
    for recipe in FLOAT8:
        figures = layer.recipes.get(recipe) or {}
        lowest = layer.lowest_sqnr(recipe)
        gain = layer.speedup.get(recipe)
        if gain is None:
            absent.append(recipe)
        elif not figures.get("runs") or lowest is None:
            absent.append(f"{recipe} ({figures.get('why', 'not measured')})")
        elif lowest < floor:
            unsafe.append(f"{recipe} {lowest:.1f} dB")
        elif gain < rules.min_speedup:
            slow.append(f"{recipe} {gain:.2f}x")
        else:
            safe.append((gain, lowest, recipe))
    if safe:
        best = max(g for g, _, _ in safe)
        gain, lowest, recipe = max((s for s in safe if s[0] >= best * (1 - TIE)), key=lambda s: (s[1], s[0]))
        layer.choice = recipe
        layer.reason = (f"{recipe}: {gain:.2f}x its GEMMs' bf16 time on {device}, lowest SQNR {lowest:.1f} dB "
                        f">= {floor:g} dB" + (" (first/last linear, measured safe)" if edge else ""))
        return
    bf16 = (layer.recipes.get("bf16") or {}).get("sqnr_db")
    layer.choice = "bf16" if bf16 is None or bf16 >= rules.bf16_floor_db else "fp32"
    why = []
    if unsafe:
        why.append(f"{FAMILY} under the {floor:g} dB SQNR floor" + (" for a first/last linear" if edge else "")
                   + f" ({', '.join(unsafe)})")
    if slow:
        why.append(f"too small to gain on {device} ({', '.join(slow)}; needs {rules.min_speedup:g}x)")
    if absent and not (unsafe or slow):
        why.append(f"no {FAMILY} recipe runs here (" + ", ".join(absent) + ")")
    if layer.choice == "fp32":
        why.append(f"bf16 SQNR {bf16:.1f} dB under {rules.bf16_floor_db:g} dB")
    layer.reason = f"{layer.choice}: " + "; ".join(why or ["kept"])


def predict(plan: Plan, linear_share: float) -> None:
    """The linears' GEMM speed-up against all-bf16, the step's (by Amdahl over the linears' share
    of the step's FLOPs, the rest assumed unchanged), and the risk: the lowest kept SQNR."""
    base = sum(layer_seconds(plan.device, x, "bf16") for x in plan.layers)
    chosen = sum(layer_seconds(plan.device, x, x.choice if x.choice in FLOAT8 else "bf16") for x in plan.layers)
    if base <= 0 or chosen <= 0:
        return
    plan.gemm_speedup = base / chosen
    plan.predicted_speedup = 1.0 / ((1.0 - linear_share) + linear_share / plan.gemm_speedup)
    kept: list[tuple[float, LayerPlan]] = []
    for x in plan.layers:
        value = x.lowest_sqnr(x.choice) if x.choice in FLOAT8 else (x.recipes.get("bf16") or {}).get("sqnr_db")
        if x.choice != "fp32" and isinstance(value, (int, float)):
            kept.append((float(value), x))
    if kept:
        value, layer = min(kept, key=lambda item: item[0])
        plan.risk = {"lowest_sqnr_db": value, "layer": layer.name, "recipe": layer.choice}


def as_json(plan: Plan) -> dict[str, Any]:
    roof = plan.device
    return {
        "device": {"name": roof.name, "source": roof.source, "measured": bool(getattr(roof, "measured", False))},
        "samples": plan.samples, "steps": plan.steps,
        "rules": vars(plan.rules),
        "layers": [{"name": x.name, "shape": {"m": x.m, "k": x.k, "n": x.n}, "calls": x.calls,
                    "gemms": [{"gemm": g, "m": m, "k": k, "n": n} for g, m, k, n in roofline.layer_gemms(x.m, x.k, x.n)],
                    "flops_share": _r(x.flops_share),
                    "recipes": {r: {**(x.recipes.get(r) or {}),
                                    **({"predicted_speedup": _r(x.speedup.get(r))} if r in FLOAT8 else {})}
                                for r in RECIPES},
                    "choice": x.choice, "reason": x.reason}
                   for x in plan.layers],
        "too_small": plan.too_small,
        "gemm_speedup": _r(plan.gemm_speedup),
        "predicted_speedup": _r(plan.predicted_speedup),
        "risk": plan.risk,
        "float8_layers": len(plan.float8_layers),
    }


def layer_table(plan: Plan) -> dict[str, str]:
    """The plan as `[amp.layers]`: each linear's exact name (glob characters escaped) -> its variant."""
    return {escape(x.name): x.choice for x in plan.layers}


def escape(name: str) -> str:
    """A module name as an fnmatch pattern matching only itself."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


def _r(value: float | None) -> float | None:
    return round(value, 4) if isinstance(value, float) and math.isfinite(value) else value


PLAN_FILE = "plan.json"  # `amptui plan` leaves its JSON in the run folder it sampled: the dashboard's plan screen
PLAN_FILE_LIMIT = 4 * 1024 * 1024


def latest_plan(root: Any, preset: str) -> dict[str, Any] | None:
    """The newest plan made of `preset` in the runs folder `root`, or None."""
    from amptui.core.run import runs

    for info in runs.list_runs(root):
        if info.preset == preset and (doc := read_plan(info.path)) is not None:
            return doc
    return None


def plan_for_run(root: Any, run_dir: Any, preset: str) -> dict[str, Any] | None:
    """The run screen's plan: the run's own (it is an `amptui plan` run), else its preset's newest."""
    return read_plan(run_dir) or (latest_plan(root, preset) if preset else None)


def read_plan(run_dir: Any) -> dict[str, Any] | None:
    """A run folder's plan.json (a bounded read of a regular file inside it), or None."""
    from amptui.core.safefile import load_json

    try:
        doc = load_json(Path(run_dir) / PLAN_FILE, PLAN_FILE_LIMIT, within=Path(run_dir))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("layers"), list) else None
