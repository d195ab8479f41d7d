"""The run screen hears from its tail through one message (RunRead, issue 52): with the screen's own
redraw timer slowed to once a minute, a run is still read, drawn and kept up to date, because each
change the worker reads into the model is posted to the screen. The tail ends with its screen."""

from __future__ import annotations

import sys

from support.dashboard import SCALER, app_for, async_test, until
from support.waits import wait_until


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


@async_test
async def test_leaving_a_finished_runs_screen_ends_its_tail_at_once_not_after_its_slow_look(root, monkeypatch):
    """A finished run's tail looks at the files only now and then; quitting (or going back) must not
    wait for its next look: the app's exit joins the tail's thread. The look is made a minute here."""
    import threading

    from amptui.dashboard import runtail
    from amptui.dashboard.screens.run import screen as run_screen

    monkeypatch.setattr(run_screen, "TAIL_LOOK_S", 60.0)
    monkeypatch.setattr(run_screen, "TAIL_IDLE_LOOK_S", 60.0)
    tail_threads = []
    prefill = runtail.RunTail.prefill
    monkeypatch.setattr(runtail.RunTail, "prefill",
                        lambda self: (tail_threads.append(threading.current_thread()), prefill(self))[1])
    app = app_for(root, watch=root / SCALER)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, run_screen.RunScreen) and not app.screen.model.loading
                    and app.screen.drawn())
        await pilot.press("q")  # `amptui watch`: q quits
    [thread] = tail_threads  # a thread of the loop's pool: it outlives the tail, so look at what it runs

    def still_tailing() -> bool:
        frame = sys._current_frames().get(thread.ident)
        while frame is not None and frame.f_code is not run_screen.RunScreen.tail.__wrapped__.__code__:
            frame = frame.f_back
        return frame is not None

    wait_until(lambda: not still_tailing(), 20, "the tail's thread to leave the tail")  # a third of its minute
