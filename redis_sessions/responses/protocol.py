"""The interface every response-chain store implements, and the engine seam.

``ResponseSessionStore`` is what gateways program against. ``ChainEngine`` is
the I/O edge: each of its methods is exactly one round trip to Redis (or one
step of the in-process memory engine that mirrors the Lua scripts), so the
store logic above it is written once.
"""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

from ..models import ResponseSessionSnapshot, StoredResponseSession


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET = _Unset()


@runtime_checkable
class ResponseSessionStore(Protocol):
    async def get(self, response_id: str) -> StoredResponseSession | None: ...

    async def save(
        self,
        session: StoredResponseSession,
        *,
        expected_previous_response_id: str | None | _Unset = UNSET,
        overwrite: bool = False,
    ) -> None: ...

    async def resolve_chain(
        self,
        previous_response_id: str | None,
        *,
        max_depth: int | None = None,
        include_incomplete: bool = False,
    ) -> ResponseSessionSnapshot: ...

    async def delete(self, response_id: str) -> bool: ...

    async def close(self) -> None: ...


class SaveRequest:
    """The arguments of one atomic save, in the order the Lua script takes them."""

    __slots__ = ("response_id", "parent", "expect", "expected", "overwrite", "blob", "ttl_ms", "walk_limit")

    def __init__(self, response_id: str, parent: str, expect: bool, expected: str, overwrite: bool,
                 blob: bytes, ttl_ms: int, walk_limit: int) -> None:
        self.response_id = response_id
        self.parent = parent
        self.expect = expect
        self.expected = expected
        self.overwrite = overwrite
        self.blob = blob
        self.ttl_ms = ttl_ms
        self.walk_limit = walk_limit


class ChainEngine(Protocol):
    round_trips: int

    async def locate(self, response_id: str, slide_ms: int) -> str | None:
        """The thread tag of a foreign id, refreshing its TTL when slide_ms > 0."""

    async def point(self, response_id: str, thread: str, ttl_ms: int) -> str | None:
        """Point a foreign id at ``thread`` unless it already points somewhere;
        return what it pointed at before (None if it was free)."""

    async def unpoint(self, response_id: str) -> None: ...

    async def save(self, thread: str, request: SaveRequest) -> tuple[str, str]: ...

    async def fetch(self, thread: str, response_id: str, slide_ms: int) -> object | None:
        """One record (its stored bytes), or None."""

    async def walk(self, thread: str, start: str, limit: int, slide_ms: int) -> tuple[str, str, Sequence[object]]: ...

    async def delete(self, thread: str, response_id: str) -> bool: ...

    async def close(self) -> None: ...
