"""`PrecisionMode`: one way amptui can train in reduced precision, answering every question about
a `Precision` it owns (core/config/precision.py): its variant names, how a preset, a record or
words give it, what the trainer applies, its refusals and warnings, how the script hooks
recognise it, and its words. A Precision names its mode (`Precision.mode_name`) and carries the
mode's own small frozen options value (`Precision.options`); nothing else knows those options.
No torch here (the trainer side of a mode is its runtime: amptui/trainer/modes/)."""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Mapping

from amptui.core.config.dtypes import DTYPES
from amptui.core.config.modefacts import Asked, LoopFacts, Note, RunFacts, dtype_notes

if TYPE_CHECKING:  # precision.py imports the modes: the value is only named in annotations
    from amptui.core.config.precision import Precision
    from amptui.core.config.values import Config

SCALER = "scaler"  # the variant suffix that adds a GradScaler ("fp16+scaler")


class NumericsProbe:
    """What a mode measures per layer on the steps `[numerics]` samples, beside the range headroom
    every run gets, read back (its runtime half: amptui/telemetry/probes/). A `numerics` record holds
    its entries under `key`, a list of dicts each naming its layer; the heat map, the alarms,
    `amptui numerics` and the sinks read any mode's probe through these."""

    key = ""     # its field in a `numerics` record (the mode's name: runs recorded before probes read alike)
    figure = ""  # the entry's figure the heat map draws (lower is worse), e.g. "sqnr_db"
    title = ""   # the heat map panel's title for its view
    unit = ""    # the colour key's unit
    # (below this, word) for the heat map's five colours, as the headroom's bands: inf/NaN first
    bands: tuple[tuple[float, str], ...] = ()
    alarm_code = ""  # the code of its alarms (warning records)

    def cell(self, entry: Mapping[str, Any]) -> float | None:
        """An entry's figure on one sample; -inf when it held inf/NaN, None when nothing was measured."""
        value = entry.get(self.figure)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    def value_words(self, value: float) -> str:
        """A figure as the views say it."""
        return f"{value:.1f}"

    def headline(self, latest: Mapping[str, Mapping[str, Any]]) -> str:
        """One line over its latest entries by layer (the heat map's legend, `amptui numerics`)."""
        return f"{self.key}: {len(latest)} layers"

    def alarm(self, entry: Mapping[str, Any], step: int) -> str | None:
        """The alarm one entry raises (once per layer), with what to change; None: none."""
        return None

    def table(self, latest: Mapping[str, Mapping[str, Any]]) -> tuple[str, tuple[str, ...], list[tuple[str, ...]], str]:
        """`amptui numerics`' table of its latest entries: title, header, rows (the layer first), legend."""
        rows: list[tuple[str, ...]] = [(name, "-" if (v := self.cell(x)) is None else self.value_words(v)) for name, x in latest.items()]
        return f"{self.key}, latest sample:", (f"{self.key} layer", self.figure), rows, ""


