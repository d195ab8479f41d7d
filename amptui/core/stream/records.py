"""The event stream's records, one dataclass per kind, each field named and typed once.

Every writer (amptui's trainer and `amptui.Monitor` through the telemetry Recorder, the torchrun
supervisor for a failed run's `end`) builds these and writes them with `EventWriter.write`;
readers validate what they read against the same classes (fieldtypes.py) and name fields through
`names(...)`: `STEP.skipped_total` is the string "skipped_total", and a typo is an AttributeError.

A new step-record field is one line in `Step` plus where its value is measured (the Recorder).
Every record also carries `v`, `kind`, `t` and `rank` (added by the writer).

Readers get the same objects back: `from_wire(line's dict)` (core.stream.events does it for every valid
line) is the kind's class with its fields set, `t` and `rank` from the line, and the line itself in
`wire` (what a printer or an export that shows every key reads). Code that folds records tells the
kinds apart by class (`isinstance(rec, Step)`), never by comparing kind strings.
"""

from __future__ import annotations

import dataclasses
import traceback
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar, Mapping


@dataclass
class Record:
    """A record's own fields (without v, kind, t, rank). Optional fields are left out when None;
    `extra` (where a kind has one) holds further numbers a user chose to record."""

    KIND: ClassVar[str] = ""
    OPTIONAL: ClassVar[tuple[str, ...]] = ()
    _wire: ClassVar[dict[str, Any] | None] = None  # the line it was read from (set per instance by from_wire)

    @property
    def wire(self) -> dict[str, Any]:
        """The record as its line holds it ({v, kind, t, rank, ...}); for one built to be written, its fields."""
        return self._wire if self._wire is not None else {"kind": self.KIND, **self.fields()}

    @property
    def kind(self) -> str:
        return str(self.wire.get("kind", self.KIND))

    @property
    def t(self) -> float | None:
        """When the writer wrote it (seconds since the epoch); None for one not read back."""
        t = self.wire.get("t")
        return t if isinstance(t, (int, float)) and not isinstance(t, bool) else None

    @property
    def rank(self) -> int:
        rank = self.wire.get("rank")
        return int(rank) if isinstance(rank, (int, float)) and not isinstance(rank, bool) else 0

    def get(self, key: str, default: Any = None) -> Any:
        """A key of its line, as a mapping reads it (a user's extra numbers, a newer writer's fields)."""
        return self.wire.get(key, default)

    def __getitem__(self, key: str) -> Any:
        return self.wire[key]

    def __contains__(self, key: object) -> bool:
        return key in self.wire

    def fields(self) -> dict[str, Any]:
        out = asdict(self)
        for key in self.OPTIONAL:
            if out.get(key) is None:
                out.pop(key, None)
        for flat in ("extra", "probes"):  # an epoch's user numbers, a numerics record's probes: keys of the line
            out.update(out.pop(flat, None) or {})
        return out


@dataclass
class Start(Record):
    KIND: ClassVar[str] = "start"
    OPTIONAL: ClassVar[tuple[str, ...]] = ("step_flops", "peak_tflops", "source", "parameters", "slurm", "tf32",
                                           "sharded", "replica", "code", "interleaved")

    run_id: str
    preset: str
    config: dict                    # the resolved config, {section: {key: value}}
    precision: dict | str           # Precision.as_record(); older runs wrote the words
    world_size: int
    device: dict                    # type, name, count, index
    torch: str                      # torch.__version__
    host: str
    pid: int
    total_steps: int | None = None
    steps_per_epoch: int | None = None
    epochs: int | None = None
    resumed_from: int | None = None  # the checkpoint's step when this session resumed a run
    scale: float | None = None      # the GradScaler's scale before the first step
    step_flops: int | None = None   # FLOPs of one optimizer step (amptui's trainer)
    peak_tflops: float | None = None
    source: str | None = None       # "monitor" for amptui.Monitor
    parameters: int | None = None
    slurm: dict | None = None       # job_id, node_id, nodes, host: a process of a SLURM job (core/cluster.py)
    tf32: dict | None = None        # effective TF32 permissions: matmul, cudnn, api, supported (machine.tf32)
    sharded: dict | None = None     # FSDP: this rank's params_bytes, optimizer_bytes (its shards), model_params_bytes
    replica: dict | None = None     # not sharded (DDP, one process): the same bytes, of the whole model each rank keeps
    code: dict | None = None        # a script's run: sha256 and files, its own and those it imports (core/scriptcode.py)
    interleaved: bool | None = None  # `ab --interleave`: it trained in turns with the other variants (core/run/turns.py)


