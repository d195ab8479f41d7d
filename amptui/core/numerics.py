"""Range headroom read back: what the `numerics` records say, for the CLI (`amptui numerics`), the
dashboard's heat map, compare and the alarms; a mode's numerics probe (core/modes/base.py), read
beside the headroom, folds into a `ProbeSeries`. No torch here.

Headroom is log2(max_finite / abs max) in bits: how many doublings a layer's largest value can
take before the dtype's largest finite value (float16: 65,504). Below 0 it has overflowed; a
`nonfinite` layer held inf/NaN on that sample.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from amptui.core.fmt import fmt_scale
from amptui.core.modes import NumericsProbe, probes
from amptui.core.stream.records import Numerics, Readable, as_record

LOW_HEADROOM_BITS = 1.0   # below this a layer is one doubling from overflowing
NARROWEST_SHOWN = 5


def headroom_bits(abs_max: float, max_finite: float) -> float | None:
    """log2(max_finite / abs_max), rounded to 0.01 bit; None for zero or a non-finite value."""
    if not math.isfinite(abs_max) or abs_max <= 0 or max_finite <= 0:
        return None
    return round(math.log2(max_finite / abs_max), 2)


def fmt_value(value: float | None) -> str:
    """6.6e4, 3.1e-5, 12, inf, nan: short, the way the alarm texts say them."""
    if value is None:
        return "?"
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value != 0 and (abs(value) >= 1e4 or abs(value) < 1e-3):
        mantissa, _, exponent = f"{value:.1e}".partition("e")
        return f"{mantissa}e{int(exponent)}"
    return f"{value:.3g}"


def nonfinite_text(first: Mapping[str, Any]) -> str:
    """"encoder.3.ffn.out (forward, float16 max exceeded: 6.6e4)" from a first_nonfinite dict."""
    if first.get("text"):
        return str(first["text"])
    return f"{first.get('module', '?')} ({first.get('where', '?')})"


def describe_nonfinite(module: str, where: str, dtype: str, max_finite: float, value: float | None,
                       scale: float | None = None, seen: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The first_nonfinite dict: module, where (forward|backward), value (a finite number when
    known: the value that crossed the range, measured again in float32), text. `seen`: what a
    replay's check of that call saw (bad/of output values, weights_finite, call/calls, parent, after),
    kept in the dict and said in its `checked` words; nothing is said that was not checked."""
    if value is not None and math.isfinite(value) and abs(value) > max_finite:
        what = f"{dtype} max exceeded: {fmt_value(value)}"
    elif value is not None and math.isfinite(value):
        what = f"inf/NaN inside it; in float32 its abs max is {fmt_value(value)}"
    elif where == "backward" and scale is not None and scale > 1:
        what = f"{dtype} max exceeded at loss scale {fmt_scale(scale)}"  # 2^16, as every scale reads
    elif value is not None and math.isinf(value):
        what = f"{dtype} max exceeded"
    else:  # NaN: an overflow met its opposite (inf - inf) or 0/0; the replay measures which
        what = f"{dtype} inf/NaN"
    finite = value if value is not None and math.isfinite(value) else None
    name, checked = module, ""
    if seen:
        if isinstance(seen.get("calls"), int) and seen["calls"] > 1:  # a reused module: which call, called where
            name += f" (call {seen.get('call')} of {seen['calls']}" + (f", in {seen['parent']}" if seen.get("parent") else "") + ")"
        if isinstance(seen.get("bad"), int) and isinstance(seen.get("of"), int):
            checked = (f"{seen['bad']} of {seen['of']} output values inf/NaN from finite inputs"
                       + (f", in its own code after {seen['after']}" if seen.get("after") else "")
                       + ", its weights " + ("finite" if seen.get("weights_finite") else "holding inf/NaN"))
    return {"module": module, "where": where, "value": finite, "text": f"{name} ({where}, {what})",
            **({k: v for k, v in seen.items() if v is not None} if seen else {}), **({"checked": checked} if checked else {})}


def downstream_words(n: int) -> str:
    """"2 later layers downstream of it": the layers that held a source's inf/NaN after it."""
    return f"{n} later layer{'s' if n != 1 else ''} downstream of it"


def some_names(names: list[str], shown: int = 3) -> str:
    """"blocks.3, ln_f, head +1": the first `shown` names and how many more."""
    return ", ".join(names[:shown]) + (f" +{len(names) - shown}" if len(names) > shown else "")


