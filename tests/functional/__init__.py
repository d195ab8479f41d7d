"""Functional tests, in this process: Textual pilots and snapshots, the command line's main(), the trainer in process, run folders and files."""
