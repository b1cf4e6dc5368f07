"""What every command shares: where Redis is, which prefix, and how to open it."""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any

from ..errors import ErrorCode, SessionError
from ..ids import thread_of, validate_id
from ..keys import DEFAULT_PREFIX, KeySpace
from ..redis_client import AnyRedis, from_url, translate_errors
from ..responses.store import RedisResponseSessionStore

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
    async with translate_errors(f"Redis at {url}"):
        await client.ping()


async def thread_key(store: RedisResponseSessionStore, response_id: str) -> str | None:
    """The thread hash holding ``response_id``: from the id itself, or its locator."""
    validate_id(response_id)
    thread = thread_of(response_id)
    if thread is None:
        async with translate_errors("locator"):
            value = await store.client.get(store.keys.locator(response_id))
        if value is None:
            return None
        thread = value.decode() if isinstance(value, bytes) else str(value)
    return store.keys.thread(thread)
