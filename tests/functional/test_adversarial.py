"""A careless and an unlucky user, for real: commands racing for one run, SIGKILLs at random
moments, damaged run files, hostile run ids and preset names, a read-only runs folder, and a
runs folder with hundreds of runs. Real processes and real files; tiny CPU-pinned runs."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from amptui.cli import main as cli
from amptui.core.stream.events import EventReader, EventWriter
from amptui.core.stream.records import Checkpoint, End


@pytest.fixture(autouse=True)
def one_thread_per_trainer(monkeypatch):
    """These tiny models run 30x slower on a loaded 2-core box when torch's two OpenMP threads
    wait on each other; one thread each keeps the trainers this module starts quick."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


def cli_in_process(argv: list[str], capsys) -> str:
    """The CLI's entry point in this process: the only way to hand it a NUL byte (argv cannot
    carry one), and quick for a long list; a few of each go through a real process below."""
    code = cli.main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("amptui: error: ") and "\n" not in err, (argv, code, err)
    return err


def _huge_line(fh) -> None:
    chunk = b'{"v":1,"kind":"warning","t":1,"rank":0,"message":"' + b"x" * (1 << 20)
    fh.write(chunk)
    for _ in range(49):
        fh.write(b"x" * (1 << 20))
    fh.write(b'"}\n')


def test_a_50mb_line_is_read_in_bounded_memory(tmp_path):
    path = tmp_path / "events.jsonl"
    with EventWriter(path) as writer:
        writer.write(Checkpoint(step=4, epoch=1, path="checkpoints/last.pt"))
    with open(path, "ab") as fh:
        _huge_line(fh)
    with EventWriter(path) as writer:
        writer.write(End(status="completed", total_time_s=1.0, steps=4))
    tracemalloc.start()
    try:
        reader = EventReader(path)
        records = reader.read()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [r["kind"] for r in records] == ["checkpoint", "end"] and reader.bad_lines == 1
    assert peak < 16 * 1024 * 1024, peak


# --- hostile names -------------------------------------------------------------------------------

HOSTILE = ["../x", "../../etc/passwd", "/etc", "/tmp", "a\nb", "x" * 300, ".", "..", " ", "run id", "a\x00b"]
HOSTILE_PRESETS = HOSTILE + ["../evil.toml", "/tmp/amptui-adversarial-missing.toml", "x" * 300 + ".toml",
                             "a\nb.toml", "a\x00b.toml"]


def test_hostile_run_ids_give_one_line(runs_dir, capsys):
    runs_dir.mkdir()
    for run_id in HOSTILE:
        for command in ("resume", "watch", "compare", "stop"):
            cli_in_process([command, run_id, "--runs-dir", str(runs_dir)], capsys)
    assert list(runs_dir.iterdir()) == []


def test_hostile_preset_names_give_one_line(isolated, capsys):
    before = set(Path("/tmp").iterdir())
    for name in HOSTILE_PRESETS:
        cli_in_process(["run", name, "--set", "run.device=cpu"], capsys)
        cli_in_process(["presets", "show", name], capsys)
        cli_in_process(["presets", "save", name, "--from", "quickstart"], capsys)
    assert not (isolated / "runs").exists()
    assert {p for p in Path("/tmp").iterdir() if "evil" in p.name or "adversarial" in p.name} <= before
    saved = isolated / "xdg" / "amptui" / "presets"
    assert not saved.exists() or list(saved.iterdir()) == []
