"""Bounded work per call, and paged reads that stay consistent.

Redis runs one command at a time per shard: a pop that walked two million non-item
entries in one call held a server for 1.87 s. Pops drop at most ``SCAN_LIMIT`` entries per
call and reads take at most ``READ_ENTRIES`` entries (and ``READ_BYTES``) per LRANGE; the
session calls again. Long reads go page by page and start over if the list was rewritten
between pages (appends only add after the items, so they do not invalidate a page).
"""

from __future__ import annotations

import uuid
from typing import Any, Awaitable, Callable

import pytest
from redis.asyncio import Redis

from conftest import Backend
from redis_sessions.errors import ErrorCode
from redis_sessions.items import CompactionSession, RedisSession
from redis_sessions.items import header as hd
from redis_sessions.items.redis import SCRIPTS
from slowlog import least_over_rounds
from test_items import GARBAGE, _summarize, bury, expect_error, key_of, make, msgs, push_raw, texts


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> int:
    """Reads of 3 entries an LRANGE and pops that drop 3, so a few entries make many calls
    (sessions made after this read it)."""
    monkeypatch.setattr(hd, "SCAN_LIMIT", 3)
    monkeypatch.setattr(hd, "READ_ENTRIES", 3)
    return 3


def count_calls(s: RedisSession, name: str, between: Callable[[int], Awaitable[Any]] | None = None) -> list[Any]:
    """The calls of ``name`` (``_lrange``: every read's LRANGE, with its range; ``_write``:
    every write script), each one round trip; ``between(n)`` runs after the n-th returns."""
    calls: list[Any] = []
    real = getattr(s, name)

    async def counted(*args: Any) -> Any:
        reply = await real(*args)
        calls.append(args[:2])
        if between is not None:
            await between(len(calls))
        return reply

    setattr(s, name, counted)
    return calls


def widest(calls: list[tuple[int, int]]) -> int:
    """The most entries one of these LRANGEs could take (a negative start: from the end)."""
    return max(-start if start < 0 else stop - start + 1 for start, stop in calls)


# -- each call bounded, the whole call still right -------------------------------------------
async def test_pop_drops_a_bounded_number_per_call(backend: Backend, small_pages: int) -> None:
    s = make(backend)
    await s.add_items(msgs(2))
    await push_raw(backend, "s1", *[GARBAGE] * 10)
    calls = count_calls(s, "_write")
    assert texts([await s.pop_item()]) == ["m1"]
    assert len(calls) == 4  # 3 + 3 + 3 dropped, then 1 more and the item
    await push_raw(backend, "s1", *[GARBAGE] * 4)
    assert texts([await s.pop_item()]) == ["m0"]
    assert await s.pop_item() is None


async def test_get_reads_a_bounded_number_per_call(backend: Backend, small_pages: int) -> None:
    s = make(backend)
    await s.add_items(msgs(4))
    await push_raw(backend, "s1", *[GARBAGE] * 8)
    await s.add_items(msgs(1, start=4))
    calls = count_calls(s, "_lrange")
    assert texts(await s.get_items(3)) == ["m2", "m3", "m4"]
    assert len(calls) >= 4 and widest(calls) <= small_pages + 2  # the ring and the header come along
    assert texts(await s.get_items(10)) == ["m0", "m1", "m2", "m3", "m4"]


async def test_full_reads_go_page_by_page(backend: Backend, small_pages: int) -> None:
    s = make(backend)
    await s.add_items(msgs(10))
    calls = count_calls(s, "_lrange")
    assert texts(await s.get_items()) == [f"m{i}" for i in range(10)]
    snap = await s.snapshot()
    assert snap.count == 10 and snap.version == 1
    f = await s.fork("f")
    assert texts(await f.get_items()) == [f"m{i}" for i in range(10)]
    assert len(calls) >= 12 and widest([c for c in calls if c[1] != -1]) <= small_pages + 2


