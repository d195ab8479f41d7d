"""Stand-in servers for what amptui sends to (webhooks, a TrainJob status endpoint, MLflow): on
127.0.0.1 only, each bounded. `Recording` keeps each request (path, headers, body) and answers
`status` (with `location` when set: a redirect); `hanging` accepts connections and never answers;
`refusing_port` is a port nothing listens on. Each ends at once when its `with` block does: a
server's shutdown waits for its loop's next look at the flag (POLL_S), not socketserver's 0.5 s."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

POLL_S = 0.05  # how often a stand-in's loop looks for its shutdown: the wait each close costs


class Recording:
    def __init__(self, status: int = 200, location: str | None = None, context: ssl.SSLContext | None = None):
        self.requests: list[dict] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(min(int(self.headers.get("Content-Length", 0)), 1 << 20))
                stub.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                self.send_response(stub.status)
                if stub.location:
                    self.send_header("Location", stub.location)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST

            def log_message(self, *args):
                pass

        self.status, self.location = status, location
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if context is not None:
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.scheme = "https" if context is not None else "http"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(POLL_S,), daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def recording(**kwargs) -> Iterator[Recording]:
    stub = Recording(**kwargs)
    try:
        yield stub
    finally:
        stub.close()


@contextmanager
def hanging() -> Iterator[str]:
    """http://127.0.0.1:PORT where connections are accepted (the backlog) and never answered."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        sock.settimeout(POLL_S)
        while not stop.is_set():
            try:
                held.append(sock.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(2)
        for conn in held:
            conn.close()
        sock.close()


def refusing_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then let go)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_ca_and_server_cert(folder: Path) -> tuple[Path, Path, Path]:
    """A CA, and a certificate for IP 127.0.0.1 it signed (openssl CLI)."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl to make the stand-in CA")
    ext = folder / "san.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True, timeout=60)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "1",
            "-subj", "/CN=stand-in trainer CA")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
            "-subj", "/CN=127.0.0.1")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.crt", "-days", "1", "-extfile", "san.cnf")
    return folder / "ca.crt", folder / "server.crt", folder / "server.key"


@pytest.fixture(scope="session")
def stand_in_certs(tmp_path_factory) -> tuple[Path, Path, Path]:
    """make_ca_and_server_cert once a session (three RSA keys: a few tenths of a second each); the
    tests only read the files."""
    return make_ca_and_server_cert(tmp_path_factory.mktemp("stand-in-ca"))


STAND_IN_TOKEN = "eyJ-stand-in-projected-token-0123456789"  # the credential tests' token: never to be shown


@pytest.fixture
def tls(stand_in_certs, tmp_path):
    """(the CA file, a server context with its certificate, a token file holding STAND_IN_TOKEN)."""
    ca, cert, key = stand_in_certs
    token = tmp_path / "token"
    token.write_text(STAND_IN_TOKEN + "\n")
    return ca, server_context(cert, key), token


def trainjob_env(url: str, token, ca) -> dict:
    """The variables the Kubeflow Trainer gives a trainer: status URL, token file, CA file."""
    from amptui.telemetry import trainjob

    return {trainjob.URL_ENV: url, trainjob.TOKEN_ENV: str(token), trainjob.CA_ENV: str(ca)}


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


# --- the Kubeflow Trainer's status endpoint (tests of telemetry/trainjob.py, in process and as a run) -------

TRAINJOB_TOKEN = "eyJ-stand-in-projected-token"


@pytest.fixture
def trainjob_stub(stand_in_certs, tmp_path):
    """The Trainer's status endpoint, on 127.0.0.1 only, over TLS from a throwaway CA: records each POST
    (path, headers, body). Yields (the plugin's variables, the posts)."""

    ca, cert, key = stand_in_certs
    posts: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(min(int(self.headers.get("Content-Length", 0)), 1 << 20))
            posts.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": json.loads(body)})
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = server_context(cert, key).wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, args=(POLL_S,), daemon=True)
    thread.start()
    token = tmp_path / "token"
    token.write_text(TRAINJOB_TOKEN + "\n")
    url = f"https://127.0.0.1:{server.server_address[1]}/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/job/status"
    env = trainjob_env(url, token, ca)
    yield env, posts
    server.shutdown()
    server.server_close()