class PrecisionMode(ABC):
    """One way to train in reduced precision. Its module in this package says `MODE = TheMode()`;
    `order` places it among the others (where its variants are offered, last: the most specific)."""

    name: str = ""
    order: int = 100
    group = ""  # "" offered everywhere; else what its variants need, said by `offered_with`
    offered_with = ""  # "with dist.mode=fsdp": the words `amptui ab --help` puts before a group's variants
    keys: tuple[str, ...] = ()  # the preset keys (dotted) it reads beyond amp.autocast/dtype/grad_scaler
    chosen_by_name = False  # only `amp.mode = NAME` picks it (no other key implies it)
    per_layer = False  # an [amp.layers] rule may name its variants (a compute precision of a layer's own)
    extra = ""  # the amptui extra (pip install 'amptui[EXTRA]') a node needs for it ("": none)
    toggle = ""  # the preset key of its row on the home screen's toggles ("": none; a select of the key's choices)
    tune_last = False  # `amptui tune` tries its variant last, in a trial of its own (compiled)
    # float32 master weights under it; False: 16-bit parameters are its stated choice (precision hygiene does
    # not call them a mistake, core/hygiene.py)
    master_copy = True
    probe: NumericsProbe | None = None  # what it measures per layer on sampled steps (None: headroom only)
    planned = False  # `amptui plan` weighs its variants per linear (the plan probe measures each one)
    # the CUDA compute capability its GEMMs need in hardware (below it, and on a CPU, they are emulated:
    # numerics real, speed not); None: it runs wherever its dtype does
    gemm_capability: tuple[int, int] | None = None

    # --- the names `ab`, `tune` and `plan` take ------------------------------------------------------

    @abstractmethod
    def variants(self) -> list[str]:
        """Its variant names, in the order they are offered."""

    def tune_variants(self) -> list[str]:
        """The variants `amptui tune` tries after fp32 (the reference), in order; [] none."""
        return []

    @abstractmethod
    def parse(self, variant: str, base: Precision) -> Precision | None:
        """A variant's Precision (`base`: an fp32 one to build on), or None: not one of its names."""

    # --- read from a preset, a record, words --------------------------------------------------------

    def claims(self, cfg: Config, base: Precision) -> bool:
        """Whether the config's keys ask for this mode (`amp.mode = "auto"`); `base`: the shared fields."""
        return False

    def configure(self, cfg: Config, base: Precision) -> Precision:
        """The config's precision in this mode (`base`: autocast, dtype and scaler decided)."""
        return self.own(base)

    def read(self, record: Mapping[str, Any], base: Precision) -> Precision | None:
        """A start record's `precision` that names no mode (older runs): this mode's when its fields say so."""
        return None

    def read_words(self, head: str, parts: list[str], base: Precision) -> Precision | None:
        """Words older runs wrote (`head` before the first " + ", `parts`: the rest but GradScaler and
        [amp.layers]'s), when they are this mode's; `base` read from a plain head ("fp32", "autocast D")."""
        return None

    def own(self, p: Precision, options: Any = None) -> Precision:
        """`p` as this mode's, with its options."""
        return dataclasses.replace(p, mode_name=self.name, options=options)

    # --- what the trainer applies -------------------------------------------------------------------

    def autocast_dtype(self, p: Precision) -> str | None:
        """The dtype the trainer's autocast context runs in; None: no autocast."""
        return None

    def fsdp_policy(self, p: Precision) -> dict[str, str] | None:
        """An FSDP run's MixedPrecisionPolicy in dtype names; None: not an FSDP policy."""
        return None

    def tf32(self, p: Precision) -> bool:
        """Whether float32 matmuls and convolutions run on TF32 tensor cores (CUDA)."""
        return False

    def missing(self) -> str | None:
        """What this mode needs that is not installed, as the line that refuses it; None: nothing."""
        return None

    # (the GradScaler is `p.scaler` in every mode: "+scaler" in a variant, " + GradScaler" in words)

    # --- what it refuses and warns of (preflight, tune and the script hooks ask; none keeps a copy) --

    def refusal(self, p: Precision, run: RunFacts, asked: Asked | None = None) -> str | None:
        """Why a run set up as `run` cannot train in `p`, as the one line that refuses its launch;
        None: it can. `asked`: an [amp.layers] rule asks for `p` (None: the run's own keys do)."""
        return None

    def warnings(self, p: Precision, run: RunFacts) -> list[Note]:
        """Legal but surprising in `p` on `run`: the run goes on, with a warning for each. By default
        the GradScaler and dtype rules every mode that computes in `p.dtype` shares."""
        return dtype_notes(p.autocast, p.dtype, p.scaler, run)

    # --- how the script hooks recognise it ----------------------------------------------------------

    def detect(self, facts: LoopFacts) -> dict[str, Any]:
        """The preset keys (dotted) that say this mode ran in a watched loop; {} when it did not."""
        return {}

    # --- its words for the views --------------------------------------------------------------------

    @abstractmethod
    def short(self, p: Precision) -> str:
        """The variant name (without "+scaler")."""

    @abstractmethod
    def words(self, p: Precision) -> str:
        """In words (without " + GradScaler")."""

    def scope_word(self, p: Precision) -> str:
        """Its name as one layer of a mixed run says it ("bf16 + 2 <this word> layers")."""
        return self.short(p)

    def record(self, p: Precision) -> dict[str, Any]:
        """What it adds to the `start` record's `precision` (beside the shared fields and `mode`)."""
        return {}

    def conversion_note(self, record: Mapping[str, Any]) -> str | None:
        """What its conversion did to a run's model, from the `start` record's `precision` (compare's
        notes); None: it converted nothing there."""
        return None

    def overrides(self, p: Precision) -> dict[str, object]:
        """The preset keys (dotted) that give `p`, beyond amp.autocast/amp.dtype/amp.grad_scaler."""
        return {"amp.mode": self.name} if self.chosen_by_name else {}


def scaler_split(variant: str) -> tuple[str, bool] | None:
    """"fp16+scaler" -> ("fp16", True); None for any other "+" suffix."""
    base, plus, extra = variant.partition("+")
    if plus and extra != SCALER:
        return None
    return base, bool(plus)


def dtype_short(dtype: str) -> str:
    """A dtype's name in variants ("bf16"); a dtype not in the table: its name."""
    return DTYPES[dtype].short if dtype in DTYPES else dtype
