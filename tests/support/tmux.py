"""The real `amptui` in tmux, as a person at a terminal runs it: keys sent, the screen read back."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

from support.waits import wait_until


class Tmux:
    def __init__(self, cwd: Path, env: dict[str, str], width: int = 110, height: int = 34):
        self.name = f"amptui-e2e-{uuid.uuid4().hex[:8]}"
        self.env = env
        # A private server (its own socket, no config file): a tmux server the user already runs would
        # give the session that server's environment (another test's XDG_CONFIG_HOME, saved toggles).
        self.tmux = ["tmux", "-L", self.name, "-f", os.devnull]
        subprocess.run([*self.tmux, "new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height),
                        "-c", str(cwd), "bash --noprofile --norc"], check=True, env=env)

    def send(self, *keys: str) -> None:
        subprocess.run([*self.tmux, "send-keys", "-t", self.name, *keys], check=True)

    def type_line(self, text: str) -> None:
        subprocess.run([*self.tmux, "send-keys", "-t", self.name, "-l", text], check=True)
        self.send("Enter")

    def screen(self) -> str:
        return subprocess.run([*self.tmux, "capture-pane", "-p", "-t", self.name], capture_output=True, text=True,
                              check=True).stdout

    def title(self) -> str:
        """The pane's title (an OSC 2 sequence written to the terminal changes it)."""
        return subprocess.run([*self.tmux, "display-message", "-p", "-t", self.name, "#{pane_title}"],
                              capture_output=True, text=True, check=True).stdout.strip()

    def wait_for(self, predicate, timeout: float = 60.0, what: str = "") -> str:
        seen = [""]

        def shows() -> str | None:
            seen[0] = self.screen()
            return seen[0] if predicate(seen[0]) else None

        return wait_until(shows, timeout, lambda: f"{what or predicate}; screen:\n{seen[0]}", step=0.25)

    def kill(self) -> None:
        subprocess.run([*self.tmux, "kill-server"], capture_output=True)
