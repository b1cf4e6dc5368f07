"""How a store or a session reaches Redis: ``RedisLink``, the client for the running loop.

- It hands out the client for the *running* event loop. A link that built its own
  client (from a URL) builds one per event loop, so a sync application that calls
  ``asyncio.run`` per request, or the Agents SDK's ``run_sync``, just works. A link
  given a caller's client checks that it is used from the loop it was first used on and
  otherwise raises ``session.client.wrong_loop`` (redis-py connections belong to one
  loop; reusing them elsewhere fails with ``Event loop is closed`` or hangs).
- Synchronous clients (``redis.Redis``, ``redis.cluster.RedisCluster``) go through the
  same stores (``RedisLink(client, blocking=True)``): the stores' logic is written once,
  as ``async def`` methods, and only the I/O edge (:mod:`.edge`) tells the two kinds
  apart, with :func:`io`. A sync client's call blocks and returns its reply, so a store
  method never suspends, and :func:`run_blocking` runs it to its end with one
  ``send(None)``, without an event loop. One copy of every key, script, check and retry
  serves both APIs, and a sync call costs one coroutine frame per layer.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import warnings
import weakref
from typing import Any, AsyncGenerator, Awaitable, Callable, Coroutine, Mapping, TypeVar, Union, cast

import redis as sync_redis
import redis.cluster as sync_cluster
from redis import exceptions as rx
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from . import budget
from .budget import DEFAULT_TIMEOUT
from .client import from_url
from .errors import ErrorCode, SessionError
from .validate import seconds

AnyRedis = Union["Redis", "RedisCluster"]
SyncRedis = Union["sync_redis.Redis", "sync_cluster.RedisCluster"]
T = TypeVar("T")
CLUSTERS = (RedisCluster, sync_cluster.RedisCluster)
"""Either API's cluster client: ``isinstance(client, CLUSTERS)``."""
SYNC_CLIENTS = (sync_redis.Redis, sync_cluster.RedisCluster)


async def io(result: Any) -> Any:
    """A command's reply, from either kind of client: an asyncio client's call returns
    an awaitable (awaited here), a sync client's the reply itself (it blocked already)."""
    return await result if hasattr(type(result), "__await__") else result


async def _ready(value: T) -> T:
    return value


def awaitable(result: Any) -> Awaitable[Any]:
    """``result`` as something to await: itself if it is one (an asyncio client's call,
    passed on without a coroutine of ours), else a coroutine that returns it at once."""
    return cast(Awaitable[Any], result) if hasattr(type(result), "__await__") else _ready(result)


class SuspendedError(RuntimeError):
    """A store method driven without a loop waited for something: a bug of this package
    (an asyncio client, or an I/O edge not made sync-aware)."""


def run_blocking(call: Awaitable[T]) -> T:
    """Run a store's coroutine to its end without an event loop.

    Every I/O edge of a store on a sync client blocks and returns, so the coroutine
    finishes on its first ``send(None)``: no loop is made, no thread started, no future
    awaited. If it ever yields (it awaited a real asyncio future), it is closed and
    :class:`SuspendedError` raised, never left half-run or silently run on a loop."""
    coro = cast(Coroutine[Any, Any, T], call)  # the store's methods are coroutines
    try:
        coro.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    coro.close()
    raise SuspendedError("internal error: a synchronous call waited on an event loop "
                         "(a redis.asyncio client given to a sync store?)")

B = TypeVar("B", bound="Blocking")