async def test_a_page_read_starts_over_after_a_rewrite(backend: Backend, small_pages: int) -> None:
    s = make(backend)
    other = make(backend)
    await s.add_items(msgs(8))

    async def pop_once(n: int) -> None:
        if n == 2:
            await other.pop_item()

    calls = count_calls(s, "_lrange", pop_once)
    snap = await s.snapshot()
    assert texts(snap.items) == [f"m{i}" for i in range(7)] and snap.count == 7
    pages = len(calls)
    assert await s.replace_prefix(snap, [{"type": "compaction", "summary": "7"}]) is True
    calls.clear()
    await s.snapshot()
    assert len(calls) < pages  # the read that met the pop started over


async def test_appends_between_pages_do_not_restart(backend: Backend, small_pages: int) -> None:
    s = make(backend)
    other = make(backend)
    await s.add_items(msgs(8))
    calls = count_calls(s, "_lrange")
    await s.snapshot()
    quiet = len(calls)
    calls.clear()

    async def add_once(n: int) -> None:
        if n == 2:
            await other.add_items(msgs(1, start=8))

    calls = count_calls(s, "_lrange", add_once)
    snap = await s.snapshot()
    assert texts(snap.items) == [f"m{i}" for i in range(9)] and snap.version == 2  # the last header's
    assert len(calls) == quiet  # the last page reads on to the end: no restart


async def test_a_tail_read_starts_over_after_a_rewrite(backend: Backend, small_pages: int) -> None:
    s = make(backend)
    await s.add_items(msgs(6))
    await push_raw(backend, "s1", *[GARBAGE] * 6)

    async def compact_once(n: int) -> None:
        if n == 1:
            await CompactionSession(make(backend), _summarize).compact(force=True)

    count_calls(s, "_lrange", compact_once)
    assert await s.get_items(2) == [{"type": "compaction", "summary": "6 items"}]


async def test_a_read_that_never_settles_gives_up(backend: Backend, small_pages: int) -> None:
    s = make(backend)
    other = make(backend)
    await s.add_items(msgs(100))

    async def always_rewrite(n: int) -> None:  # a pop and an add: never empty, never the same
        await other.pop_item()
        await other.add_items(msgs(1, start=n))

    count_calls(s, "_lrange", always_rewrite)
    with expect_error(ErrorCode.STORE_CONFLICT):
        await s.snapshot()


# -- on a private server: 200,000 non-items and no call holds the server -------------------
LIMIT_US = 50_000
"""A quarter of what one call over all 200k entries took (about 200 ms)."""


@pytest.mark.real
async def test_every_call_stays_short_over_200k_garbage(redis_server: Any) -> None:
    """Each call reads or drops at most SCAN_LIMIT entries, so none holds the server long:
    every script's time as the server measures it (SLOWLOG), on a private server, the
    least of the rounds per script (tests/slowlog.py)."""
    client = Redis.from_url(redis_server.url)
    b = Backend("redis", f"bounded{uuid.uuid4().hex[:8]}", client, url=redis_server.url, server=redis_server)
    key = key_of(b)
    names = {script.sha.encode(): script.name for script in SCRIPTS}

    def kind(words: list[bytes], _: bytes) -> str | None:
        if words[0] == b"EVALSHA":
            return names.get(words[1], "EVALSHA")
        return "LRANGE" if words[0] == b"LRANGE" else None  # the test's own EVALs bury the garbage

    async def run_round() -> None:
        await client.delete(key)
        s = make(b)
        await s.add_items(msgs(3))
        await bury(client, key, [GARBAGE] * 200_000)
        reads, pops = (count_calls(s, name) for name in ("_lrange", "_write"))
        assert texts(await s.get_items(2)) == ["m1", "m2"]
        assert len(await s.get_items()) == 3
        assert texts([await s.pop_item()]) == ["m2"]
        assert len(reads) >= 40 and len(pops) >= 200  # the work was split
        assert texts(await s.get_items()) == ["m0", "m1"]

    try:
        seen = await least_over_rounds(client, run_round, kind, limit_us=LIMIT_US)
    finally:
        await client.delete(key)
        await client.aclose()
    assert {"LRANGE", "items_pop"} <= set(seen), seen
    assert {k: v for k, v in seen.items() if v >= LIMIT_US} == {}, seen
