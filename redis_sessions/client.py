"""Building redis-py clients: from a URL (standalone, TLS, Cluster, Sentinel), on either
API, with the budget's retry and socket timeouts, every known option checked first.

``from_url`` builds clients with redis-py's own retry on connection errors and timeouts
(the package writes no reconnect logic), socket timeouts derived from the call budget
(:mod:`.budget`), and any other redis-py option the caller passes in ``redis_kwargs``.
Every write this package sends is idempotent, so redis-py re-sending a command whose
reply was lost has no second effect. Building a client does no I/O (but for redis-py's
sync cluster client, which reads the slot map as it is built).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Callable, Mapping, Optional, Union
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
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel

from .budget import DEFAULT_TIMEOUT, DeadlineBackoff, bounded_connection
from .errors import ErrorCode, SessionError, translate
from .validate import seconds

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
