"""The edge between this package and redis-py: clients from URLs, and errors.

``from_url`` builds a standalone or cluster asyncio client with redis-py's own
retry (exponential backoff on connection errors and timeouts), so the package
never hand-writes reconnect logic. ``translate_errors`` is the only place a
redis-py exception becomes a :class:`SessionError`.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import AsyncIterator, Union
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


async def close_client(client: AnyRedis) -> None:
    await client.aclose()


@asynccontextmanager
async def translate_errors(where: str) -> AsyncIterator[None]:
    """Turn redis-py exceptions raised inside the block into SessionErrors."""
    try:
        yield
    except SessionError:
        raise
    except rx.NoScriptError:  # only if the retry-as-EVAL path itself failed
        raise SessionError(ErrorCode.BACKEND_UNAVAILABLE, f"{where}: script could not be loaded") from None
    except rx.ResponseError as exc:
        text = str(exc)
        if text.startswith("WRONGTYPE"):
            raise SessionError(ErrorCode.RECORD_CORRUPT, f"{where} holds a value of the wrong Redis type") from None
        if "CROSSSLOT" in text or text.startswith(("CLUSTERDOWN", "TRYAGAIN", "LOADING", "MASTERDOWN", "READONLY")):
            raise SessionError(ErrorCode.BACKEND_UNAVAILABLE, f"{where}: {text}") from None
        raise SessionError(ErrorCode.BACKEND_UNAVAILABLE, f"{where}: Redis refused the command: {text}") from None
    except (rx.RedisError, rx.RedisClusterException, OSError) as exc:
        raise SessionError(ErrorCode.BACKEND_UNAVAILABLE, f"{where}: Redis is unavailable: {exc}") from None
