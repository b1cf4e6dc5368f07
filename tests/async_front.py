"""A sync store or session behind ``async def`` methods, so an async behaviour suite runs
on the sync API unchanged (tests/conftest.py's ``api`` fixture). The generic twin of
chains.SyncAdapter: each public method of the sync object is awaited as a coroutine that
calls it; any other attribute (``keys``, ``_run``, ``_write``...) is the core's, and so
is any attribute a test sets (a counting ``_run``, say)."""

from __future__ import annotations

import inspect
from typing import Any

from redis_sessions import SyncRedisSession


class AsyncFront:
    def __init__(self, sync: Any) -> None:
        object.__setattr__(self, "sync", sync)

    def __getattr__(self, name: str) -> Any:
        sync = object.__getattribute__(self, "sync")
        method = getattr(type(sync), name, None)
        if not name.startswith("_") and inspect.isfunction(method):
            bound = getattr(sync, name)

            async def call(*args: Any, **kwargs: Any) -> Any:
                result = bound(*args, **kwargs)
                return AsyncFront(result) if isinstance(result, SyncRedisSession) else result  # a fork

            object.__setattr__(self, name, call)  # one wrapper per name: ``op == s.clear_session`` holds
            return call
        return getattr(sync.core, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.sync.core, name, value)

    async def __aenter__(self) -> "AsyncFront":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.sync.close()
