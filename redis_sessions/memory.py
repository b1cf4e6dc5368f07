"""In-process state: the Redis stores, run on an in-process fakeredis server.

Memory mode has no implementation of its own. ``MemoryResponseSessionStore``,
``MemorySession`` and ``MemoryConversationStore`` are the Redis classes on a
``fakeredis.FakeServer`` in this process, which runs the very ``lua/*.lua``
scripts Redis and Valkey run (fakeredis executes them with lupa), with the
server's clock (``TIME``), expiry and reply types. There is no second copy of
any script to drift from the first.

Stores given the same ``server`` see the same state, as clients of one Redis
do. By default each response and conversation store has a server of its own
(a response store given ``conversations=`` shares theirs), and every
``MemorySession`` shares one process-wide server, as sessions with the same
id and prefix on one Redis would. A client is made per event loop on demand.

Expired keys go lazily when touched, and every :data:`SWEEP_EVERY` commands a
client sweeps the server's expired keys (fakeredis keeps them in a heap by
deadline, so a sweep costs only what has expired), so nothing expired
accumulates in a long-running process.

Tests that move time move the fake server's clock (``tests/conftest.py``,
fixture ``clocked``), not a second code path.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
import weakref
from typing import Any, Awaitable, Callable, Iterable, Optional, TypeVar

import fakeredis

from .conversations import RedisConversationStore
from .items import RedisSession
from .keys import KeySpace
from .link import RedisLink
from .responses import RedisResponseSessionStore
from .models import StoredResponseSession
from .responses.store import initial_sessions

T = TypeVar("T")

SWEEP_EVERY = 1024
"""Commands a client sends between two sweeps of its server's expired keys."""

_SERVERS: "weakref.WeakSet[fakeredis.FakeServer]" = weakref.WeakSet()
"""Every in-process server memory mode runs on (made here or given), for a fork."""
_HELD: list[fakeredis.FakeServer] = []


def _server(server: Optional[fakeredis.FakeServer] = None) -> fakeredis.FakeServer:
    """``server`` (else a new one), made safe to fork: see :func:`_before_fork`."""
    server = server if server is not None else fakeredis.FakeServer()
    _SERVERS.add(server)
    return server


def _before_fork() -> None:
    """A fork copies only the forking thread: a server lock another thread held at that
    moment would stay held in the child for good, and its first call would hang. So the
    fork waits until no thread is inside a command (each lock is held for one command,
    never two at once, so taking them one by one cannot deadlock), and both processes
    start from a server between two commands."""
    for server in list(_SERVERS):
        server.lock.acquire()
        _HELD.append(server)


def _after_fork() -> None:
    while _HELD:
        _HELD.pop().lock.release()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork, after_in_child=_after_fork)

SHARED_SERVER = _server()
"""The process-wide server of ``MemorySession``s built without ``server=``."""


class _SweepingClient(fakeredis.FakeAsyncRedis):
    """A fakeredis client that asks its server to drop expired keys now and then
    (``DBSIZE`` does: fakeredis removes every key past its deadline first)."""

    _sent = 0

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        self._sent += 1
        if self._sent % SWEEP_EVERY == 0:
            await super().execute_command("DBSIZE")  # type: ignore[no-untyped-call]
        return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]


class _SyncSweepingClient(fakeredis.FakeRedis):
    """The same, for the sync classes."""

    _sent = 0

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self._sent += 1
        if self._sent % SWEEP_EVERY == 0:
            super().execute_command("DBSIZE")  # type: ignore[no-untyped-call]
        return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]


def sync_client(server: Optional[fakeredis.FakeServer] = None) -> fakeredis.FakeRedis:
    """A sync client on ``server`` (else a new server), for the sync classes in memory mode
    (``config.create_sync_*``): ``SyncResponseSessionStore(sync_client())``."""
    return _SyncSweepingClient(server=_server(server))


def _link(server: fakeredis.FakeServer) -> RedisLink:
    """A link that makes a client per event loop on ``server``; no time budget (no network)."""
    return RedisLink(factory=functools.partial(_SweepingClient, server=server), timeout=None, reopen=True)


def _run_apart(work: Callable[[], Awaitable[T]]) -> T:
    """Run ``work`` to its end on an event loop of its own, in a thread of its own, so a
    synchronous constructor can save whether or not the caller's thread runs a loop."""
    box: dict[str, Any] = {}

    def main() -> None:
        try:
            box["value"] = asyncio.run(work())  # type: ignore[arg-type]
        except BaseException as exc:  # raised again in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=main, name="redis-sessions-initial-saves")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value


class MemoryConversationStore(RedisConversationStore):
    """Conversations in this process: a :class:`RedisConversationStore` on an in-process
    fakeredis server (``server``, else a new one)."""

    def __init__(self, *, server: Optional[fakeredis.FakeServer] = None, **options: Any) -> None:
        self.server = _server(server)
        super().__init__(link=_link(self.server), **options)


class MemorySession(RedisSession):
    """An item session in this process: a :class:`RedisSession` on an in-process fakeredis
    server (``server``, else the process-wide one). ``close()`` releases the running
    loop's client; the session stays usable. A fork stays on its session's server."""

    def __init__(self, session_id: str, *, server: Optional[fakeredis.FakeServer] = None, **options: Any) -> None:
        self.server = _server(server) if server is not None else SHARED_SERVER
        super().__init__(session_id, link=_link(self.server), **options)


class MemoryResponseSessionStore(RedisResponseSessionStore):
    """Response chains in this process: a :class:`RedisResponseSessionStore` on an
    in-process fakeredis server (``server``; else ``conversations``' server; else a new one).

    ``MemoryResponseSessionStore(sessions)`` starts with ``sessions`` saved, as
    GodeX's constructor takes them: each is saved as ``save`` would (so a parent
    must be among them), parents before their children whatever the order given;
    a loop among them is ``session.chain.cycle_detected``, a parent that is not
    among them ``session.chain.not_found``, and nothing is built. ``clear()``
    forgets every response (on Redis, ``redis-sessions purge`` deletes a prefix's keys)."""

    def __init__(
        self,
        sessions: Iterable[StoredResponseSession] = (),
        *,
        server: Optional[fakeredis.FakeServer] = None,
        conversations: Optional[MemoryConversationStore] = None,
        **options: Any,
    ) -> None:
        if server is None and isinstance(conversations, MemoryConversationStore):
            server = conversations.server
        self.server = _server(server)
        super().__init__(None, link=_link(self.server), conversations=conversations, **{**options, "timeout": None})
        initial = initial_sessions(sessions)
        if initial:
            _run_apart(functools.partial(self._save_each, initial))

    async def _save_each(self, sessions: list[StoredResponseSession]) -> None:
        for session in sessions:
            await self.save(session)
        await self.close()

    def clear(self) -> None:
        """Forget every response of this store's prefix (GodeX's ``clear``). Synchronous,
        as there."""
        client = fakeredis.FakeRedis(server=self.server)
        pattern = KeySpace(self.keys.prefix).scan_pattern()
        for key in client.scan_iter(match=pattern, count=1000):
            if key.endswith((b":chain", b":loc")):
                client.delete(key)
        client.close()