@dataclass
class Step(Record):
    KIND: ClassVar[str] = "step"
    OPTIONAL: ClassVar[tuple[str, ...]] = ("grad_norm", "tflops", "epoch", "load", "others_cpu")

    step: int
    epoch: int | None               # absent when unknown (a script whose loop iterates no DataLoader)
    loss: float | None              # mean over the window since the last step record
    lr: float | None
    scale: float | None             # None without a GradScaler
    skipped: int                    # optimizer steps skipped in the window
    skipped_total: int
    samples_per_s: float | None
    step_time_ms: float             # training steps only: no evaluation, checkpoint or record writing
    data_wait_ms: float | None      # per step, host time blocked fetching batches; None when not measured
    mem: dict                       # allocated/reserved/peak_allocated (CUDA) or rss/peak_rss (CPU), bytes
    grad_norm: float | None = None  # optional: written only when known
    tflops: float | None = None     # achieved
    load: float | None = None       # the machine's 1-minute load average at the record
    others_cpu: float | None = None  # share (0..1) of all CPUs' time other processes used in the window

    def fields(self) -> dict[str, Any]:
        """As Record.fields, without asdict's deep copy: a step record holds numbers and the plain
        `mem` dict (written every log.every steps: this is on the training loop's clock)."""
        out = {name: getattr(self, name) for name in _STEP_FIELDS}
        for key in self.OPTIONAL:
            if out[key] is None:
                del out[key]
        return out


_STEP_FIELDS = tuple(f.name for f in fields(Step))


@dataclass
class Scaler(Record):
    KIND: ClassVar[str] = "scaler"
    OPTIONAL: ClassVar[tuple[str, ...]] = ("overflow", "first_nonfinite")

    step: int
    event: str                      # "backoff" | "growth"
    old_scale: float
    new_scale: float
    overflow: list | None = None    # on backoff: parameters whose gradients held inf/NaN, worst first
    first_nonfinite: dict | None = None  # on backoff, when found: as Numerics.first_nonfinite


@dataclass
class Epoch(Record):
    KIND: ClassVar[str] = "epoch"
    OPTIONAL: ClassVar[tuple[str, ...]] = ("partial",)

    epoch: int
    train_loss: float | None = None
    val_loss: float | None = None
    val_acc: float | None = None
    epoch_time_s: float = 0.0       # training steps only
    eval_time_s: float = 0.0
    checkpoint_time_s: float = 0.0
    partial: bool | None = None     # the epoch was not trained whole in this session
    extra: dict = field(default_factory=dict)


@dataclass
class Mem(Record):
    KIND: ClassVar[str] = "mem"

    rss: int | None = None
    peak_rss: int | None = None
    devices: list = field(default_factory=list)  # per GPU: index, name, used, total (bytes), util (%)


@dataclass
class Checkpoint(Record):
    KIND: ClassVar[str] = "checkpoint"

    step: int
    epoch: int
    path: str


@dataclass
class WarningRecord(Record):
    KIND: ClassVar[str] = "warning"
    OPTIONAL: ClassVar[tuple[str, ...]] = ("code", "cause")

    message: str
    code: str | None = None
    cause: dict | None = None  # code "nonfinite_cause": {cause: input|precision_overflow|float32_too, step, ...}


@dataclass
class Numerics(Record):
    """One sampled step's range headroom per module (`numerics.every`), and the first module that
    held inf/NaN when the step overflowed. Headroom is log2(max_finite / abs max) in bits: 0 or
    less overflows; null when the value was zero, not seen, or not finite (`nonfinite` says where)."""

    KIND: ClassVar[str] = "numerics"
    OPTIONAL: ClassVar[tuple[str, ...]] = ("first_nonfinite", "traced")

    step: int
    dtype: str                      # the dtype the forward computes in (headroom is to its range)
    max_finite: float               # that dtype's largest finite value
    layers: list                    # per module: {name, forward, grad, underflow, nonfinite?}
    first_nonfinite: dict | None = None  # {module, where: forward|backward, value, text}
    traced: bool | None = None      # found by re-running the batch (numerics.trace_nonfinite)
    probes: dict = field(default_factory=dict)  # a mode's probe's key -> entries per layer: keys of the line


@dataclass
class PlanSample(Record):
    """One step sampled by `amptui plan` (`numerics.plan_every`): per linear, its GEMM shape and
    every recipe's figures on that step's tensors (docs/numerics.md#plan)."""

    KIND: ClassVar[str] = "plan_sample"

    step: int
    layers: list                    # per linear: {name, order, m, k, n, calls, bf16, fp16, fp8, fp8-rowwise, mxfp8}


@dataclass
class PrecisionSwitch(Record):
    """The autopilot changed the run's precision at a checkpoint (core/autopilot.py): written as
    `from` and `to` ({precision: words, short, layers, keys}), the rule, why, its evidence and the checkpoint
    the run resumed from with the new precision."""

    KIND: ClassVar[str] = "precision_switch"

    step: int
    source: dict                    # written as "from": {"precision": words, "short": ..., "layers": {...}, "keys": {...}}
    to: dict
    rule: str
    why: str
    evidence: dict
    checkpoint: str                 # the switch's checkpoint, kept beside last.pt

    def fields(self) -> dict[str, Any]:
        out = super().fields()
        out["from"] = out.pop("source")
        return out