def layer_headroom(layer: Mapping[str, Any]) -> float | None:
    """A layer's narrowest headroom on one sample (forward or gradient); -inf when its forward
    output held inf/NaN. A gradient that held inf/NaN (on an overflowing step every layer's does,
    downstream of the first) leaves the forward figure: the record's first_nonfinite names it."""
    if layer.get("nonfinite") == "forward":
        return -math.inf
    values = [v for v in (layer.get("forward"), layer.get("grad"))
              if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return min(values) if values else None


@dataclass
class LayerStats:
    name: str
    forward: float | None = None     # the latest sample's
    grad: float | None = None
    underflow: float | None = None
    narrowest: float | None = None   # over every sample
    nonfinite: int = 0               # samples where it held inf/NaN (forward or gradient)
    samples: int = 0
    nonfinite_forward: int = 0       # samples where its forward output held inf/NaN
    nonfinite_grad: int = 0          # samples where only its gradients did (inf flowing back from a later overflow)
    first: int = 0                   # steps on which it was, or held, the first non-finite module (either direction)
    first_forward: int = 0           # of those, the steps whose first non-finite was in its forward output
    forward_finding: dict[str, Any] | None = None  # the newest of those findings (with its step), kept past a cap


@dataclass
class ProbeSeries:
    """One mode's probe over a run: per layer its latest entry (plus `lowest_<figure>` over the
    run) and its figure on each sampled step, lined up with the summary's steps."""

    probe: NumericsProbe
    latest: dict[str, dict[str, Any]] = field(default_factory=dict)
    rows: dict[str, list[float | None]] = field(default_factory=dict)

    def note(self, entries: list) -> None:
        """A record's entries: the latest of each layer, and its lowest figure so far."""
        lowest_key = f"lowest_{self.probe.figure}"
        for entry in entries:
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                continue
            before = self.latest.get(entry["name"], {}).get(lowest_key)
            lowest = min((v for v in (before, _num(entry.get(self.probe.figure))) if v is not None), default=None)
            self.latest[entry["name"]] = {**entry, lowest_key: lowest}

    def sample(self, entries: list, steps: int) -> None:
        """The heat map's column for the step just appended (the summary's `steps`-th)."""
        for entry in entries:
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                row = self.rows.setdefault(entry["name"], [None] * steps)
                row[-1] = self.probe.cell(entry)

    def lowest(self, n: int = NARROWEST_SHOWN) -> list[tuple[str, float]]:
        """(layer, lowest figure over its kept samples) of the layers that fared worst, lowest first
        (-inf: it held inf/NaN)."""
        lows = [(name, min(values)) for name, row in self.rows.items() if (values := [v for v in row if v is not None])]
        return sorted(lows, key=lambda pair: pair[1])[:n]


@dataclass
class NumericsSummary:
    """Every numerics record of a run folded: per layer (in the model's order), the heat map's rows
    (step -> headroom), and the first non-finite modules found."""

    dtype: str = ""
    max_finite: float = 0.0
    layers: dict[str, LayerStats] = field(default_factory=dict)
    steps: list[int] = field(default_factory=list)
    rows: dict[str, list[float | None]] = field(default_factory=dict)  # layer -> headroom per sampled step
    first_nonfinite: list[dict[str, Any]] = field(default_factory=list)  # with "step"
    records: int = 0
    cap: int = 0                     # keep the last `cap` samples for the heat map (0: all)
    probes: dict[str, ProbeSeries] = field(default_factory=dict)  # by probe key, in the order first seen

    def probed(self) -> ProbeSeries | None:
        """The first probe with samples on the heat map's steps (the view its panel shows instead)."""
        return next((series for series in self.probes.values() if series.rows), None)

    def add(self, rec: Readable) -> None:
        layers = rec.get("layers")
        step = rec.get("step")
        if not isinstance(layers, list) or not isinstance(step, int):
            return
        self.records += 1
        self.dtype = str(rec.get("dtype") or self.dtype)
        max_finite = rec.get("max_finite")
        if isinstance(max_finite, (int, float)):
            self.max_finite = float(max_finite)
        first = rec.get("first_nonfinite")
        if isinstance(first, dict):
            first = {"step": step, **first, "traced": bool(rec.get("traced"))}
            self.first_nonfinite.append(first)
        found = [(self.probes.setdefault(p.key, ProbeSeries(p)), entries) for p in probes()
                 if isinstance(entries := rec.get(p.key), list)]
        for series, entries in found:
            series.note(entries)
        if not layers:
            self._count_first(first)  # a replay of a step that was not sampled
            return
        self.steps.append(step)
        for row in self._all_rows():
            row.append(None)
        for series, entries in found:
            series.sample(entries, len(self.steps))
        for layer in layers:
            if not isinstance(layer, dict) or not isinstance(layer.get("name"), str):
                continue
            name = layer["name"]
            stats = self.layers.setdefault(name, LayerStats(name))
            stats.samples += 1
            stats.forward, stats.grad, stats.underflow = (_num(layer.get(k)) for k in ("forward", "grad", "underflow"))
            value = layer_headroom(layer)
            where = layer.get("nonfinite")
            if where:
                stats.nonfinite += 1
                if where == "forward":
                    stats.nonfinite_forward += 1
                else:
                    stats.nonfinite_grad += 1
            if value is not None and (stats.narrowest is None or value < stats.narrowest):
                stats.narrowest = value
            row = self.rows.setdefault(name, [None] * len(self.steps))
            row[-1] = value
        self._count_first(first)
        if self.cap and len(self.steps) > self.cap:
            del self.steps[0]
            for row in self._all_rows():
                del row[0]
        if self.cap and len(self.first_nonfinite) > self.cap:
            del self.first_nonfinite[0]

    def _all_rows(self) -> list[list[float | None]]:
        return [*self.rows.values(), *(row for series in self.probes.values() for row in series.rows.values())]

    def _count_first(self, first: Any) -> None:
        """Credit a step's first non-finite module to the sampled layer that is it or holds it
        (a replay names the deepest module: blocks.3.mlp.proj is inside blocks.3)."""
        module = first.get("module") if isinstance(first, dict) else None
        if not isinstance(module, str):
            return
        holder = next((s for name, s in self.layers.items() if _inside(module, name)), None)
        if holder is not None:
            holder.first += 1
            if first.get("where") == "forward":
                holder.first_forward += 1
                holder.forward_finding = first

    def narrowest(self, n: int = NARROWEST_SHOWN) -> list[LayerStats]:
        """The layers closest to overflowing (by their narrowest sample), closest first. Of those that
        held inf/NaN, the source leads (the one most often the step's first non-finite module in its
        forward; the model's order breaks ties): the others held it because it flowed down from
        there. Backward findings do not rank: a loss scale too high for the gradients is found first
        in the last layers (backward starts there), which says nothing of where a forward inf began."""
        known = [s for s in self.layers.values() if s.narrowest is not None]
        return sorted(known, key=lambda s: (s.narrowest if s.narrowest is not None else math.inf, -s.first_forward))[:n]

    def nonfinite_layers(self) -> list[LayerStats]:
        """The layers whose forward output held inf/NaN on some sample, the likeliest source first."""
        return [s for s in self.narrowest(len(self.layers)) if s.narrowest == -math.inf]

    def nonfinite_source(self) -> tuple[LayerStats, list[LayerStats]] | None:
        """The layer whose forward output held inf/NaN first (the one most often credited with a
        step's first forward non-finite module), and the layers that held it downstream of it (on
        an overflowing step every layer after the overflow holds its inf too); None when no layer's
        forward output held inf/NaN, or no forward finding says which came first (the records'
        order is the model's, not the order it ran in: nothing to call downstream)."""
        broken = self.nonfinite_layers()
        return (broken[0], broken[1:]) if broken and broken[0].first_forward else None

    def latest_first(self) -> dict[str, Any] | None:
        """The newest first non-finite finding (with its step), forward or backward."""
        return self.first_nonfinite[-1] if self.first_nonfinite else None

    @property
    def narrowest_bits(self) -> float | None:
        found = self.narrowest(1)
        return found[0].narrowest if found else None


def summarize(records: Iterable[Readable]) -> NumericsSummary:
    summary = NumericsSummary()
    for rec in map(as_record, records):
        if isinstance(rec, Numerics):
            summary.add(rec)
    return summary


def fmt_bits(value: float | None) -> str:
    if value is None:
        return "-"
    if value == -math.inf:
        return "inf/NaN"
    return f"{value:.1f}"


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _inside(module: str, layer: str) -> bool:
    """blocks.3.mlp.proj is inside blocks.3 (and blocks.3 inside itself); blocks.30 is not."""
    return module == layer or module.startswith(layer + ".")
