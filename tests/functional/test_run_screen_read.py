"""The run screen hears from its tail through one message (RunRead, issue 52): with the screen's own
redraw timer slowed to once a minute, a run is still read, drawn and kept up to date, because each
change the worker reads into the model is posted to the screen."""

from __future__ import annotations

from support.dashboard import SCALER, app_for, async_test, until


@async_test
async def test_the_run_screen_draws_what_its_tail_posts_without_waiting_for_its_timer(root, monkeypatch):
    from amptui.dashboard.screens.run import screen as run_screen

    monkeypatch.setattr(run_screen, "FLUSH_HZ", 1 / 60)  # the timer alone would draw nothing within the test
    heard = []
    original = run_screen.RunScreen.on_run_read
    monkeypatch.setattr(run_screen.RunScreen, "on_run_read", lambda self, message: (heard.append(message),
                                                                                     original(self, message)))
    app = app_for(root, watch=root / SCALER)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, run_screen.RunScreen) and not app.screen.model.loading
                    and app.screen.drawn(), 30)
        screen = app.screen
        assert heard and all(isinstance(m, run_screen.RunRead) for m in heard)
        assert screen.model.run.step == 256 and "256/256" in str(screen.query_one("#progress-text").render())
