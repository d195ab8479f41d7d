"""Precision as a value: every "auto" decided, variant names, the `start` record's forms, the short
and long names; and a new dtype is one DTYPES entry (variants, A/B, config, alarms, notices follow)."""

from __future__ import annotations

from support.paths import PACKAGE, modules


def test_float8_is_named_only_where_the_mode_and_its_rules_live():
    """A mode's words live in its own files (issue 52): the heat map, alarms, `amptui numerics`, the sinks,
    plan and tune ask the modes; what still says float8 is its core mode, its trainer runtime, its numerics
    probe, the plan probe that runs its recipes, the schema's keys and the autopilot's float8 rules (as
    `grep -rlw float8 amptui --include=*.py`: at most 10 files; 38 before)."""
    import re

    naming = sorted(str(p.relative_to(PACKAGE)) for p in modules()
                    if re.search(r"\bfloat8\b", p.read_text(encoding="utf-8")))
    assert len(naming) <= 10, naming
    assert {"core/modes/float8.py", "trainer/modes/float8.py", "telemetry/probes/float8.py"} <= set(naming)
    for reader in ("core/numerics.py", "dashboard/widgets/heatmap.py", "dashboard/panels/headroom.py", "cli/numerics.py",
                   "telemetry/alarms.py", "telemetry/sinks.py", "core/stream/records.py", "core/planning/plan.py"):
        assert reader not in naming, reader
