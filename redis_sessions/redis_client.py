"""The edge between this package and redis-py: clients from URLs, and errors.

``from_url`` builds a standalone or cluster asyncio client with redis-py's own
retry (exponential backoff on connection errors and timeouts), so the package
never hand-writes reconnect logic. ``translate_errors`` is the only place a
redis-py exception becomes a :class:`SessionError`.
"""

from __future__ import annotations

from typing import Union
from urllib.parse import parse_qs, urlsplit

from redis import exceptions as rx
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from .errors import ErrorCode, SessionError

AnyRedis = Union["Redis", "RedisCluster"]


def is_cluster_url(url: str) -> bool:
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    return parts.scheme in ("redis+cluster", "rediss+cluster") or query.get("cluster", [""])[0] in ("1", "true", "yes")


def from_url(url: str, *, cluster: bool | None = None) -> AnyRedis:
    """A client for ``url``; a cluster client for ``redis+cluster://`` or ``?cluster=true``.

    ``cluster=None`` decides from the URL only; it never probes the server, so
    building a client does no I/O.
    """
    if cluster is None:
        cluster = is_cluster_url(url)
    parts = urlsplit(url)
    scheme = parts.scheme.replace("+cluster", "")
    query = "&".join(p for p in parts.query.split("&") if p and not p.startswith("cluster="))
    clean = parts._replace(scheme=scheme, query=query).geturl()
    retry = Retry(ExponentialBackoff(cap=0.5, base=0.02), retries=3)
    try:
        if cluster:
            return RedisCluster.from_url(clean, retry=retry)
        return Redis.from_url(clean, retry=retry)
    except (ValueError, rx.RedisError) as exc:
        raise SessionError(ErrorCode.BACKEND_UNAVAILABLE, f"bad Redis URL: {exc}") from None


def as_text(value: object) -> str:
    """A reply as text: bytes are decoded (undecodable bytes kept as surrogates)."""
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


async def close_client(client: AnyRedis) -> None:
    await client.aclose()


class translate_errors:
    """``async with translate_errors(where):`` turns redis-py exceptions raised in the
    block into SessionErrors. A class, not a generator: it sits on every call."""

    __slots__ = ("where",)

    def __init__(self, where: str) -> None:
        self.where = where

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc is None or isinstance(exc, SessionError) or not isinstance(exc, (rx.RedisError, rx.RedisClusterException, OSError)):
            return None
        raise _translate(exc, self.where) from None


def _translate(exc: BaseException, where: str) -> SessionError:
    if isinstance(exc, rx.NoScriptError):  # only if the retry-as-EVAL path itself failed
        return SessionError(ErrorCode.BACKEND_UNAVAILABLE, f"{where}: script could not be loaded")
    if isinstance(exc, rx.ResponseError):
        text = str(exc)
        if text.startswith("WRONGTYPE"):
            return SessionError(ErrorCode.RECORD_CORRUPT, f"{where} holds a value of the wrong Redis type")
        return SessionError(ErrorCode.BACKEND_UNAVAILABLE, f"{where}: Redis refused the command: {text}")
    return SessionError(ErrorCode.BACKEND_UNAVAILABLE, f"{where}: Redis is unavailable: {exc}")
