"""The edge between this package and redis-py: clients, time budgets and errors.

``RedisLink`` is how a store or a session reaches Redis:

- It hands out the client for the *running* event loop. A link that built its
  own client (from a URL) builds one per event loop, so a sync application
  that calls ``asyncio.run`` per request, or the Agents SDK's ``run_sync``,
  just works. A link given a caller's client checks that it is used from the
  loop it was first used on and otherwise raises ``session.client.wrong_loop``
  (redis-py connections belong to one loop; reusing them elsewhere fails with
  ``Event loop is closed`` or hangs).
- ``from_url`` builds clients with redis-py's own retry on connection errors
  and timeouts (the package writes no reconnect logic), socket timeouts
  derived from the call budget, and any other redis-py option the caller
  passes in ``redis_kwargs``. Every write this package sends is idempotent, so
  redis-py re-sending a command whose reply was lost has no second effect.
- ``translate`` is the only place a redis-py exception becomes a
  :class:`SessionError`; :func:`bounded` puts the whole public call (retries
  included) under the budget.

Synchronous clients (``redis.Redis``, ``redis.cluster.RedisCluster``) go through
the same stores (``RedisLink(client, blocking=True)``, ``from_url(..., blocking=True)``):
the stores' logic is written once, as ``async def`` methods, and only their I/O edges
(script calls, commands, pipelines, pauses) tell the two kinds apart, with
:func:`io`. A sync client's call blocks and returns its reply, so a store method
never suspends, and :func:`run_blocking` runs it to its end with one ``send(None)``,
without an event loop. One copy of every key, script, check and retry serves both
APIs, and a sync call costs one coroutine frame per layer, no loop, thread or future.
"""

from __future__ import annotations

import asyncio
import functools
import sys
import threading
import time
import warnings
import weakref
from dataclasses import dataclass
from typing import Annotated, Any, AsyncGenerator, Awaitable, Callable, Coroutine, Mapping, Optional, TypeVar, Union, cast
from urllib.parse import SplitResult, parse_qs, urlencode, urlsplit, urlunsplit

import msgspec
import redis as sync_redis
import redis.cluster as sync_cluster
import redis.connection as sync_connection
import redis.retry as sync_retry
import redis.sentinel as sync_sentinel
from redis import exceptions as rx
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import parse_url
from redis.asyncio.sentinel import Sentinel
from redis.asyncio.retry import Retry

from . import budget
from .budget import DEFAULT_TIMEOUT, DeadlineBackoff, bounded, bounded_connection
from .errors import ErrorCode, SessionError
from .validate import seconds

__all__ = ["DEFAULT_TIMEOUT", "bounded"]  # re-exported: the stores import them from here

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

RETRIES = 3
"""redis-py retries a command this many times on a connection error or timeout."""
BACKOFF_BASE = 0.02
"""redis-py sleeps ``base * 2**n`` s after its n-th failed try (n = 1..RETRIES)."""
BACKOFF_UNITS = sum(2 ** n for n in range(1, RETRIES + 1))
"""Those sleeps add up to this many ``base``: 14 with 3 retries (0.28 s at 0.02)."""
BACKOFF_SHARE = 0.1
"""The sleeps take at most this share of a budget (the base shrinks with a small one)."""


