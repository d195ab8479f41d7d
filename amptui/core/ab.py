"""`amptui ab`: one preset, several precision setups, everything else identical."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from . import safefile
from .errors import UserError
from .precision import DTYPES, PRECISION_KEYS, Precision, auto_dtype, variant_names


class _Variants(Mapping[str, dict[str, object]]):
    """Variant name -> its amp.* overrides ("fp32", "bf16", "fp16+scaler", ...), made from
    `precision.DTYPES` when read: nothing else differs between the runs of an A/B."""

    def __getitem__(self, name: str) -> dict[str, object]:
        if name not in variant_names():
            raise KeyError(name)
        return Precision.from_variant(name).overrides()

    def __iter__(self) -> Iterator[str]:
        return iter(variant_names())

    def __len__(self) -> int:
        return len(variant_names())


VARIANTS: Mapping[str, dict[str, object]] = _Variants()


def default_variants(device_type: str) -> list[str]:
    """fp32 (the reference) and the device's "auto" dtype; for a dtype that needs a GradScaler also
    without it (what the scaler buys): fp32,fp16,fp16+scaler on CUDA, fp32,bf16 on a CPU."""
    auto = DTYPES[auto_dtype(device_type)]
    return ["fp32", auto.short] + ([auto.short + "+scaler"] if auto.needs_scaler else [])


def expand(spec: str | None, device_type: str) -> list[tuple[str, dict[str, object]]]:
    """"fp32,bf16" -> [(name, overrides), ...]; None means the default for the device."""
    if spec is None:
        names = default_variants(device_type)
    else:
        names = [n.strip() for n in spec.split(",") if n.strip()]
    known = variant_names()
    if not names:
        raise UserError("--variants: name at least one of " + ", ".join(known))
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UserError(f"--variants: unknown {', '.join(unknown)} (known: {', '.join(known)})")
    if len(set(names)) != len(names):
        raise UserError("--variants: each variant once")
    return [(n, VARIANTS[n]) for n in names]


def check_overrides(overrides: dict[str, object]) -> None:
    """--set may not decide what the variants decide."""
    clash = sorted(k for k in overrides if k in PRECISION_KEYS)
    if clash:
        raise UserError(f"--set {', '.join(clash)}: the variants set the precision; choose them with --variants")


# --- A/B groups: one A/B started in the background (from the dashboard) --------------------------
#
# <runs>/.ab/<group>.json says which runs belong together; a detached driver process
# (`python -m amptui.core.ab GROUP_FILE`) creates and runs the variants one after another, each
# run writing its own output.log, and records each run id as soon as its folder exists.

GROUPS_DIR = ".ab"
ACTIVE_STATES = ("checking", "running")
GROUP_LIMIT = 1024 * 1024  # a group file names its runs and variants: small


@dataclass
class Group:
    group_id: str
    path: Path
    preset: str
    label: str = ""
    state: str = "checking"        # checking | running | done | failed
    runs: list[str] = field(default_factory=list)
    variants: list[str] = field(default_factory=list)
    error: str = ""
    launch: dict = field(default_factory=dict)

    @property
    def active(self) -> bool:
        from .runs import process_alive

        return self.state in ACTIVE_STATES and process_alive(self.launch)


def _write(path: Path, data: dict) -> None:
    from .safefile import atomic_write_text

    atomic_write_text(path, json.dumps(data, indent=2) + "\n")


def groups(root: Path) -> list[Group]:
    """Every A/B group in the runs folder, oldest first, labelled ab1, ab2, ..."""
    folder = Path(root) / GROUPS_DIR
    found = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            data = safefile.load_json(path, GROUP_LIMIT)
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        found.append(Group(group_id=path.stem, path=path, preset=data.get("preset_name", ""),
                           state=data.get("state", "failed"), runs=list(data.get("runs", [])),
                           variants=list(data.get("variants") or []), error=data.get("error", ""),
                           launch=data.get("launch", {})))
    for i, group in enumerate(found, 1):
        group.label = f"ab{i}"
    return found


def membership(root: Path) -> dict[str, Group]:
    """run id -> its A/B group."""
    return {run_id: g for g in groups(root) for run_id in g.runs}


def active_group(root: Path, preset_name: str) -> Group | None:
    return next((g for g in groups(root) if g.preset == preset_name and g.active), None)


def start_group(root: Path, preset_ref: str, preset_name: str, overrides: dict[str, object],
                variants: str | None = None) -> Group:
    """Start an A/B in the background; refuses a second one of the same preset while one runs."""
    running = active_group(root, preset_name)
    if running is not None:
        raise UserError(f"an A/B of {preset_name} is already running ({running.label}: "
                        f"{len(running.runs)} of {len(running.variants) or '?'} runs started); wait for it")
    check_overrides(overrides)
    folder = Path(root) / GROUPS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    group_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{preset_name}-{os.urandom(2).hex()}"
    path = folder / f"{group_id}.json"
    data: dict = {"preset": preset_ref, "preset_name": preset_name, "overrides": overrides, "variants_spec": variants,
            "runs_root": str(Path(root).resolve()), "state": "checking", "runs": []}
    _write(path, data)
    with safefile.open_file(folder / f"{group_id}.log", "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "amptui.core.ab", str(path)], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=os.getcwd())
    from .runs import _create_time

    data["launch"] = {"pid": proc.pid, "create_time": _create_time(proc.pid), "host": socket.gethostname()}
    _write(path, data)
    return next(g for g in groups(root) if g.group_id == group_id)


def _drive(path: Path) -> int:
    """The driver: check every variant, then run them one after another (like `amptui ab`)."""
    from . import launch, preflight, presets
    from .runs import load_run

    data = safefile.load_json(path, GROUP_LIMIT)
    root = Path(data["runs_root"])
    try:
        preset = presets.find_preset(data["preset"])
        overrides = data["overrides"]
        device = preflight.device_type(preset.config(overrides).run.device)
        variants = expand(data.get("variants_spec"), device)
        for _, variant in variants:
            launch.resolve_config(preset, {**overrides, **variant})
    except UserError as exc:
        data.update(state="failed", error=str(exc))
        _write(path, data)
        print(f"amptui: error: {exc}", flush=True)
        return 2
    data.update(state="running", variants=[n for n, _ in variants])
    _write(path, data)
    for name, variant in variants:
        try:
            run_dir, _ = launch.create_run(preset, {**overrides, **variant}, root)
        except UserError as exc:
            data.update(state="failed", error=f"{name}: {exc}")
            _write(path, data)
            return 2
        data["runs"].append(run_dir.name)
        _write(path, data)
        print(f"{name}: {run_dir.name}", flush=True)
        launch.start(run_dir).wait()
        deadline = time.monotonic() + 10  # the end record is written before the trainer exits
        while load_run(run_dir).status == "running" and time.monotonic() < deadline:
            time.sleep(0.2)
    data["state"] = "done"
    _write(path, data)
    return 0


if __name__ == "__main__":
    sys.exit(_drive(Path(sys.argv[1])))
