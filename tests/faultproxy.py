"""A TCP proxy in front of one Redis server that can lose, hold or cut replies.

The proxy runs its own asyncio event loop in a daemon thread, so a test's
client code on pytest-asyncio's loop is never blocked by it (and a held reply
never holds up anything but its own connection). Faults are armed from the
test thread::

    with FaultProxy("127.0.0.1", server.port) as proxy:
        client = Redis.from_url(proxy.url, retry=Retry(NoBackoff(), 3), socket_timeout=0.5)
        proxy.arm("drop", match=b"INCR")
        await client.incr("k")      # the server ran INCR twice: the first reply was lost
        assert proxy.fired == 1

A fault fires on the reply to a client command whose raw RESP bytes contain
``match`` (case-sensitive). Tracking is per connection and per chunk: when the
client's bytes on a connection contain ``match``, the next bytes the server
sends on that connection are taken to be that command's reply. That holds for
redis-py, which sends one command (or one whole pipeline) at a time on a
connection and reads its reply before sending the next; with a pipeline the
fault hits the pipeline's reply as a whole.

Faults (``FAULTS``):

``drop``
    Forward the command; when the server's first reply byte arrives (so the
    server has run the command), close the client connection without relaying
    anything. The effect happened, the reply is lost.
``stall``
    Forward the command; hold the reply ``hold`` seconds (or, with
    ``hold <= 0``, until the client gives up), then close the client connection.
    The reply is never delivered. Closing the client's side ends the stall early.
``cut``
    Forward the command; relay the first half (at least one byte) of the
    first reply chunk, then close the connection.
``delay``
    Forward the command and deliver the reply intact, ``hold`` seconds late.
``drop_request``
    Close the connection without forwarding the command: the server never sees
    it (the other half of "was it applied?").

``pause()``/``resume()`` stop and restart relaying in both directions on
every connection (a blackhole: connections stay open, bytes wait). A frozen
server is better done with SIGSTOP (see faultservers.frozen).

``redirects`` (optional) maps a server address ``(host, port)`` to another; the
proxy then rewrites ``-ASK``/``-MOVED`` redirect errors from the server so a
cluster client keeps going through proxies (redis-py's ``address_remap`` only
applies to CLUSTER SLOTS, not to redirects).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import threading
from dataclasses import dataclass
from typing import Any, Callable, Optional

FAULTS = ("drop", "stall", "cut", "delay", "drop_request")

RedirectMap = Callable[[tuple[str, int]], tuple[str, int]]

_REDIRECT = re.compile(rb"(?m)^-(ASK|MOVED) (\d+) ([^\r\n]*):(\d+)\r\n")
_LOG_LIMIT = 1 << 20  # client->server bytes kept for count()


@dataclass
class _Arming:
    fault: str
    match: bytes
    remaining: int
    hold: float


@dataclass
class _Pending:
    fault: str
    hold: float


class _Conn:
    __slots__ = ("id", "client", "server", "pending")

    def __init__(self, conn_id: int, client: asyncio.StreamWriter, server: asyncio.StreamWriter) -> None:
        self.id = conn_id
        self.client = client
        self.server = server
        self.pending: Optional[_Pending] = None


class FaultProxy:
    """See the module docstring. ``start()`` (or ``with``) before use, ``close()`` after."""

    def __init__(self, target_host: str, target_port: int, *, listen_host: str = "127.0.0.1",
                 redirects: Optional[RedirectMap] = None, chunk: int = 65536) -> None:
        self.target_host = target_host
        self.target_port = target_port
        self.listen_host = listen_host
        self.redirects = redirects
        self.chunk = chunk
        self.port = 0
        self._lock = threading.Lock()
        self._arming: Optional[_Arming] = None
        self._match: Optional[bytes] = None  # the latest arm()'s match, kept for ``matched``
        self._fired = 0
        self._matched = 0
        self._accepted = 0
        self._log = bytearray()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._server: Optional[asyncio.AbstractServer] = None
        self._conns: set[_Conn] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._flowing: Optional[asyncio.Event] = None

    # -- lifecycle -------------------------------------------------------

    def start(self) -> "FaultProxy":
        if self._thread is not None:
            return self
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._listen())
            except BaseException as e:  # reported to start()
                failure.append(e)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name=f"FaultProxy->{self.target_port}", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure or not ready.is_set():
            self._thread.join(5)
            self._thread = None
            self._loop = None
            raise RuntimeError(f"FaultProxy did not start: {failure[0] if failure else 'timeout'}")
        return self

    async def _listen(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server = await asyncio.start_server(self._handle, self.listen_host, 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def close(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self._loop = self._thread = None
        if thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(10)
            finally:
                loop.call_soon_threadsafe(loop.stop)
                thread.join(10)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        if self._flowing is not None:
            self._flowing.set()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def __enter__(self) -> "FaultProxy":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- addresses -------------------------------------------------------

    @property
    def address(self) -> tuple[str, int]:
        return (self.listen_host, self.port)

    @property
    def url(self) -> str:
        return f"redis://{self.listen_host}:{self.port}/0"

    # -- faults (called from the test thread) ----------------------------

    def arm(self, fault: str, *, match: bytes = b"EVALSHA", times: int = 1, hold: float = 0.0) -> None:
        """Fault the replies to the next ``times`` client commands containing ``match``.
        Replaces any earlier arming (not a fault already attached to a command in flight)."""
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; one of {FAULTS}")
        if not match:
            raise ValueError("match must not be empty")
        if times < 1:
            raise ValueError("times must be >= 1")
        if fault == "delay" and hold <= 0:
            raise ValueError("delay needs hold > 0")
        with self._lock:
            self._arming = _Arming(fault, bytes(match), times, hold)
            self._match = bytes(match)
            self._matched = 0

    def disarm(self) -> None:
        """No more faults: forget the arming and any fault attached to a command
        whose reply has not arrived yet (a stall already holding a reply goes on)."""
        with self._lock:
            self._arming = None
            for conn in self._conns:
                conn.pending = None

    @property
    def armed(self) -> bool:
        with self._lock:
            return self._arming is not None

    @property
    def fired(self) -> int:
        """How many faults have fired (counted before the connection is closed)."""
        with self._lock:
            return self._fired

    @property
    def matched(self) -> int:
        """How many client commands contained the latest arm()'s ``match``, from that
        arm() on, faulted or not (still counting after the arming ran out or disarm())."""
        with self._lock:
            return self._matched

    @property
    def accepted(self) -> int:
        """How many client connections the proxy has accepted."""
        with self._lock:
            return self._accepted

    def count(self, pattern: bytes) -> int:
        """Occurrences of ``pattern`` in the bytes clients sent (last 1 MiB)."""
        with self._lock:
            return bytes(self._log).count(pattern)

    async def until_fired(self, n: int = 1, timeout: float = 30.0) -> None:
        """Wait (on the caller's loop) until ``fired >= n``; TimeoutError otherwise."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.fired < n:
            if loop.time() > deadline:
                raise TimeoutError(f"{self.fired} fault(s) fired, waited for {n}")
            await asyncio.sleep(0.005)

    def pause(self) -> None:
        """Blackhole: stop relaying bytes in both directions until ``resume()``."""
        self._call(self._set_flowing(False))

    def resume(self) -> None:
        self._call(self._set_flowing(True))

    def kill_connections(self) -> int:
        """Reset every open connection now (no command involved); how many there were."""
        result: int = self._call(self._kill_all())
        return result

    async def _set_flowing(self, on: bool) -> None:
        assert self._flowing is not None
        if on:
            self._flowing.set()
        else:
            self._flowing.clear()

    async def _kill_all(self) -> int:
        conns = list(self._conns)
        for conn in conns:
            for w in (conn.client, conn.server):
                w.transport.abort()
        return len(conns)

    def _call(self, coro: Any) -> Any:
        if self._loop is None:
            coro.close()
            raise RuntimeError("FaultProxy is not running")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    # -- relaying (proxy thread) -----------------------------------------

    async def _handle(self, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        swriter: Optional[asyncio.StreamWriter] = None
        conn: Optional[_Conn] = None
        try:
            with self._lock:
                self._accepted += 1
                conn_id = self._accepted
            try:
                sreader, swriter = await asyncio.open_connection(self.target_host, self.target_port)
            except OSError:
                return
            with contextlib.suppress(OSError):
                swriter.transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with contextlib.suppress(OSError):
                cwriter.transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Conn(conn_id, cwriter, swriter)
            with self._lock:
                self._conns.add(conn)
            up = asyncio.ensure_future(self._upstream(conn, creader))
            down = asyncio.ensure_future(self._downstream(conn, sreader))
            try:
                await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                up.cancel()
                down.cancel()
                await asyncio.gather(up, down, return_exceptions=True)
        except asyncio.CancelledError:
            pass
        finally:
            if conn is not None:
                with self._lock:
                    self._conns.discard(conn)
            for w in (cwriter, swriter):
                if w is not None:
                    w.close()
            for w in (cwriter, swriter):
                if w is not None:
                    with contextlib.suppress(Exception, asyncio.CancelledError):
                        await asyncio.wait_for(w.wait_closed(), 2)
            self._tasks.discard(task)

    async def _upstream(self, conn: _Conn, reader: asyncio.StreamReader) -> None:
        """Client -> server, attaching a fault to a command that matches."""
        tail = b""
        while True:
            try:
                data = await reader.read(self.chunk)
            except OSError:
                return
            if not data:
                return
            window = tail + data
            drop_request = False
            with self._lock:
                self._log += data
                if len(self._log) > _LOG_LIMIT:
                    del self._log[: len(self._log) - _LOG_LIMIT]
                arming = self._arming
                if self._match is not None and self._match in window:
                    self._matched += 1
                if arming is not None and arming.match in window:
                    if conn.pending is None:
                        arming.remaining -= 1
                        if arming.remaining <= 0:
                            self._arming = None
                        if arming.fault == "drop_request":
                            self._fired += 1
                            drop_request = True
                        else:
                            conn.pending = _Pending(arming.fault, arming.hold)
                keep = len(self._match) - 1 if self._match is not None else 0
            if drop_request:
                return
            tail = window[-keep:] if keep else b""
            await self._wait_flowing()
            conn.server.write(data)
            await conn.server.drain()

    async def _downstream(self, conn: _Conn, reader: asyncio.StreamReader) -> None:
        """Server -> client, applying the fault attached to the command in flight."""
        held = b""  # with redirects: bytes after the last CRLF, not relayed yet
        while True:
            try:
                data = await reader.read(self.chunk)
            except OSError:
                return
            if not data:
                if held:
                    await self._send(conn, held)
                return
            with self._lock:
                pending, conn.pending = conn.pending, None
                if pending is not None:
                    self._fired += 1
            if pending is not None:
                buf, held = held + data, b""
                if pending.fault == "drop":
                    return
                if pending.fault == "stall":
                    if pending.hold > 0:
                        await asyncio.sleep(pending.hold)
                    else:
                        await asyncio.Event().wait()  # until the client (or close()) ends it
                    return
                if pending.fault == "cut":
                    await self._send(conn, buf[: max(1, len(buf) // 2)])
                    return
                if pending.fault == "delay":
                    await asyncio.sleep(pending.hold)
                    data = buf
            if self.redirects is None:
                await self._send(conn, data)
                continue
            buf = held + data
            end = buf.rfind(b"\r\n")
            if end < 0:
                held = buf
                continue
            out, held = buf[: end + 2], buf[end + 2:]
            await self._send(conn, _REDIRECT.sub(self._rewrite, out))

    def _rewrite(self, m: "re.Match[bytes]") -> bytes:
        assert self.redirects is not None
        host, port = self.redirects((m.group(3).decode(), int(m.group(4))))
        return b"-%s %s %s:%d\r\n" % (m.group(1), m.group(2), host.encode(), port)

    async def _send(self, conn: _Conn, data: bytes) -> None:
        await self._wait_flowing()
        conn.client.write(data)
        await conn.client.drain()

    async def _wait_flowing(self) -> None:
        if self._flowing is not None and not self._flowing.is_set():
            await self._flowing.wait()
