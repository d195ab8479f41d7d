"""core/safefile (and what is built on it) in process: a file in a runs folder is opened as data.
No symlink followed, no FIFO waited on, no device read, no hard link's twin written, reads and
nesting bounded, new files with the umask's mode, replaced whole or not at all."""

from __future__ import annotations

import json
import os
import stat

import pytest

from amptui.core import safefile
from amptui.core.config.values import parse_toml, read_toml
from amptui.core.errors import ConfigError
from amptui.core.fmt import fmt_time, shown
from amptui.core.safefile import UnsafeFile
from amptui.core.stream.events import MAX_STRING, EventWriter

pytestmark = pytest.mark.timeout(30)  # a FIFO that blocks fails the test instead of hanging the run


@pytest.fixture
def victim(tmp_path):
    path = tmp_path / "outside" / "precious.txt"
    path.parent.mkdir()
    path.write_text("precious\n")
    return path


def test_a_symlink_is_refused_for_reading_writing_and_creating(tmp_path, victim):
    link = tmp_path / "lock"
    link.symlink_to(victim)
    for flags in (os.O_RDONLY, os.O_RDWR | os.O_CREAT, os.O_WRONLY | os.O_APPEND | os.O_CREAT):
        with pytest.raises(UnsafeFile, match="symbolic link"):
            safefile.open_fd(link, flags)
    dangling = tmp_path / "events.jsonl"
    dangling.symlink_to(tmp_path / "outside" / "new-file")
    with pytest.raises(UnsafeFile):
        safefile.open_file(dangling, "a")
    assert victim.read_text() == "precious\n" and not (tmp_path / "outside" / "new-file").exists()


def test_a_fifo_or_a_device_is_refused_at_once(tmp_path):
    fifo = tmp_path / "run.json"
    os.mkfifo(fifo)
    for flags in (os.O_RDONLY, os.O_RDWR | os.O_CREAT, os.O_WRONLY | os.O_APPEND):
        with pytest.raises(UnsafeFile, match="not a regular file"):
            safefile.open_fd(fifo, flags)
    with pytest.raises(UnsafeFile, match="not a regular file"):
        safefile.read_bytes("/dev/zero", 1024, follow=True)  # even where links are followed
    (tmp_path / "zero").symlink_to("/dev/zero")
    with pytest.raises(UnsafeFile):
        safefile.load_json(tmp_path / "zero", 1024)


def test_a_hard_link_is_never_written_through(tmp_path, victim):
    twin = tmp_path / "lock"
    os.link(victim, twin)
    with pytest.raises(UnsafeFile, match="hard links"):
        safefile.open_fd(twin, os.O_RDWR)
    assert safefile.read_text(twin, 100) == "precious\n"  # reading it is harmless


def test_reads_are_bounded_and_nesting_is_a_value_error(tmp_path):
    big = tmp_path / "config.toml"
    big.write_bytes(b"x" * 2048)
    with pytest.raises(UnsafeFile, match="larger than"):
        safefile.read_bytes(big, 1024)
    assert len(safefile.read_bytes(big, 2048)) == 2048
    assert safefile.read_tail(big, 10) == b"x" * 10
    deep = "[" * 5000 + "]" * 5000
    with pytest.raises(ValueError, match="nested deeper"):
        safefile.loads_json(deep)
    with pytest.raises(ValueError, match="nested deeper"):
        safefile.check_depth(json.loads("[" * 40 + "]" * 40))
    assert safefile.loads_json('{"a": {"b": [1, 2]}}') == {"a": {"b": [1, 2]}}


def test_within_refuses_a_file_whose_folder_leads_outside(tmp_path, victim):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "escape").symlink_to(victim.parent)
    with pytest.raises(UnsafeFile, match="outside"):
        safefile.read_bytes(runs / "escape" / "precious.txt", 100, within=runs)
    (runs / "inside.txt").write_text("ok")
    assert safefile.read_text(runs / "inside.txt", 100, within=runs) == "ok"


def test_check_regular_names_what_is_in_the_way(tmp_path):
    (tmp_path / "output.log").mkdir()
    (tmp_path / "run.json").symlink_to("/etc/hostname")
    os.mkfifo(tmp_path / "events.jsonl")
    for name, what in (("output.log", "folder"), ("run.json", "symbolic link"), ("events.jsonl", "regular")):
        with pytest.raises(UnsafeFile, match=what):
            safefile.check_regular(tmp_path / name)
    safefile.check_regular(tmp_path / "absent")  # missing is fine: it will be created


def test_atomic_writer_uses_the_umask_and_keeps_the_old_file_on_failure(tmp_path):
    target = tmp_path / "run.json"
    old = os.umask(0o027)
    try:
        safefile.atomic_write_text(target, "first\n")
        with pytest.raises(RuntimeError):
            with safefile.atomic_writer(target) as fh:
                fh.write(b"half")
                raise RuntimeError("disk gone")
        appended = tmp_path / "events.jsonl"
        safefile.open_file(appended, "a").close()
    finally:
        os.umask(old)
    assert target.read_text() == "first\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640 == stat.S_IMODE(appended.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.jsonl", "run.json"]  # no temp file left


def test_atomic_writer_replaces_a_symlink_itself_not_its_target(tmp_path, victim):
    link = tmp_path / "config.toml"
    link.symlink_to(victim)
    safefile.atomic_write_text(link, "new\n")
    assert not link.is_symlink() and link.read_text() == "new\n" and victim.read_text() == "precious\n"


def test_toml_nesting_and_links_are_config_errors(tmp_path, victim):
    with pytest.raises(ConfigError, match="nested deeper"):
        parse_toml("[run]\ndescription = " + "[" * 5000 + "]" * 5000, "deep.toml")
    victim.write_text('[run]\nname = "mine"\n')
    link = tmp_path / "config.toml"
    link.symlink_to(victim)
    with pytest.raises(ConfigError, match="symbolic link"):
        read_toml(link)  # a run folder's config.toml
    assert read_toml(link, follow_links=True) == {"run": {"name": "mine"}}  # a preset the user linked


def test_the_event_writer_refuses_a_link_and_caps_long_strings(tmp_path, victim):
    (tmp_path / "events.jsonl").symlink_to(victim)
    with pytest.raises(UnsafeFile):
        EventWriter(tmp_path / "events.jsonl")
    assert victim.read_text() == "precious\n"
    path = tmp_path / "other.jsonl"
    with EventWriter(path) as writer:
        writer.emit("warning", message="m" * 10_000_000, code="config")
    line = path.read_text()
    assert len(line) < 2 * MAX_STRING and "characters cut" in line


def test_shown_escapes_control_characters_and_markup():
    from rich.markup import escape

    assert shown("red \x1b[31mtext\x07") == "red \\x1b[31mtext\\x07"
    assert "\x1b" not in shown("\x9b2J") and shown("a\nb") == "a b" and shown("a\nb", newlines=True) == "a\nb"
    for text in ("[red]x", "[/]", "\\[bold]y", "trailing\\", "plain [1, 2]"):
        assert shown(text, markup=True) == escape(text)


def test_a_time_out_of_range_is_shown_as_missing():
    assert fmt_time(1e20) == "-" and fmt_time(float("nan")) == "-"