class Blocking:
    """What the three synchronous classes share: each holds ``core``, the asyncio store or
    session whose methods it runs with :func:`run_blocking`, on a blocking link."""

    core: Any

    @staticmethod
    def _blocking_link(owner: str, client: SyncRedis | None, link: RedisLink | None, timeout: float | None,
                      raw_replies: bool = False) -> RedisLink:
        """``link``, or one made for ``client``; refused unless it is blocking."""
        link = link if link is not None else RedisLink(client, timeout=timeout, raw_replies=raw_replies, blocking=True)
        if not link.blocking:
            raise SessionError(ErrorCode.INPUT_INVALID, f"{owner} needs a blocking link")
        return link

    @property
    def client(self) -> SyncRedis:
        """The redis-py sync client this object uses."""
        return self.core.link.client  # type: ignore[no-any-return]

    @property
    def timeout(self) -> float | None:
        """The time budget of one call, in seconds (``None``: no budget)."""
        return self.core.timeout  # type: ignore[no-any-return]

    def close(self) -> None:
        """Close the client if this object built it (``from_url``); else nothing."""
        self.core.link.close_now()

    def __enter__(self: B) -> B:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def as_text(value: object) -> str:
    """A reply as text: bytes are decoded (undecodable bytes kept as surrogates)."""
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


async def close_client(client: AnyRedis) -> None:
    if isinstance(client, SYNC_CLIENTS):
        try:
            client.close()
        except (rx.RedisError, OSError):
            pass
        return
    try:
        await client.aclose()
        if isinstance(client, RedisCluster):
            # RedisCluster.aclose() does nothing while the client is marked for
            # re-initialization, which a failed call (a timeout, a dead node) leaves
            # it in: its node connections would leak. Close them ourselves.
            await client.nodes_manager.aclose()
            await client.nodes_manager.aclose("startup_nodes")
    except (rx.RedisError, OSError, RuntimeError):
        pass  # closing a client whose server or loop is gone has nothing left to release


_BUILDING = threading.Lock()


class _NoLoop:
    """What a sync link's close() is recorded under: there is no event loop to key it by."""


_SYNC = _NoLoop()


