"""The real `amptui` in tmux, as a person at a terminal runs it: keys sent, the screen read back."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path


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

    def wait_for(self, predicate, timeout: float = 60.0, what: str = "") -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.screen()
            if predicate(text):
                return text
            time.sleep(0.25)
        raise AssertionError(f"timed out waiting for {what or predicate}; screen:\n{text}")

    def kill(self) -> None:
        subprocess.run([*self.tmux, "kill-server"], capture_output=True)
