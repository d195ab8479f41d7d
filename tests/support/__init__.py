"""Helpers the tests share (conftest.py keeps the fixtures and pytest's hooks): `cli` the real command
line as a process, `records` writing and reading event files, `waits` waiting on a condition,
`machine` this CPU's rates and device reads, `paths` the repository and its fixtures; and, for some
files' tests, `dashboard` (canned runs, Textual pilots), `pictures`, `dist`, `tune`, `terminal` (a
pty), `browser` (headless Chromium)."""
