"""Plan (P on a preset, or P on a run: that plan run's own, else its preset's newest): an
`amptui plan`, read from its run folder's plan.json: the table (largest share of FLOPs first: shape, each recipe's lowest SQNR, fp16
headroom, predicted gain, the choice), a layers x recipes heat map of SQNR, and each choice's reason."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from amptui.core.fmt import shown
from amptui.core.planning.plan import FAMILY, FLOAT8, RECIPES, SQNR_FIELDS
from amptui.dashboard.screens.base import DashboardScreen
from amptui.dashboard.screens.keys import named
from amptui.dashboard.widgets.keysfooter import KeysFooter

HEAT = ((10.0, "white on red"), (15.0, "black on dark_orange"), (20.0, "black on yellow"))  # as the probe's heat map (SQNR bands)
COOL = "black on green"
HEAT_NAMES = {"fp8-rowwise": "fp8-row"}  # the heat map's 8-wide columns: a name that fits


def field(table: Any, key: str, default: Any = None) -> Any:
    """`table[key]` when the plan's file has a table there, else `default` (a crafted or damaged
    plan.json may hold a list, a string or a number anywhere: shown as missing, never a crash)."""
    return table.get(key, default) if isinstance(table, dict) else default


def lowest(figures: Any) -> float | None:
    """A recipe's lowest SQNR on a layer (output and gradients), from the plan's JSON."""
    if not isinstance(figures, dict):
        return None
    values = [figures[f] for f in SQNR_FIELDS if isinstance(figures.get(f), (int, float))]
    return min(values) if values else None


def cell(value: float | None) -> Text:
    if value is None:
        return Text("    -   ", style="dim")
    style = next((s for limit, s in HEAT if value < limit), COOL)
    return Text(f"  {value:4.0f}  " if value < 100 else "   99+  ", style=style)


def heat_map(layers: list[dict[str, Any]]) -> Text:
    """One row per layer, one column per recipe: its lowest SQNR in dB, coloured low hot."""
    width = max([len(shown(x.get("name", ""))) for x in layers] + [5])
    text = Text("SQNR (dB) against float32, lowest of output and gradients\n", style="bold")
    text.append(" " * (width + 1) + "".join(f"{HEAT_NAMES.get(r, r):^8}" for r in RECIPES) + "\n")
    for layer in layers:
        text.append(f"{shown(layer.get('name', ''))[:width]:<{width}} ")
        for recipe in RECIPES:
            text.append_text(cell(lowest(field(layer.get("recipes"), recipe))))
        text.append(f"  {shown(layer.get('choice', ''))}\n")
    return text


class PlanScreen(DashboardScreen):
    BINDINGS = named("plan", [Binding("q", "back", "Back"), Binding("escape", "back", "Back", show=False)])

    def __init__(self, doc: dict[str, Any]):
        super().__init__(id="plan")
        self.doc = doc

    def compose(self) -> ComposeResult:
        doc = self.doc
        device = field(doc.get("device"), "name", "?")
        yield Static(Text(shown(f"plan of {doc.get('preset', '?')} for {device} (run {doc.get('run_id', '?')}, "
                                f"{doc.get('samples', 0)} sampled steps)"), style="bold"), id="plan-title")
        with VerticalScroll():
            yield DataTable(id="plan-table", cursor_type="row", zebra_stripes=True)
            yield Static(heat_map(self.plan_layers()), id="plan-heat")
            yield Static(self.words(), id="plan-words")
        yield KeysFooter()

    def plan_layers(self) -> list[dict[str, Any]]:
        layers = [x for x in self.doc.get("layers") or [] if isinstance(x, dict)]
        return sorted(layers, key=lambda x: -(share if isinstance(share := x.get("flops_share"), (int, float)) else 0))

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("layer", "FLOPs", "M x K x N", *(r for r in RECIPES), "gain", "choice")
        for layer in self.plan_layers():
            recipes, shape = layer.get("recipes"), layer.get("shape")
            fp16 = field(recipes, "fp16")
            heads = [h for h in (field(fp16, "headroom_forward"), field(fp16, "headroom_grad")) if isinstance(h, (int, float))]
            gains = [g for r in FLOAT8 if isinstance(g := field(field(recipes, r), "predicted_speedup"), (int, float))]
            share = layer.get("flops_share")
            cells = [layer.get("name", ""), f"{100 * share:.0f}%" if isinstance(share, (int, float)) else "-",
                     f"{field(shape, 'm')}x{field(shape, 'k')}x{field(shape, 'n')}",
                     _db(field(field(recipes, "bf16"), "sqnr_db")), f"{min(heads):.0f}b" if heads else "-",
                     *(_db(lowest(field(recipes, r))) for r in FLOAT8),
                     f"{max(gains):.2f}x" if gains else "-", layer.get("choice", "")]
            # Text, not str: a DataTable reads a str cell as markup, and these come from the plan's file
            table.add_row(*(Text(shown(c)) for c in cells))

    def words(self) -> Text:
        doc = self.doc
        text = Text()
        for layer in self.plan_layers():
            text.append(shown(f"{layer.get('name')}: "), style="bold")  # a plan's file: names from a user's model
            text.append(shown(layer.get("reason", "")) + "\n")
        speedup, risk = doc.get("predicted_speedup"), field(doc, "risk", {})
        risk = risk if isinstance(risk, dict) else {}
        converted = doc.get("float8_layers", 0)
        line = f"{converted} of {len(self.plan_layers())} linears in {FAMILY}"
        if isinstance(speedup, (int, float)):
            line += f"; the step predicted {speedup:.2f}x as fast as all-bf16"
        if isinstance(risk.get("lowest_sqnr_db"), (int, float)):
            line += f"; risk: lowest kept SQNR {risk['lowest_sqnr_db']:.1f} dB ({risk.get('layer')})"
        text.append("\n" + shown(line) + ". Speed-ups are predictions from the GPU's roofline; numerics measured on the "
                    "machine that ran the plan.")
        return text

    def action_back(self) -> None:
        self.app.pop_screen()


def show_plan(screen: DashboardScreen, preset: str, doc: dict[str, Any] | None) -> None:
    """Open the plan screen on `doc`; without one, say the command that makes it."""
    if doc is None:
        screen.notify(f"no plan of {preset or 'this run'} in this runs folder yet: run `amptui plan "
                      f"{preset or 'PRESET'} --for H100` (or your GPU), then press P again", severity="warning", timeout=8)
        return
    screen.app.push_screen(PlanScreen(doc))


def _db(value: Any) -> str:
    return f"{value:.0f}" if isinstance(value, (int, float)) else "-"
