"""`amptui ab --interleave` (issue 43): the variants' trainers run side by side and take turns, one step
record at a time, so their timed windows alternate and a drift of the machine falls on all alike.
The turn file's rules in process; the A/B itself with real trainers (slow); refusals in one line."""

from __future__ import annotations

import os
import threading

import pytest

from amptui.core.run import turns
from amptui.core.run.runs import list_runs


def test_the_turn_passes_round_and_skips_a_variant_that_ended(tmp_path):
    path = tmp_path / "g.turn"
    turns.start(path, 3)
    a, b, c = (turns.Turns(path, i) for i in range(3))
    assert turns.read(path) == (0, [0, 1, 2])
    a.pass_on()
    assert turns.read(path)[0] == 1
    a.pass_on()  # not its turn: the holder keeps it
    assert turns.read(path)[0] == 1
    turns.retire(path, 2)  # the driver, for a variant that died while it waited
    b.pass_on()
    assert turns.read(path) == (0, [0, 1])
    a.retire()  # the holder ends: the turn goes on to the one left
    assert turns.read(path) == (1, [1])
    assert c.on


def test_a_waiting_variant_trains_when_its_turn_comes_and_never_waits_on_a_missing_file(tmp_path):
    path = tmp_path / "g.turn"
    turns.start(path, 2)
    first, second = turns.Turns(path, 0), turns.Turns(path, 1)
    done = threading.Event()

    def wait() -> None:
        second.wait(lambda: False)
        done.set()

    waiter = threading.Thread(target=wait)
    waiter.start()
    assert not done.wait(0.05)  # its turn has not come: still waiting
    first.pass_on()
    assert done.wait(30)
    waiter.join()
    path.unlink()  # the A/B's driver is gone: train on alone rather than wait for ever
    first.wait(lambda: False)
    assert not first.on
    turns.start(path, 2)
    stopped = turns.Turns(path, 1)
    stopped.wait(lambda: True)  # a stop asked while waiting ends the wait
    assert stopped.on


@pytest.mark.parametrize("extra, words", [
    (["--set", "dist.mode=ddp"], "one process per variant only, and dist.mode = ddp"),
    (["--set", "dist.mode=dp"], "one process per variant only, and dist.mode = dp"),
])
def test_interleave_is_refused_in_one_line_where_it_cannot_apply(cli, runs_dir, extra, words):
    done = cli("ab", "quickstart", "--interleave", "--variants", "fp32,bf16", *extra)
    assert done.returncode != 0
    assert words in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not list_runs(runs_dir)


def test_interleave_refuses_a_script_under_torchrun_in_one_line(cli, runs_dir, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('never run')\n")
    done = cli("ab", "--script", str(script), "--variants", "fp32,bf16", "--interleave", "--set", "dist.mode=ddp")
    assert done.returncode != 0 and "one process per variant only, and dist.mode = ddp" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not list_runs(runs_dir)


def test_a_planted_link_or_fifo_is_replaced_never_followed_and_a_fifo_later_never_blocks(tmp_path):
    """Issue 50.5/50.9: the turn file is created afresh (a link's target untouched), and a FIFO put
    in its place later ends the taking of turns instead of blocking or raising."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    path = tmp_path / "g.turn"
    path.symlink_to(victim)
    turns.start(path, 2)
    assert victim.read_text() == "precious\n" and not path.is_symlink()
    assert turns.read(path) == (0, [0, 1])
    path.unlink()
    os.mkfifo(path)
    turns.start(path, 2)  # a FIFO planted before the start: replaced by the file
    assert turns.read(path) == (0, [0, 1])
    path.unlink()
    os.mkfifo(path)  # ... and one swapped in while the variants run: no hang, no traceback
    waiter = turns.Turns(path, 1)
    waiter.wait(lambda: False)
    assert not waiter.on
    turns.retire(path, 0)
    assert turns.read(path) is None
