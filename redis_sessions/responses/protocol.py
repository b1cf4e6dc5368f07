"""The interface every response-chain store implements, and the engine seam.

``ResponseSessionStore`` is what gateways program against. ``ChainEngine`` is
the I/O edge: each of its methods is exactly one round trip to Redis (or one
step of the in-process memory engine that mirrors the Lua scripts), so the
store logic above it is written once.
"""

from __future__ import annotations

from typing import Any, Awaitable, Protocol, Sequence, runtime_checkable

from ..limits import DEFAULT_MAX_RECORD_BYTES as DEFAULT_MAX_RECORD_BYTES, UNSET as UNSET, _Unset as _Unset
from ..models import ResponseSessionSnapshot, StoredResponseSession


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


INLINE_BYTES = 8192
"""A chain whose records total at most this comes back inside the walk's reply (and a
chain the store remembers is read by its names: lua/chain_known.lua), in one round trip.
Measured (benchmarks/bench_chain_cost.py): the
copy through Lua costs about 1.4 us of server time per KB (Redis's Lua hashes every byte
of a string it takes in: benchmarks/bench_save_parts.py), while a second request costs
the caller a network round trip; past a few KB the copy would cost the shard more than
the round trip saves."""
from ..tokens import new_token as new_token  # the one token of every store (re-exported)


class SaveRequest:
    """The arguments of one atomic save, in the order the Lua script takes them.

    ``token`` is random per call (:mod:`redis_sessions.tokens`) and travels in the
    script's ARGV, so the copy redis-py re-sends after a lost reply carries the same one."""

    __slots__ = ("response_id", "parent", "expect", "expected", "overwrite", "blob", "ttl_ms", "walk_limit", "token",
                 "books", "names", "above", "renew")

    def __init__(self, response_id: str, parent: str, expect: bool, expected: str, overwrite: bool,
                 blob: bytes, ttl_ms: int, walk_limit: int, token: bytes, books: bool = True,
                 names: bytes = b"", above: bytes = b"") -> None:
        self.response_id = response_id
        self.parent = parent
        self.expect = expect
        self.expected = expected
        self.overwrite = overwrite
        self.blob = blob
        self.ttl_ms = ttl_ms
        self.walk_limit = walk_limit
        self.token = token
        self.books = books
        """Keep the books of per-response expiry (:mod:`.books`)."""
        self.names = names
        """The parent's id packed (:mod:`.names`), b"" when the record keeps no names list."""
        self.above = above
        """The parent's ancestors packed, as this store last resolved them (b"": the list
        goes on from the parent's own, if it keeps one)."""
        self.renew: list[str] = []
        """Filled in by the save: the ancestors minted elsewhere whose locators it must renew
        (lua/chain_lib.lua, l:), besides a foreign parent's, which every save renews."""


class ChainEngine(Protocol):
    """Every write is idempotent: running one twice (a re-send after a lost reply)
    has the effect and the answer of running it once."""

    round_trips: int
    @property
    def blocking(self) -> bool:
        """Whether the engine's calls block (a sync client): two independent ones then run
        one after the other, since there is no loop to run them together."""

    async def locate(self, response_id: str, slide_ms: int) -> str | None:
        """The thread tag of a foreign id, refreshing its TTL when slide_ms > 0."""

    async def point(self, response_id: str, thread: str, ttl_ms: int) -> str | None:
        """Point a foreign id at ``thread`` unless it already points somewhere;
        return what it pointed at before (None if it was free)."""

    async def repoint(self, response_id: str, found: str, thread: str, ttl_ms: int) -> str | None:
        """Point a foreign id at ``thread`` if its locator still holds ``found``, or nothing
        (compare-and-set); return what it held before (None: nothing)."""

    async def unpoint(self, response_id: str) -> None: ...

    async def touch_many(self, response_ids: Sequence[str], ttl_ms: int) -> None:
        """Give foreign ids' locators ``ttl_ms`` from now, those that exist; pipelined."""

    async def save(self, thread: str, request: SaveRequest) -> tuple[str, str]: ...

    async def save_turn(self, thread: str, request: SaveRequest, conversations: Any, conversation_id: str,
                        pairs: Sequence[bytes]) -> tuple[str, str]:
        """``save`` and the append of ``pairs`` (item id, item, ...) to the conversation of
        ``conversations``, in one step, every check of both before either writes."""

    def fetch(self, thread: str, response_id: str, slide_ms: int) -> Awaitable[object | None]:
        """One record (its stored bytes), or None. The hottest read, so an engine may hand
        back its client's own awaitable: whatever it raises, at the call or the await,
        goes through :meth:`failed`."""

    def failed(self, exc: Exception, thread: str) -> Exception:
        """What a :meth:`fetch` of ``thread`` that raised ``exc`` raises: the coded
        SessionError (one already is returned as it is), or ``exc`` itself when it is
        not the backend's (a bug, which surfaces as itself)."""

    async def has(self, thread: str, response_id: str) -> bool:
        """Whether the thread holds the record (no TTL change)."""

    async def walk(self, thread: str, start: str, limit: int, slide_ms: int,
                   jumps: bool = True, *, named: bool = False) -> tuple[str, str, Sequence[object], Sequence[str] | None]:
        """The chain from ``start``, newest first: status, detail, the records, and their
        ids when the records were read apart from the walk (None: read with it, in one step).
        ``jumps``: may follow big records' jump lists (False: the parent pointers only).
        ``named``: ``start``'s id says it keeps a names list (:func:`..ids.marks_names`),
        which may be read before any walk (with ``jumps``, and no sliding)."""

    async def read_known(self, thread: str, ids: Sequence[str]) -> tuple[Sequence[object] | None, int]:
        """The records of ``ids`` (a chain the caller knows, newest first; None for one not
        there) in one step, when the thread's largest record (its m field) tells that they
        fit the walk's inline budget; else ``(None, largest)``, nothing read (-1: nothing tells)."""

    async def delete(self, thread: str, response_id: str, token: bytes, ttl_ms: int = 0, keep_books: bool = False) -> bool:
        """Remove one record; a call whose ``token`` already ran answers as it did then.
        ``ttl_ms``: how long a parent left without children stays; ``keep_books``: see :mod:`.books`."""

    async def thread_ids(self, thread: str) -> list[str]:
        """The ids of every record in the thread, read in bounded pages (one round trip each)."""

    async def drop(self, thread: str) -> None:
        """Remove the whole thread (freed in the background on Redis)."""

    async def unpoint_many(self, response_ids: Sequence[str]) -> None:
        """Remove the locators of foreign ids, pipelined."""

    async def close(self) -> None: ...
