"""What every command shares: where Redis is, which prefix, and how to open it."""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any

from redis.asyncio.cluster import RedisCluster

from ..errors import ErrorCode, SessionError
from ..ids import thread_of, validate_id
from ..keys import DEFAULT_PREFIX, KeySpace
from ..redis_client import AnyRedis, close_client, from_url, translate, translate_errors
from ..responses.store import RedisResponseSessionStore
from .output import redact_url

ENV_URL = "REDIS_SESSIONS_URL"
DEFAULT_URL = "redis://127.0.0.1:6379/0"


@dataclass(frozen=True)
class Target:
    url: str
    prefix: str = DEFAULT_PREFIX
    json: bool = False

    @property
    def keys(self) -> KeySpace:
        return KeySpace(self.prefix)

    def store(self, **options: Any) -> RedisResponseSessionStore:
        return RedisResponseSessionStore.from_url(self.url, key_prefix=self.prefix, **options)

    def client(self) -> AnyRedis:
        return from_url(self.url)

    @property
    def shown_url(self) -> str:
        """The URL as printed: never with its password."""
        return redact_url(self.url)


def url_from(arg: str | None) -> str | None:
    """``--url``, else ``$REDIS_SESSIONS_URL``, else None."""
    return arg or os.environ.get(ENV_URL) or None


def items_module() -> Any | None:
    """``redis_sessions.items`` if this install has it (item sessions), else None.

    Imported by name so the CLI works, and type-checks, with or without it.
    """
    try:
        module = importlib.import_module("redis_sessions.items")
    except ImportError:
        return None
    return module if hasattr(module, "RedisSession") else None


def require_items() -> Any:
    module = items_module()
    if module is None:
        raise SessionError(ErrorCode.INPUT_INVALID, "item sessions are not available in this install (redis_sessions.items)")
    return module


async def ping(client: AnyRedis, url: str) -> None:
    """Reach the server (``url`` only names it in the error, redacted), and refuse a
    standalone client on a cluster node: it would see a third of the keys."""
    async with translate_errors(f"Redis at {redact_url(url)}"):
        await client.ping()
    await refuse_cluster_node(client, url)


async def refuse_cluster_node(client: AnyRedis, url: str) -> None:
    """``session.input.invalid`` if a plain ``redis://`` URL points at a Redis Cluster
    node (``INFO cluster``: ``cluster_enabled:1``): SCAN would see that node's keys
    only, and a command on any other slot would fail with MOVED. A server that
    refuses INFO (an ACL, or a server without that section) is not checked; per-key
    MOVED errors would still fail the command."""
    if isinstance(client, RedisCluster):
        return
    try:
        info = await client.info("cluster")
    except Exception as exc:
        error = translate(exc, f"Redis at {redact_url(url)}")
        if error is not None and error.code in (ErrorCode.BACKEND_DENIED, ErrorCode.BACKEND_ERROR):
            return
        raise error or exc
    if int(info.get("cluster_enabled", 0) or 0) == 1:
        raise SessionError(
            ErrorCode.INPUT_INVALID,
            f"{redact_url(url)} is a Redis Cluster node, and a standalone URL reaches one node only: "
            "use redis+cluster://host:port (or add ?cluster=true)",
        )


async def check_server(target: Target) -> None:
    """What every command does first: reach the server and refuse a cluster node
    behind a standalone URL (see :func:`refuse_cluster_node`)."""
    client = target.client()
    try:
        await ping(client, target.url)
    finally:
        await close_client(client)


async def thread_key(store: RedisResponseSessionStore, response_id: str) -> str | None:
    """The thread hash holding ``response_id``: from the id itself, or its locator
    (the store's own lookup, so the old layout's locators are found too)."""
    validate_id(response_id)
    thread = thread_of(response_id) or await store.engine.locate(response_id, 0)
    return None if thread is None else store.keys.thread(thread)
