"""Unit tests: pure functions, values in and values out, in this process: no files, no app, no process."""
