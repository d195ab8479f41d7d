"""The Textual dashboard: a home screen of presets and runs, a live run screen, compare and tune
screens. Imports amptui.core and Textual only. Entry point: `amptui.dashboard.app.make_app`."""