class RedisLink:
    """A store's or session's way to Redis: the client for the running loop, the budget.

    Either ``client`` (the caller's; never closed here) or ``factory`` (builds a
    client per event loop; :meth:`close` closes the current loop's one).
    ``raw_replies=True``: the user of the link asks redis-py for undecoded
    replies on every command (``NEVER_DECODE``), so a caller's client made with
    ``decode_responses=True`` is accepted.

    ``blocking=True``: ``client`` is redis-py's sync client, one for every thread
    (its connection pool is thread-safe) and never tied to a loop. After a fork the
    pool sees another pid and opens new connections (redis-py's ``_checkpid``), so a
    child never reuses its parent's sockets.

    A link that built its client (``factory``) is closed by :meth:`close` on the running
    loop (a sync link: for good), after which every call through it raises
    ``session.client.closed`` there, as the Agents SDK's sessions do, and it holds no
    connection; ``reopen=True`` (memory mode) only releases the loop's client, and the
    next call makes another. A link given a caller's client never closes it.
    """

    __slots__ = ("_client", "_factory", "_clients", "_loop", "timeout", "blocking", "reopen", "_closed", "_closing",
                 "owner")

    def __init__(
        self,
        client: AnyRedis | SyncRedis | None = None,
        *,
        factory: Callable[[], AnyRedis] | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        raw_replies: bool = False,
        blocking: bool = False,
        reopen: bool = False,
    ) -> None:
        if (client is None) == (factory is None):
            raise SessionError(ErrorCode.INPUT_INVALID, "a RedisLink takes a client or a factory")
        if blocking:
            if client is not None and not isinstance(client, SYNC_CLIENTS):
                raise SessionError(ErrorCode.INPUT_INVALID, "a synchronous store takes a redis-py sync Redis or "
                                   f"RedisCluster (redis.Redis, redis.cluster.RedisCluster), got {type(client).__name__}")
        elif isinstance(client, SYNC_CLIENTS):
            raise SessionError(ErrorCode.INPUT_INVALID, f"{type(client).__name__} is redis-py's sync client: "
                               "use the Sync class (SyncResponseSessionStore, SyncConversationStore, "
                               "SyncRedisSession), or give this one a redis.asyncio client")
        elif client is not None and not isinstance(client, (Redis, RedisCluster)) and not _duck_client(client):
            raise SessionError(ErrorCode.INPUT_INVALID, f"client must be a redis.asyncio Redis or RedisCluster, got {type(client).__name__}")
        if client is not None and not raw_replies and _decodes_responses(client):
            raise SessionError(ErrorCode.INPUT_INVALID, "a client with decode_responses=True is not supported: stored records are bytes")
        self._client = client
        self._factory = factory
        # Per loop, its client and the guard that closes it when the loop shuts down. Not a
        # weak dict: a client's connections hold their loop, so a weak key never died, and
        # a sync app calling asyncio.run per request kept every loop, client and socket.
        self._clients: dict[asyncio.AbstractEventLoop, tuple[AnyRedis, AsyncGenerator[None, None]]] = {}
        self._loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self.timeout = seconds(timeout)
        self.blocking = blocking
        """Whether the client is sync: its calls block and return the reply (see :func:`io`)."""
        self.reopen = reopen
        self._closed: weakref.WeakSet[object] = weakref.WeakSet()
        """The loops this link was closed on (``_SYNC`` for a sync link)."""
        self._closing = False
        """Whether ``_closed`` holds anything (a bool read on every call, not a WeakSet)."""
        self.owner = "this store"
        """What the refusal of a closed link names (``RedisSession is closed``, as the SDK says)."""

    @classmethod
    def to_url(
        cls,
        url: str,
        *,
        cluster: bool | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        redis_kwargs: Mapping[str, Any] | None = None,
        blocking: bool = False,
    ) -> "RedisLink":
        from_url(url, cluster=cluster, timeout=timeout, redis_kwargs=redis_kwargs)  # refuse bad options now
        if blocking:
            # One sync client for every thread, built on first use (a sync cluster client
            # reads the slot map as it is built: no I/O here either), closed by close().
            return cls(factory=functools.partial(from_url, url, cluster=cluster, timeout=timeout,
                                                 redis_kwargs=redis_kwargs, blocking=True),
                       timeout=timeout, blocking=True)
        return cls(factory=functools.partial(from_url, url, cluster=cluster, timeout=timeout, redis_kwargs=redis_kwargs),
                   timeout=timeout)

    def _build_sync(self) -> Any:
        """The sync client of a link built from a URL, made once for all threads."""
        with _BUILDING:
            if self._client is None:
                assert self._factory is not None
                self._client = self._factory()
            return self._client

    def pause(self, delay: float) -> Awaitable[None]:
        """Wait ``delay`` seconds between two tries, never past the call's budget."""
        return budget.pause(delay, self.blocking)

    def close_now(self) -> None:
        """Close the sync client this link built (``to_url(blocking=True)``), for good;
        else nothing."""
        if self._factory is None:
            return
        if not self.reopen:
            self._mark_closed(_SYNC)
        client, self._client = self._client, None
        if isinstance(client, SYNC_CLIENTS):
            client.close()

    def _mark_closed(self, loop: object) -> None:
        self._closed.add(loop)
        self._closing = True

    def _refuse_closed(self) -> SessionError:
        return SessionError(ErrorCode.CLIENT_CLOSED, f"{self.owner} is closed: close() released the Redis client "
                            "it built" + ("" if self.blocking else " on this event loop"))

    @property
    def owns_client(self) -> bool:
        return self._factory is not None

    @property
    def client(self) -> AnyRedis:
        """The client to use on the running event loop (a sync link's one client)."""
        if self.blocking:
            if self._closing:
                raise self._refuse_closed()
            budget.check()  # no new round trip once the call's budget is spent
            client = self._client
            # typed as the asyncio one: io() tells them apart
            return cast(AnyRedis, client if client is not None else self._build_sync())
        loop = asyncio.get_running_loop()
        if self._closing and loop in self._closed:
            raise self._refuse_closed()
        if self._factory is None:
            assert self._client is not None
            first = self._loop() if self._loop is not None else None
            if first is None:
                self._loop = weakref.ref(loop)
            elif first is not loop:
                raise SessionError(
                    ErrorCode.CLIENT_WRONG_LOOP,
                    "this store or session was given a Redis client that belongs to another event loop; "
                    "build it from a URL (one client per loop) or give it a client made on this loop",
                )
            return cast(AnyRedis, self._client)
        entry = self._clients.get(loop)
        if entry is None:
            entry = self._open(loop)
        return entry[0]

    def _open(self, loop: asyncio.AbstractEventLoop) -> tuple[AnyRedis, AsyncGenerator[None, None]]:
        """A new client for ``loop``, closed when the loop shuts down: ``asyncio.run``, and
        the Agents SDK's ``run_sync`` after each run, finalize a loop's async generators
        before they close it, and the guard made here is one. Clients of loops closed
        without that are dropped here, when another loop asks for one."""
        assert self._factory is not None
        for other in list(self._clients):  # a copy: another thread's loop may add its own meanwhile
            if other.is_closed():
                entry = self._clients.pop(other, None)
                if entry is not None:
                    _finish(entry[1])
        client = self._factory()
        entry = self._clients[loop] = (client, _closing_guard(self, loop, client))
        return entry

    def check_open(self) -> None:
        """Raise ``session.client.closed`` where :meth:`close` closed this link."""
        if self._closing and (_SYNC if self.blocking else asyncio._get_running_loop()) in self._closed:
            raise self._refuse_closed()

    async def close(self) -> None:
        """Close the client this link built for the running loop (if any)."""
        if self._factory is None or self.blocking:
            self.close_now()
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if not self.reopen:
            self._mark_closed(loop)
        entry = self._clients.pop(loop, None)
        if entry is not None:
            await close_client(entry[0])
            _finish(entry[1])

    async def _close_at_shutdown(self, loop: asyncio.AbstractEventLoop, client: AnyRedis) -> None:
        entry = self._clients.get(loop)
        if entry is not None and entry[0] is client and not loop.is_closed():
            del self._clients[loop]
            await close_client(client)


