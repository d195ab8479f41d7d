"""`amptui numerics RUN_ID`: a run's per-layer range headroom (from its `numerics` records) and
the first non-finite modules found, as a table or JSON."""

from __future__ import annotations

import json
from typing import Any

from amptui.cli.parser import runs_dir_option
from amptui.core.numerics import (
    NumericsSummary,
    ProbeSeries,
    downstream_words,
    fmt_bits,
    fmt_value,
    nonfinite_text,
    summarize,
)


def add_parser(sub) -> None:
    p = sub.add_parser("numerics", help="per-layer range headroom and the first non-finite module of a run")
    p.add_argument("run_id", metavar="RUN_ID", help="the run: its id, any unique prefix, the short tail the dashboard shows, or `last`")
    p.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or json")
    runs_dir_option(p)


def handle(args) -> int:
    from amptui.core.run import runs
    from amptui.core.stream.events import primary_events_file, read_events

    run_dir = runs.run_dir(runs.runs_root(args.runs_dir), args.run_id)
    from amptui.cli import prose

    summary = summarize(read_events(primary_events_file(run_dir)))
    if args.format == "json":
        print(json.dumps(as_json(run_dir.name, summary), indent=2))
    else:
        prose.say(as_table(run_dir.name, summary))  # the table's rows fit 80 columns; its sentences wrap
    return 0


def as_json(run_id: str, s: NumericsSummary) -> dict[str, Any]:
    return {"run_id": run_id, "dtype": s.dtype, "max_finite": s.max_finite, "samples": len(s.steps),
            "layers": [{"name": x.name, "forward": x.forward, "grad": x.grad, "underflow": x.underflow,
                        "narrowest": _json_bits(x.narrowest), "nonfinite_samples": x.nonfinite,
                        "nonfinite_forward_samples": x.nonfinite_forward, "nonfinite_grad_samples": x.nonfinite_grad,
                        "first_nonfinite_count": x.first, "first_nonfinite_forward_count": x.first_forward}
                       for x in s.layers.values()],
            "narrowest": [{"name": x.name, "bits": _json_bits(x.narrowest)} for x in s.narrowest()],
            "first_nonfinite": s.first_nonfinite,
            **{key: list(series.latest.values()) for key, series in s.probes.items() if series.latest}}


def _json_bits(value: float | None) -> float | str | None:
    return "nonfinite" if value == float("-inf") else value


def first_nonfinite_runs(firsts: list[dict[str, Any]]) -> list[tuple[list[int], dict[str, Any], list[float]]]:
    """Consecutive steps whose first non-finite module (and direction) is the same, grouped: a run
    that overflows in one layer on every step is one line, not forty."""
    runs: list[tuple[list[int], dict[str, Any], list[float]]] = []
    for first in firsts:
        key = (first.get("module"), first.get("where"), bool(first.get("traced")))
        last = runs[-1] if runs else None
        if last is not None and (last[1].get("module"), last[1].get("where"), bool(last[1].get("traced"))) == key:
            last[0].append(int(first.get("step") or 0))
        else:
            runs.append(([int(first.get("step") or 0)], first, []))
            last = runs[-1]
        if isinstance(first.get("value"), (int, float)):
            last[2].append(float(first["value"]))
    return runs


TABLE_WIDTH = 80
INF_COLUMNS = ("inf fwd", "inf grad", "first")
INF_LEGEND = ("inf fwd: samples whose output held inf/NaN; inf grad: samples where only its gradients did "
              "(inf flowing back from a later overflow); first: steps on which it was, or held, the first "
              "non-finite module, in forward or backward (the lines below say which)")


