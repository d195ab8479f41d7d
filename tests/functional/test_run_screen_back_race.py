"""A run screen left (Back, from the command palette or `q`) right after it was pushed, before its
Mount was handled, then a fresh one pushed: the first one's on_mount ran on a screen already popped,
whose widgets were going away, and crashed the dashboard (NoMatches '#progress-text'; found by the
read-only walk of issue 40). A popped screen's on_mount now does nothing."""

from __future__ import annotations

from support.dashboard import LIVE, app_for, async_test, copy_runs, home_ready, until


@async_test
async def test_back_right_after_opening_a_run_screen_then_opening_it_again_does_not_crash(root):
    from amptui.dashboard.screens.run.screen import RunScreen

    copy_runs(root, live=True)
    app = app_for(root)
    async with app.run_test(size=(120, 40)) as pilot:
        home = await home_ready(pilot, 4)
        for _ in range(3):
            screen = RunScreen(root / LIVE)
            app.push_screen(screen)
            back = next(c for c in app.get_system_commands(screen) if c.title.split()[0].lower() == "back")
            result = back.callback()  # before the screen's Mount is handled
            if hasattr(result, "__await__"):
                await result
            await until(pilot, lambda: app.screen is home)
            fresh = RunScreen(root / LIVE)
            app.push_screen(fresh)
            await until(pilot, lambda: app.screen is fresh and fresh.query("#progress-text"))
            await until(pilot, lambda: fresh.model.run.start is not None)  # mounted: its tail reads the run
            app.pop_screen()
            await until(pilot, lambda: app.screen is home)
    assert app.return_code in (None, 0)  # the dashboard never died of it