def _closing_guard(link: RedisLink, loop: asyncio.AbstractEventLoop, client: AnyRedis) -> AsyncGenerator[None, None]:
    """An async generator, started and held at its one ``yield``, that closes ``client``
    when ``loop`` finalizes its async generators (the loop's own shutdown hook; it keeps
    them weakly, the link strongly)."""

    async def guard() -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            await link._close_at_shutdown(loop, client)

    agen = guard()
    with warnings.catch_warnings():
        # A loop that finalized its generators before and runs on (the SDK's run_sync)
        # warns of a generator started after; this one is meant for its next shutdown.
        warnings.simplefilter("ignore", ResourceWarning)
        step = agen.asend(None)
    _run_through(step)
    return agen


def _finish(agen: AsyncGenerator[None, None]) -> None:
    """End a guard whose client is no longer the link's: its ``finally`` finds nothing to
    close and returns at once, so no loop is needed to run it."""
    _run_through(agen.aclose())


def _run_through(step: Any) -> None:
    """Run a guard's step that never waits (to its ``yield``, or through its ``finally``
    when it has nothing to close) without a loop."""
    try:
        step.send(None)
    except StopIteration:
        pass


def _duck_client(client: object) -> bool:
    """fakeredis's asyncio client subclasses redis.asyncio.Redis; anything else with
    the commands we call is accepted too (tests wrap clients)."""
    return all(hasattr(client, name) for name in ("evalsha", "eval", "get", "aclose"))


def _decodes_responses(client: object) -> bool:
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", None) or {}
    if kwargs.get("decode_responses"):
        return True
    encoder = getattr(client, "encoder", None)  # RedisCluster keeps it here
    return bool(getattr(encoder, "decode_responses", False))