def without_decode(redis_kwargs: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """``redis_kwargs`` less ``decode_responses``, which the item and conversation stores
    have no use for (they read undecoded replies either way)."""
    if isinstance(redis_kwargs, Mapping) and "decode_responses" in redis_kwargs:
        return {k: v for k, v in redis_kwargs.items() if k != "decode_responses"}
    return redis_kwargs


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
        return self.core.timeout  # type: ignore[no-any-return]

    def close(self) -> None:
        """Close the client if this object built it (``from_url``); else nothing."""
        self.core.link.close_now()

    def __enter__(self: B) -> B:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
SENTINEL_PORT = 26379


def is_cluster_url(url: str) -> bool:
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    return parts.scheme in ("redis+cluster", "rediss+cluster") or query.get("cluster", [""])[0] in ("1", "true", "yes")


_Seconds = Annotated[float, msgspec.Meta(gt=0, le=1e9)]
_Count = Annotated[int, msgspec.Meta(ge=1)]


class _KnownOptions(msgspec.Struct, kw_only=True):
    """The redis-py client options whose values can be checked before a connection is made
    (each, given a wrong value, fails only on the first call, with a raw ``TypeError``,
    ``AttributeError`` or ``OverflowError``). Others pass to redis-py as they are; an
    unknown name is refused by redis-py when the client is built."""

    socket_timeout: Optional[_Seconds] = None
    socket_connect_timeout: Optional[_Seconds] = None
    socket_keepalive: Optional[bool] = None
    socket_keepalive_options: Optional[dict[int, Union[int, bytes]]] = None
    health_check_interval: Optional[Annotated[float, msgspec.Meta(ge=0, le=1e9)]] = None
    retry_on_timeout: Optional[bool] = None
    max_connections: Optional[_Count] = None
    db: Optional[Annotated[int, msgspec.Meta(ge=0)]] = None
    username: Optional[str] = None
    password: Optional[str] = None
    client_name: Optional[str] = None
    encoding: Optional[str] = None
    encoding_errors: Optional[str] = None
    decode_responses: Optional[bool] = None
    protocol: Optional[Annotated[int, msgspec.Meta(ge=2, le=3)]] = None
    single_connection_client: Optional[bool] = None
    ssl_ca_certs: Optional[str] = None
    ssl_ca_path: Optional[str] = None
    ssl_certfile: Optional[str] = None
    ssl_keyfile: Optional[str] = None
    ssl_password: Optional[str] = None
    ssl_check_hostname: Optional[bool] = None


def check_options(redis_kwargs: Mapping[str, Any]) -> None:
    """Refuse (``session.input.invalid``) a known redis-py option given a value of the
    wrong type or range (``socket_timeout="abc"``, ``socket_keepalive_options=5``)."""
    if not all(isinstance(name, str) for name in redis_kwargs):
        raise SessionError(ErrorCode.INPUT_INVALID, "redis_kwargs' names must be strings")
    known = {name: value for name, value in redis_kwargs.items() if name in _KnownOptions.__struct_fields__}
    try:
        msgspec.convert(known, _KnownOptions)
    except msgspec.ValidationError as exc:
        raise SessionError(ErrorCode.INPUT_INVALID, f"bad Redis client option: {exc}") from None


def client_options(timeout: float | None, redis_kwargs: Mapping[str, Any] | None,
                   retry: type[Any] = Retry) -> dict[str, Any]:
    """redis-py options for a client this package builds: retry (``retry``: the asyncio
    or the sync API's class), socket timeouts that let every retry fit in the budget,
    then whatever the caller passed (it wins), each value of a known option checked now
    (a wrong one would otherwise fail on the first call, raw)."""
    base = BACKOFF_BASE if timeout is None else min(BACKOFF_BASE, timeout * BACKOFF_SHARE / BACKOFF_UNITS)
    options: dict[str, Any] = {"retry": retry(DeadlineBackoff(cap=0.5, base=base), retries=RETRIES)}
    if timeout is not None:
        # every try's wait and every backoff's sleep, added up, is at most the budget
        per_try = (timeout - base * BACKOFF_UNITS) / (RETRIES + 1)
        options.update(socket_timeout=per_try, socket_connect_timeout=per_try)
    if redis_kwargs:
        if not isinstance(redis_kwargs, Mapping):
            raise SessionError(ErrorCode.INPUT_INVALID, f"redis_kwargs must be a mapping, got {type(redis_kwargs).__name__}")
        check_options(redis_kwargs)
        options.update(redis_kwargs)
    return options


class _SyncSentinelMaster(sync_redis.Redis):
    """The master's sync client; closing it closes the sentinel connections that found it too."""

    def close(self) -> None:
        super().close()
        for sentinel in getattr(self.connection_pool, "sentinel_manager").sentinels:
            sentinel.close()


@dataclass(frozen=True)
class _Api:
    """redis-py's classes of one API, asyncio or sync: all that building a client differs by."""

    redis: Any
    cluster: Any
    sentinel: Any
    master: Any
    retry: Any
    parse_url: Callable[[str], Any]


def _sync_connection_class(scheme: str, options: Mapping[str, Any], cluster: bool) -> type:
    """The redis-py sync connection class a client for ``scheme`` would use (the caller's,
    if ``redis_kwargs`` names one)."""
    given = options.get("connection_class")
    if given is not None:
        if not isinstance(given, type) or not issubclass(given, sync_connection.AbstractConnection):
            raise SessionError(ErrorCode.INPUT_INVALID, "connection_class must be a redis-py sync connection class")
        return given
    tls = scheme.startswith("rediss") or bool(options.get("ssl"))
    if scheme in SENTINEL_SCHEMES:
        return sync_sentinel.SentinelManagedSSLConnection if tls else sync_sentinel.SentinelManagedConnection
    if scheme == "unix" and not cluster:
        return sync_connection.UnixDomainSocketConnection
    return sync_connection.SSLConnection if tls else sync_connection.Connection


def from_url(
    url: str,
    *,
    cluster: bool | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
    redis_kwargs: Mapping[str, Any] | None = None,
    blocking: bool = False,
) -> Any:
    """A client for ``url``; a cluster client for ``redis+cluster://`` or ``?cluster=true``;
    ``blocking``: redis-py's sync client (``redis.Redis``, ``redis.cluster.RedisCluster``,
    a sentinel's master), built with the same options, else its asyncio one.

    ``cluster=None`` decides from the URL only; it never probes the server, so
    building a client does no I/O. Options in the URL's query win over
    ``redis_kwargs``, which win over the defaults derived from ``timeout``.
    """
    api = _SYNC_API if blocking else _ASYNC_API
    if not isinstance(url, str):
        raise SessionError(ErrorCode.INPUT_INVALID, f"url must be a string, got {type(url).__name__}")
    if cluster is None:
        cluster = is_cluster_url(url)
    parts = urlsplit(url)
    scheme = parts.scheme.replace("+cluster", "")
    query = "&".join(p for p in parts.query.split("&") if p and not p.startswith("cluster="))
    options = client_options(seconds(timeout), redis_kwargs, api.retry)
    if blocking:
        # every socket wait of a sync call ends at the call's deadline (budget.py)
        options["connection_class"] = bounded_connection(_sync_connection_class(parts.scheme, options, cluster))
        if cluster and scheme == "rediss":
            scheme = "redis"  # the URL's TLS class would replace ours: the bounded TLS class says it
    clean = parts._replace(scheme=scheme, query=query).geturl()
    if options.get("decode_responses"):
        raise SessionError(ErrorCode.INPUT_INVALID, "decode_responses=True is not supported: stored records are bytes")
    if parts.scheme in SENTINEL_SCHEMES:
        if cluster:
            raise SessionError(ErrorCode.INPUT_INVALID, "a redis+sentinel:// URL names a standalone master, not a cluster")
        return _sentinel_client(parts, options, api)
    try:
        if cluster:
            try:
                return api.cluster.from_url(clean, **options)
            except (rx.ConnectionError, rx.TimeoutError, rx.RedisClusterException) as exc:
                if not blocking:
                    raise
                # redis-py's sync cluster client reads the slot map as it is built (the
                # asyncio one on first use): an unreachable cluster, not a bad URL.
                raise translate(exc, "cluster") or exc from None
        client = api.redis.from_url(clean, **options)
        client.connection_pool.make_connection()  # an unknown option fails here
        return client
    except TypeError as exc:
        raise SessionError(ErrorCode.INPUT_INVALID, f"bad Redis client option: {exc}") from None
    except (ValueError, rx.RedisError) as exc:  # building does no I/O: the URL is at fault, not Redis
        raise SessionError(ErrorCode.INPUT_INVALID, f"bad Redis URL: {exc}") from None


class _SentinelMaster(Redis):
    """The master's client; closing it closes the sentinel connections that found it too."""

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        await super().aclose(close_connection_pool)
        for sentinel in getattr(self.connection_pool, "sentinel_manager").sentinels:
            await sentinel.aclose()


_ASYNC_API = _Api(Redis, RedisCluster, Sentinel, _SentinelMaster, Retry, parse_url)
_SYNC_API = _Api(sync_redis.Redis, sync_cluster.RedisCluster, sync_sentinel.Sentinel, _SyncSentinelMaster,
                 sync_retry.Retry, sync_connection.parse_url)


def _host_port(address: str) -> tuple[str, int]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port``; the port defaults to the sentinel's."""
    host, port = address, ""
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else rest
    elif ":" in address:
        host, _, port = address.rpartition(":")
    try:
        return host or "localhost", int(port) if port else SENTINEL_PORT
    except ValueError:
        raise SessionError(ErrorCode.INPUT_INVALID, f"bad sentinel address in the URL: port {port!r}") from None


def _sentinel_client(parts: SplitResult, options: dict[str, Any], api: _Api = _ASYNC_API) -> Any:
    """``redis+sentinel://[user:password@]host[:port][,host[:port]...]/<service>[/<db>][?options]``:
    the master of ``service`` as the sentinels name it, found again after a failover.

    The URL's user and password and its query options are the master's (as in a
    ``redis://`` URL); ``sentinel_username`` and ``sentinel_password`` in the query
    authenticate to the sentinels themselves. ``rediss+sentinel://`` is TLS to the master.
    """
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    sentinels = [_host_port(item.strip()) for item in hostlist.split(",")]
    path = [segment for segment in parts.path.split("/") if segment]
    if not path or len(path) > 2:
        raise SessionError(ErrorCode.INPUT_INVALID, "a redis+sentinel:// URL needs the service name as its path: /<service>[/<db>]")
    service = path[0]
    query = parse_qs(parts.query)
    sentinel_auth = {name: query.pop(f"sentinel_{name}")[-1] for name in ("username", "password")
                     if f"sentinel_{name}" in query}
    master_url = urlunsplit(("rediss" if parts.scheme.startswith("rediss") else "redis",
                             f"{userinfo}@localhost" if userinfo else "localhost",
                             f"/{path[1]}" if len(path) > 1 else "", urlencode(query, doseq=True), ""))
    try:
        from_query: dict[str, Any] = dict(api.parse_url(master_url))
    except ValueError as exc:
        raise SessionError(ErrorCode.INPUT_INVALID, f"bad Redis URL: {exc}") from None
    for name in ("host", "port", "connection_class"):
        from_query.pop(name, None)
    if master_url.startswith("rediss"):
        from_query["ssl"] = True
    options = {**options, **from_query}
    timeouts: dict[str, Any] = {name: options[name] for name in ("socket_timeout", "socket_connect_timeout", "retry")
                                if name in options}
    # unused-ignore: the mypy releases that type Sentinel's call need no ignore; older ones do.
    manager = api.sentinel(sentinels, sentinel_kwargs={**timeouts, **sentinel_auth})
    try:
        client = manager.master_for(service, redis_class=api.master, **options)
        client.connection_pool.make_connection()  # an unknown option fails here
    except TypeError as exc:
        raise SessionError(ErrorCode.INPUT_INVALID, f"bad Redis client option: {exc}") from None
    return client


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


class translate_errors:
    """``async with translate_errors(where):`` turns redis-py exceptions raised in the
    block into SessionErrors. A class, not a generator: it sits on every call."""

    __slots__ = ("where",)

    def __init__(self, where: str) -> None:
        self.where = where

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if not isinstance(exc, Exception):
            return None
        replacement = translated(exc, self.where)
        if replacement is not exc:
            raise replacement from None


def translated(exc: Exception, where: str) -> Exception:
    """What ``translate_errors`` raises for ``exc``, for the hottest reads, which catch
    it themselves (a ``try`` costs nothing until it raises; ``async with`` runs two
    coroutines on every call): the SessionError, or ``exc`` itself when it is not
    redis-py's."""
    if isinstance(exc, SessionError):
        return exc
    return translate(exc, where) or exc


_DENIED = (rx.AuthenticationError, rx.AuthorizationError, rx.NoPermissionError)
_NOT_NOW = (rx.BusyLoadingError, rx.TryAgainError, rx.ClusterDownError, rx.ReadOnlyError, rx.AskError)
"""redis-py's classes for a server that cannot serve now (MasterDownError and MovedError are subclasses)."""
_NOT_NOW_PREFIXES = ("BUSY",)
"""Error replies redis-py has no class for, by the server's prefix: a script running too long."""
_CORRUPT_HINTS = ("WRONGTYPE", "not an integer", "not a valid float", "out of range")


def translate(exc: BaseException, where: str) -> SessionError | None:
    """The SessionError for an exception from redis-py or the transport, known by its
    type; None for anything else (a bug of ours, which should surface as itself)."""
    if isinstance(exc, SessionError):
        return exc
    if isinstance(exc, rx.NoScriptError):  # only if the retry-as-EVAL path itself failed
        return SessionError(ErrorCode.BACKEND_UNAVAILABLE, f"{where}: script could not be loaded")
    if isinstance(exc, _DENIED):
        return SessionError(ErrorCode.BACKEND_DENIED, f"{where}: Redis refused the credentials or ACL permissions: {exc}")
    if isinstance(exc, rx.ResponseError):
        return _translate_reply(exc, where)
    if isinstance(exc, (rx.TimeoutError, TimeoutError, asyncio.TimeoutError)):
        return SessionError(ErrorCode.BACKEND_TIMEOUT, f"{where}: Redis did not answer in time")
    if isinstance(exc, (rx.RedisError, rx.RedisClusterException, OSError, EOFError)):
        return SessionError(ErrorCode.BACKEND_UNAVAILABLE, f"{where}: Redis is unavailable: {exc}")
    if isinstance(exc, RuntimeError) and ("loop" in str(exc)):
        return SessionError(ErrorCode.CLIENT_WRONG_LOOP, f"{where}: the Redis client belongs to another event loop ({exc})")
    return None


def _translate_reply(exc: rx.ResponseError, where: str) -> SessionError:
    text = str(exc)
    if isinstance(exc, rx.OutOfMemoryError) or "used memory > 'maxmemory'" in text:  # the latter: inside a script
        return SessionError(ErrorCode.BACKEND_FULL, f"{where}: Redis is out of memory (maxmemory): {text}")
    if "no permissions" in text:  # an ACL refusal inside a script, as older servers word it
        return SessionError(ErrorCode.BACKEND_DENIED, f"{where}: Redis refused the credentials or ACL permissions: {text}")
    if isinstance(exc, _NOT_NOW) or text.startswith(_NOT_NOW_PREFIXES):
        return SessionError(ErrorCode.BACKEND_UNAVAILABLE, f"{where}: Redis cannot serve this now: {text}")
    if "DB index" in text:  # SELECT on connecting: the URL names a database the server lacks
        return SessionError(ErrorCode.INPUT_INVALID, f"{where}: the URL's database number is out of the server's "
                            "range (databases, 16 by default)")
    if any(hint in text for hint in _CORRUPT_HINTS):
        return SessionError(ErrorCode.RECORD_CORRUPT, f"{where} holds data of the wrong type or shape: {text}")
    return SessionError(ErrorCode.BACKEND_ERROR, f"{where}: Redis answered with an error: {text}")


