"""`amptui serve` as a user starts it, for the tests of serving (tests/test_serve*.py): a free port,
the real command in a session of its own, its printed address, the tabs' dashboard processes."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
from pathlib import Path

import psutil

from amptui.jobs.spawn import amptui_python
from support.waits import wait_until


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_listening(proc: subprocess.Popen, port: int, timeout: float = 60) -> None:
    def listening() -> bool:
        assert proc.poll() is None, proc.communicate()[0]
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            return False

    wait_until(listening, timeout, f"amptui serve listening on {port} ({timeout:g} s)", step=0.2)


def start_serve(runs_dir: Path, port: int, *args: str, cwd: Path | None = None,
                stdin: int | None = None) -> tuple[subprocess.Popen, str, str]:
    """`amptui serve` as a user starts it (the `amptui` command: its own folder first on the path,
    not the working folder); (the process, the address it printed, what it printed up to there)."""
    proc = subprocess.Popen([*amptui_python(), "-m", "amptui", "--runs-dir", str(runs_dir), "serve", "--port", str(port),
                             *args], cwd=cwd, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=0,
                            start_new_session=True)
    said = ""
    while not said.endswith("(whoever has it acts as you):\n"):
        # unbuffered, a byte at a time: communicate() later reads the pipe itself, past any buffer
        line = proc.stdout.readline().decode()
        assert line, f"amptui serve ended, saying:\n{said}"
        said += line
    address = proc.stdout.readline().decode().strip()  # the address: the last line, on its own
    said += address + "\n"
    wait_until_listening(proc, port)
    return proc, address, said


def stop_serve(proc: subprocess.Popen) -> str:
    os.killpg(proc.pid, signal.SIGTERM)  # the server and the dashboards it started for the tabs
    return proc.communicate(timeout=30)[0].decode(errors="replace")


def get(port: int, path: str, cookie: str | None = None) -> tuple[int, http.client.HTTPResponse, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", path, headers={"Host": f"localhost:{port}", **({"Cookie": cookie} if cookie else {})})
    answer = conn.getresponse()
    body = answer.read()
    conn.close()
    return answer.status, answer, body


def secret_of(address: str) -> str:
    return address.split("?token=")[1]


def tab_processes(server: subprocess.Popen) -> list[psutil.Process]:
    """The dashboards serve runs for its tabs (its children; `exec`ed by the shell that starts them)."""
    try:
        return [p for p in psutil.Process(server.pid).children() if p.status() != psutil.STATUS_ZOMBIE]
    except psutil.Error:
        return []
