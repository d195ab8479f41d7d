"""Background work: every process amptui leaves running on its own.

- `spawn.spawn` starts each of them (a trainer, an A/B group, a tune): its own session, its output
  appended to a log, nothing read from the terminal;
- `detached` is the `--detach` contract: the one JSON line such a start prints (`announce`), and
  the dashboard's way to start one and read that line back (`start`);
- `groups` and `ab`: an A/B's group file and its one loop (the CLI's and the dashboard's).
"""
