"""The footer (dashboard/widgets/keysfooter.py): rebuilt only when the keys it shows change, and then
always to the keys that apply now. Each test compares what is mounted with what Textual's own Footer
would compose at that moment: a finished run's `s Stop` once stayed shown after a race."""

from __future__ import annotations

import asyncio
import random

from support.dashboard import (
    LIVE,
    SCALER,
    app_for,
    async_test,
    copy_runs,
    drawn_and_flushed,
    finish_live_run,
    home_ready,
    settled,
    until,
)
from textual.compose import compose
from textual.screen import ModalScreen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey, FooterLabel, KeyGroup

from amptui.dashboard.screens.run.controls import RunStatusPanel
from amptui.dashboard.screens.run.screen import RunScreen
from amptui.dashboard.widgets.keysfooter import KeysFooter
from amptui.dashboard.widgets.runtable import RunTable


def described(widgets, mounted: bool) -> list[tuple]:
    """The footer's children as drawn: each key (grouped keys inside their group), each group's label."""
    out: list[tuple] = []
    for w in widgets:
        if isinstance(w, KeyGroup):
            inner = w.children if mounted else w._pending_children  # composed, not mounted: still pending
            out.append(("group", sorted(w.classes), described(inner, mounted)))
        elif isinstance(w, FooterKey):  # -compact: set by the footer's data binding once mounted
            out.append(("key", w.key, w.key_display, w.description, w.action, w._disabled, w.tooltip,
                        sorted(w.classes - {"-compact"})))
        elif isinstance(w, FooterLabel):
            out.append(("label", str(w.content)))
        else:
            out.append(("other", type(w).__name__))
    return out


def mounted(footer: Footer) -> list[tuple]:
    return described(footer.children, mounted=True)


def stock(footer: Footer) -> list[tuple]:
    """What Textual's Footer composes for this footer now (its compose, not KeysFooter's)."""
    with footer._context():  # data_bind asks which widget composes
        return described(compose(footer, Footer.compose(footer)), mounted=False)


def keys_of(footer: Footer) -> list[str]:
    return [k.key for k in footer.query(FooterKey)]


class Cover(ModalScreen):
    """A screen on top of the run screen, opened and closed at once: nothing of its own to do."""


def count_rebuilds(monkeypatch) -> list[KeysFooter]:
    """Each real rebuild (Textual's recompose, under KeysFooter's look) appends its footer."""
    rebuilt: list[KeysFooter] = []
    recompose = Footer.recompose

    async def counted(self) -> None:
        rebuilt.append(self)
        await recompose(self)

    monkeypatch.setattr(Footer, "recompose", counted)
    return rebuilt


@async_test
async def test_a_signal_that_changes_no_key_keeps_the_footer_and_one_that_does_rebuilds_it(root, monkeypatch):
    rebuilt = count_rebuilds(monkeypatch)
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        home = await home_ready(pilot, 3)
        footer = home.query_one(KeysFooter)
        await settled(pilot)
        assert "space" not in keys_of(footer)  # the presets list has the focus: nothing to mark
        table = home.query_one(RunTable)
        table.focus()
        await until(pilot, lambda: "space" in keys_of(footer))  # the run list has: space marks a run
        await settled(pilot)
        assert mounted(footer) == stock(footer)
        children, keys, before = list(footer.children), list(footer.query(FooterKey)), len(rebuilt)
        for key in ("down", "down", "up"):  # the cursor moves; the keys that apply stay the same
            await pilot.press(key)
        for _ in range(5):
            home.refresh_bindings()
        table.blur()
        table.focus()
        await settled(pilot)
        assert len(rebuilt) == before, "a signal that changed no key rebuilt the footer"
        assert all(a is b for a, b in zip(footer.children, children, strict=True))
        assert all(a is b for a, b in zip(footer.query(FooterKey), keys, strict=True))
        assert mounted(footer) == stock(footer)


