"""Run ids as people type them, in every command that takes one: the whole id, a unique prefix,
the short tail the dashboard shows, `last`, and `amptui compare --last-ab`. An ambiguous id names
its candidates; the "other folder" hint comes only when the folder has no such run."""

from __future__ import annotations

import json
import time

import pytest
from support.cli import one_clear_line
from support.dashboard import copy_runs

from amptui.core.errors import UserError
from amptui.core.run import folders
from amptui.core.run.runids import resolve_run_dir

OLDER = "20261121-231544-quickstart-8ab8"
MIDDLE = "20261121-231557-scaler-lab-058d"
NEWEST = "20261121-231609-quickstart-b640"


@pytest.fixture
def canned(runs_dir):
    return copy_runs(runs_dir)


def compared(cli, *ids: str) -> list[str]:
    proc = cli("compare", *ids, "--format", "json", check=True)
    return [row["run_id"] for row in json.loads(proc.stdout)]


@pytest.mark.parametrize("typed, meant", [
    (NEWEST, NEWEST),                       # the whole id
    ("8ab8", OLDER),                        # the dashboard's short tail
    ("quickstart-8ab8", OLDER),
    ("20261121-231557", MIDDLE),            # a unique prefix
    ("2026112", None),                      # a prefix of all three: ambiguous
    ("last", NEWEST),                       # the newest run
])
def test_the_resolver(canned, typed, meant):
    if meant is None:
        with pytest.raises(UserError, match="ambiguous"):
            resolve_run_dir(canned, typed)
    else:
        assert resolve_run_dir(canned, typed) == canned / meant


def test_compare_takes_prefixes_tails_and_last(canned, cli):
    assert compared(cli, "8ab8", "058d", "last") == [OLDER, MIDDLE, NEWEST]
    assert compared(cli, "20261121-231557", "quickstart-b640") == [MIDDLE, NEWEST]


def test_an_ambiguous_prefix_lists_the_candidates(canned, cli):
    line = one_clear_line(cli("compare", "20261121-2315", "last"))
    assert "ambiguous" in line and OLDER in line and MIDDLE in line and NEWEST not in line
    assert "--runs-dir" not in line     # the run is here, just not told apart


def test_other_folder_hint_only_when_the_folder_has_no_such_run(canned, cli, tmp_path):
    line = one_clear_line(cli("stop", "beef"))
    assert "no run 'beef'" in line and "amptui runs --runs-dir DIR" in line
    other = copy_runs(tmp_path / "elsewhere")       # a runs folder this user used before
    (other / OLDER).rename(other / "20261122-101010-quickstart-beef")
    folders.remember(other)
    line = one_clear_line(cli("stop", "beef"))
    assert f"it is in {other}: add --runs-dir {other}" in line


def test_every_command_that_takes_an_id_resolves_it(canned, cli):
    # each refuses the run it found for what it is, by its whole id: the id was resolved
    line = one_clear_line(cli("stop", "8ab8"))
    assert f"run {OLDER} is not running" in line
    line = one_clear_line(cli("resume", "058d"))        # resolved, then refused for what it is
    assert "058d" in line and "no run" not in line
    assert "no run" in one_clear_line(cli("watch", "nope", "--svg", "x.svg"))


def ab_group(root, name: str, runs: list[str], created: float) -> None:
    (root / ".ab").mkdir(exist_ok=True)
    (root / ".ab" / f"{name}.json").write_text(json.dumps(
        {"preset_name": "quickstart", "runs": runs, "variants": ["fp32", "bf16"], "state": "done",
         "created": created}))


def test_compare_last_ab_takes_the_newest_group(canned, cli):
    line = one_clear_line(cli("compare", "--last-ab"))
    assert "no A/B" in line
    ab_group(canned, "20261121-231500-quickstart-aaaa", [OLDER, MIDDLE], time.time() - 60)
    ab_group(canned, "20261121-231600-quickstart-bbbb", [MIDDLE, NEWEST], time.time())
    assert compared(cli, "--last-ab") == [MIDDLE, NEWEST]
    assert "not both" in one_clear_line(cli("compare", "--last-ab", "8ab8"))
    assert "name the runs" in one_clear_line(cli("compare"))


def test_a_linked_run_folder_is_not_a_run_here(canned, cli, tmp_path):
    """A run folder that is a symlink leads out of the runs folder: not listed, not resolved, so
    no command (delete, resume, export) acts through it."""
    outside = tmp_path / "outside"
    (canned / OLDER).rename(outside)
    (canned / OLDER).symlink_to(outside)
    listed = [r["run_id"] for r in json.loads(cli("runs", "--format", "json", check=True).stdout)]
    assert OLDER not in listed and MIDDLE in listed
    for typed in (OLDER, "8ab8"):
        with pytest.raises(UserError, match="no run"):
            resolve_run_dir(canned, typed)
    assert "no run" in one_clear_line(cli("runs", "delete", OLDER))
    assert (outside / "events.jsonl").exists() and (canned / OLDER).is_symlink()


@pytest.mark.parametrize("where", ["empty", "missing"])
def test_an_empty_runs_folder_names_the_other_folders_used(runs_dir, cli, tmp_path, where):
    """`amptui runs` and `watch last` in a runs folder with no runs name the other runs folders the
    state directory knows (three, then "and N more") and the commands that look there."""
    here = tmp_path / where
    if where == "empty":
        here.mkdir()
    plain = cli("runs", "--runs-dir", str(here), check=True).stdout
    assert "no runs in" in plain and "--all-folders" not in plain  # none known: nothing to name
    assert "amptui runs --runs-dir DIR" in one_clear_line(cli("watch", "last", "--runs-dir", str(here)))
    others = []
    for i in range(5):
        others.append(tmp_path / f"other-{i}")
        others[-1].mkdir()
        folders.remember(others[-1])
        time.sleep(0.01)  # most recently used first
    listed = cli("runs", "--runs-dir", str(here), check=True).stdout
    line = one_clear_line(cli("watch", "last", "--runs-dir", str(here)))
    for said in (listed, line):
        assert all(str(f) in said for f in others[:-4:-1]) and str(others[0]) not in said, said
        assert "and 2 more" in said and "amptui runs --all-folders" in said and "--runs-dir DIR" in said
