"""The run screen's top lines, built from its RunModel: the header (preset, precision, status,
elapsed time and ETA, device), the progress line, and the stats line that holds every live number
(so even one panel at 80x24 leaves none out)."""

from __future__ import annotations

import os
from pathlib import Path

from rich.text import Text

from amptui.core.config.precision import precision_or_unseen
from amptui.core.fmt import (
    fmt_accuracy,
    fmt_bytes,
    fmt_duration,
    fmt_loss,
    fmt_lr,
    fmt_of,
    fmt_progress,
    fmt_scale,
    shown,
)
from amptui.core.tunenames import is_trial
from amptui.dashboard.runmodel import RunModel

STATUS_STYLE = {"running": "bold green", "completed": "bold cyan", "stopped": "bold yellow",
                "failed": "bold red", "killed": "bold red", "damaged": "bold red", "starting": "green"}


FIRST_LOOK_MAX_BYTES = 4 * 1024 * 1024  # above this, the first look reads the event file's ends only


def _two_ends(path: Path) -> list:
    """The records of the first and last stretch of a long event file (a bounded read: the start
    record, then the latest steps)."""
    from amptui.core.stream.eventends import HEAD_BYTES, TAIL_BYTES
    from amptui.core.stream.events import LineFramer, open_events

    with open_events(path) as fh:
        head = fh.read(HEAD_BYTES)
        fh.seek(max(0, os.fstat(fh.fileno()).st_size - TAIL_BYTES))
        tail = fh.read(TAIL_BYTES)
    head = head[:head.rfind(b"\n") + 1]
    tail = tail[tail.find(b"\n") + 1:]  # its first line is cut
    return LineFramer().records(head) + LineFramer().records(tail)


def first_look(run_dir: Path) -> RunModel:
    """What the run's files already say, read at once (the event file at both ends, config.toml,
    the lock or run.json: each read bounded), so the screen opens at the run's step, status and
    device rather than at "starting · step 0" while the tail reads the whole history."""
    from amptui.core.run.runs import load_run
    from amptui.core.stream.eventends import read_ends
    from amptui.core.stream.events import primary_events_file

    model = RunModel(run_dir.name)
    try:
        events = primary_events_file(run_dir)
        if os.path.getsize(events) > FIRST_LOOK_MAX_BYTES:  # a long history: only its two ends, no scan
            model.feed(_two_ends(events))
            model.caught_up()
            return model
        info = load_run(run_dir)
        model.prefill(info.preset, info.precision_words)
        model.feed(read_ends(events).records())
        model.caught_up()  # all it will read: its header says the status, not "loading history"
    except Exception:  # noqa: BLE001 - a half-written folder: the tail will tell
        return model
    if info.status == "killed":
        model.set_alive(False)
    elif info.status == "running":
        model.set_alive(True)
    return model


def device_words(m: RunModel) -> str:
    """"Intel Xeon Platinum 8480 (cpu)", "NVIDIA H100 (cuda) x4"."""
    name = " ".join(shown(m.run.device.get("name") or "unnamed device").replace("(R)", "").replace("(TM)", "").split())
    device_type = m.run.device.get("type") or ""
    if m.run.world_size > 1:
        return f"{name} ({device_type}) x{m.run.world_size}"
    return f"{name} ({device_type})" if device_type else name


def header_line(m: RunModel, now: float) -> Text:
    status = m.status
    if m.loading and m.records:
        status_text = ("loading history…", "italic")
    else:
        status_text = (f"● {status}", STATUS_STYLE.get(status, ""))
    eta = m.eta(now)
    return Text.assemble(
        (shown(m.run.preset or m.run.run_id), "bold"), " · ", (shown(precision_or_unseen(m.run.precision_words)), "bold magenta"), " · ",
        status_text, " · elapsed ", fmt_duration(m.elapsed(now)),
        *((" · ETA ", (fmt_duration(eta), "bold")) if eta is not None else ()), " · ", device_words(m),
    )


def progress_line(m: RunModel) -> Text:
    # a tune's trial runs its steps: its epochs are only a bound ("epoch 1/1000" would mislead)
    epochs = f" · epoch {fmt_of(m.run.epoch, m.run.epochs)}" if (m.run.epochs or m.run.epoch) and not is_trial(m.run.preset) else ""
    total = m.run.total_steps or (m.run.step if m.status == "completed" else None)  # a finished run's total is known
    return Text(f"{fmt_progress(m.run.step, total)}{epochs} · {m.run.run_id}")


def progress_fraction(m: RunModel) -> float | None:
    """How far the run is, 0..1; None when nobody can tell (no total steps given, not completed)."""
    if m.run.total_steps:
        return min(1.0, m.run.step / m.run.total_steps)
    return 1.0 if m.status == "completed" else None


def stats_line(m: RunModel) -> Text:
    parts: list = []

    def add(label: str, value: str, style: str = "bold") -> None:
        if parts:
            parts.append(("  ", ""))
        parts.extend([(label + " ", "dim"), (value, style)])

    add("loss", fmt_loss(m.run.loss))
    add("lr", fmt_lr(m.run.lr))
    if m.run.has_scaler:
        add("scale", fmt_scale(m.run.scale))
    add("skipped", str(m.run.skipped_total), "bold red" if m.run.skipped_total else "bold")
    mem = next(iter(m.mem_now.items()), None)
    if mem:
        add(mem[0].split(" ", 1)[-1], fmt_bytes(mem[1][0]))
    if m.run.steady_samples_per_s:  # after warm-up (core.figures), the figure compare and the summary show
        add("samples/s", f"{m.run.steady_samples_per_s:,.0f}")
    ep = m.epochs_seen[-1] if m.epochs_seen else None
    if ep and ep.val_acc is not None:
        add("val acc", fmt_accuracy(ep.val_acc))
    return Text.assemble(*parts, no_wrap=True, overflow="ellipsis")