def as_table(run_id: str, s: NumericsSummary) -> str:
    if not s.records:
        return (f"{run_id}: no numerics records (turn sampling on with --set numerics.every=N, "
                "or numerics.trace_nonfinite=true)")
    lines = [f"{run_id}: {len(s.steps)} samples",
             f"range headroom in log2 bits to {s.dtype}'s largest finite value ({s.max_finite:g})"]
    lines += layer_rows(s)
    for series in s.probes.values():
        lines += probe_rows(series)
    narrow = narrowest_words(s)
    if narrow:
        lines.append("narrowest: " + ", ".join(narrow))
    runs = first_nonfinite_runs(s.first_nonfinite)
    for steps, first, values in runs[:10]:
        how = " (replayed)" if first.get("traced") else ""
        text = nonfinite_text(first)
        if len(steps) > 1 and len(values) > 1 and min(values) > s.max_finite:  # one layer again and again
            text = (f"{first.get('module')} ({first.get('where')}, {s.dtype} max exceeded: "
                    f"{fmt_value(min(values))} to {fmt_value(max(values))})")
        where = f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]} ({len(steps)})"
        lines.append(f"{where}: first non-finite: {text}{how}")
    if len(runs) > 10:
        lines.append(f"... and {sum(len(r[0]) for r in runs[10:])} more steps with a first non-finite module")
    return "\n".join(lines)


def narrowest_words(s: NumericsSummary, shown: int = 3) -> list[str]:
    """The narrowest layers with their figures. Of the layers that held inf/NaN only the source is
    one (the rest held it downstream of it, so they are counted there, not listed as findings);
    with no forward finding to name a source, each is listed (core.numerics.nonfinite_source)."""
    source = s.nonfinite_source()
    downstream = {x.name for x in source[1]} if source else set()
    words = []
    for x in [x for x in s.narrowest(len(s.layers)) if x.name not in downstream][:shown]:
        if x.narrowest != float("-inf"):
            words.append(f"{x.name} {fmt_bits(x.narrowest)} bits")
        elif downstream:
            words.append(f"{x.name} ({fmt_bits(x.narrowest)}; {downstream_words(len(downstream))})")
        else:
            words.append(f"{x.name} ({fmt_bits(x.narrowest)})")
    return words


def layer_rows(s: NumericsSummary) -> list[str]:
    """The per-layer table, header first, within TABLE_WIDTH columns (a long layer name is cut in
    its middle; --format json has it whole). Forward and gradient inf/NaN are counted apart: on an
    overflowing step every gradient upstream of the overflow is inf, so only the forward count and
    `first` say which layer overflows; the legend under the table says so. A run that never held
    inf/NaN has no such columns."""
    if not s.layers:
        return []
    overflowed = any(x.nonfinite or x.first for x in s.layers.values())
    header = ("layer", "forward", "grad", "narrowest", "underflow", *(INF_COLUMNS if overflowed else ()))
    rows = [(x.name, fmt_bits(x.forward), fmt_bits(x.grad), fmt_bits(x.narrowest),
             f"{100 * x.underflow:.1f}%" if x.underflow is not None else "-",
             *((str(x.nonfinite_forward or ""), str(x.nonfinite_grad or ""), str(x.first or "")) if overflowed else ()))
            for x in s.layers.values()]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    widths[0] = max(len(header[0]), min(widths[0], TABLE_WIDTH - sum(widths[1:]) - 2 * (len(widths) - 1)))
    lines = ["  ".join(_cut(c, w).ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip()
             for row in [header, *rows]]
    return lines + [INF_LEGEND] if overflowed else lines


def probe_rows(series: ProbeSeries) -> list[str]:
    """A mode's probe's table of its latest entries, in the probe's columns (core/modes/); none
    without entries."""
    if not series.latest:
        return []
    title, header, rows, legend = series.probe.table(series.latest)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    widths[0] = max(len(header[0]), min(widths[0], TABLE_WIDTH - sum(widths[1:]) - 2 * (len(widths) - 1)))
    lines = ["", title]
    lines += ["  ".join(_cut(c, w).ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip()
              for row in [header, *rows]]
    return lines + ([legend] if legend else [])


def _cut(name: str, width: int) -> str:
    """`name` in `width` columns: its start and, longer, its end (the leaf module), joined by "..."."""
    if len(name) <= width:
        return name
    head = (width - 3) // 3
    if name[len(name) - (width - 3 - head)] == ".":  # "...out_proj", not "....out_proj"
        head += 1
    return name[:head] + "..." + name[len(name) - (width - 3 - head):]