@dataclass
class ErrorInfo:
    """Why a run failed: the `end` record's `error`."""

    type: str
    message: str
    rank: int | None
    traceback: str = ""

    def __post_init__(self) -> None:
        self.traceback = self.traceback[-4000:]

    @classmethod
    def of(cls, error: BaseException, rank: int | None, frames: int | None = 6) -> "ErrorInfo":
        """From an exception: its type, message and the last `frames` of its traceback."""
        lines = traceback.format_exception(type(error), error, error.__traceback__)
        return cls(type(error).__name__, str(error), rank, "".join(lines[-frames:] if frames else lines))


@dataclass
class End(Record):
    KIND: ClassVar[str] = "end"
    OPTIONAL: ClassVar[tuple[str, ...]] = ("skipped_total", "error", "nonfinite_step")
    STATUSES: ClassVar[tuple[str, ...]] = ("completed", "stopped", "failed")

    status: str
    total_time_s: float | None
    steps: int
    final_loss: float | None = None
    val_acc: float | None = None
    peak_mem: float | None = None
    skipped_total: int | None = None
    error: dict | None = None       # ErrorInfo as a dict, when failed
    nonfinite_step: int | None = None  # the first step whose loss was inf/NaN (runs lists mark the run)


KINDS: tuple[type[Record], ...] = (Start, Step, Scaler, Epoch, Mem, Checkpoint, WarningRecord, End, Numerics,
                                   PlanSample, PrecisionSwitch)
BY_KIND: dict[str, type[Record]] = {cls.KIND: cls for cls in KINDS}
COMMON_FIELDS: dict[str, tuple[type, ...]] = {"v": (int,), "kind": (str,), "t": (int, float), "rank": (int, float)}


@dataclass
class Foreign(Record):
    """A valid line of a kind this version does not know (a newer writer's): its keys in `wire` only."""


def _defaults(cls: type[Record]) -> tuple[dict[str, Any], tuple[tuple[str, Any], ...]]:
    """What a field the line leaves out reads as: its default (None when the class has none: a
    damaged or foreign writer may leave out any field), and the fields made by a factory."""
    plain, made = {}, []
    for f in fields(cls):
        if f.default_factory is not dataclasses.MISSING:
            made.append((f.name, f.default_factory))
        else:
            plain[f.name] = None if f.default is dataclasses.MISSING else f.default
    return plain, tuple(made)


_DEFAULTS = {cls: _defaults(cls) for cls in (*KINDS, Foreign)}
_KEYS = {cls: frozenset(f.name for f in fields(cls)) | frozenset(COMMON_FIELDS) for cls in _DEFAULTS}


def from_wire(line: dict[str, Any]) -> Record:
    """A valid line's dict (core.stream.events.valid_record) as its kind's record object. Fields the line
    leaves out read as their default (None without one); keys of no field stay in `wire`, and an
    epoch record's go to `extra` as the writer took them from there."""
    cls = BY_KIND.get(line.get("kind", ""), Foreign)
    rec = cls.__new__(cls)
    values = rec.__dict__
    plain, made = _DEFAULTS[cls]
    values.update(plain)
    for name, factory in made:
        values[name] = factory()
    others = line.keys() - _KEYS[cls]
    if not others:
        values.update(line)  # in C: this runs for every line read (v, kind, t, rank: read through `wire`)
    else:  # a key of no field never becomes an attribute (a line's "get" or "wire" must not shadow ours)
        values.update({k: v for k, v in line.items() if k not in others})
    if cls in (Epoch, Numerics):  # an epoch's user numbers; a numerics record's probes (core/modes/base.py)
        values["extra" if cls is Epoch else "probes"] = {k: line[k] for k in others}
    values["_wire"] = line
    return rec


class Names:
    """A record class's field names as attributes: `names(Step).skipped_total == "skipped_total"`."""

    def __init__(self, cls: type) -> None:
        self._names = frozenset(f.name for f in fields(cls)) | frozenset(COMMON_FIELDS)

    def __getattr__(self, name: str) -> str:
        if name.startswith("_") or name not in self._names:
            raise AttributeError(name)
        return name


def names(cls: type) -> Names:
    return Names(cls)


START, STEP, SCALER, EPOCH = names(Start), names(Step), names(Scaler), names(Epoch)
MEM, CHECKPOINT, WARNING, END = names(Mem), names(Checkpoint), names(WarningRecord), names(End)
NUMERICS = names(Numerics)
STEP_FIELDS = tuple(f.name for f in fields(Step) if f.name != "extra")

# what code that reads fields by name (`.get`) takes: a record object or a line's dict
Readable = Record | Mapping[str, Any]


def as_record(rec: Readable) -> Record:
    """A record object; a line's dict (one a test or a writer's echo holds) read as from_wire reads it."""
    if isinstance(rec, Record):
        return rec
    return from_wire(rec if isinstance(rec, dict) else dict(rec))