@async_test
async def test_a_run_that_ends_while_other_signals_come_leaves_no_stop_key(root):
    copy_runs(root, live=True)
    app = app_for(root, watch=root / LIVE)
    async with app.run_test(size=(110, 34)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.model.status == "running")
        screen = app.screen
        footer = screen.query_one(KeysFooter)
        await until(pilot, lambda: "s" in keys_of(footer))
        ended = False

        async def signals() -> None:  # focus moves and bindings refreshed, all through the run's end
            while not ended:
                screen.refresh_bindings()
                screen.focus_next()
                screen.refresh_bindings()
                await asyncio.sleep(0.01)

        task = asyncio.create_task(signals())
        finish_live_run(root / LIVE / "events.jsonl", 129)
        await until(pilot, lambda: screen.model.status == "completed")
        await pilot.pause(0.1)
        ended = True
        await task
        await settled(pilot)
        assert "s" not in keys_of(footer) and screen.refusal("stop") is not None
        assert mounted(footer) == stock(footer)


@async_test
async def test_many_signals_and_key_changes_interleaved_settle_on_the_keys_that_apply(root, monkeypatch):
    """Whether s applies changes at any moment, even between two looks of one rebuild (as a run's status
    does: the tail's thread writes it), while refreshes, focus moves and modal screens opened and closed
    on top (the footer's rebuilds then run on two screens' queues) come without waiting for the footer.
    Once s stays put and one more signal is settled, the footer shows what Textual's Footer composes."""
    pick = random.Random(20261129)
    settled_answer: bool | None = None  # None: s applies or not at random, at each look

    def stop_applies() -> bool:
        return pick.random() < 0.5 if settled_answer is None else settled_answer

    refusal = RunStatusPanel.refusal
    monkeypatch.setattr(RunStatusPanel, "refusal", lambda self, action:
                        (None if stop_applies() else "not now") if action == "stop" else refusal(self, action))
    app = app_for(root, watch=root / SCALER)  # a finished run
    async with app.run_test(size=(110, 34)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, RunScreen) and not app.screen.model.loading)
        screen = app.screen
        await drawn_and_flushed(pilot, screen)
        footer = screen.query_one(KeysFooter)
        for round_ in range(3):  # the versions taken back failed in the first
            settled_answer = None
            app.push_screen(Cover())
            for i in range(40):
                screen.refresh_bindings()
                if i % 13 == 0:
                    screen.focus_next()
                if i == 20:  # another modal in its place: callbacks go to its queue
                    app.pop_screen()
                    app.push_screen(Cover())
                if pick.random() < 0.3:
                    await asyncio.sleep(0)  # a rebuild may start here, and the next signals come during it
            app.pop_screen()
            screen.refresh_bindings()
            await settled(pilot)
            settled_answer = pick.random() < 0.5
            screen.refresh_bindings()  # s changed (or not): a signal follows, as after every change
            await settled(pilot)
            assert app.is_running and app._exception is None
            assert mounted(footer) == stock(footer), round_
            assert keys_of(footer).count("s") == int(settled_answer), round_


@async_test
async def test_grouped_keys_the_palette_key_tooltips_and_dim_keys_are_drawn_as_textual_draws_them():
    """What no dashboard screen has today, kept as Textual's Footer has it: keys of one group with its
    label, the command palette's key, a tooltip, a key that does not apply now drawn dim."""
    from textual.app import App
    from textual.binding import Binding

    arrows = Binding.Group("Move", compact=True)

    class Keys(App):
        BINDINGS = [Binding("left", "move('l')", "Left", group=arrows), Binding("right", "move('r')", "Right", group=arrows),
                    Binding("x", "cut", "Cut", tooltip="cut the line"), Binding("z", "undo", "Undo")]
        undo_applies = False

        def compose(self):
            yield KeysFooter()

        def check_action(self, action, parameters):
            return None if action == "undo" and not self.undo_applies else True  # None: shown dim

    app = Keys()
    async with app.run_test(size=(100, 10)) as pilot:
        footer = app.screen.query_one(KeysFooter)
        await until(pilot, lambda: "z" in keys_of(footer))
        await settled(pilot)
        assert mounted(footer) == stock(footer)
        drawn = mounted(footer)
        assert drawn[0][0] == "group" and ("label", "Move") in drawn and "ctrl+p" in keys_of(footer)
        assert footer.query_one(".-disabled", FooterKey).key == "z"
        app.undo_applies = True
        app.screen.refresh_bindings()
        await until(pilot, lambda: not footer.query(".-disabled"))
        assert mounted(footer) == stock(footer)
