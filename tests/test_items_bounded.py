"""Bounded work per script call, and paged reads that stay consistent.

Redis runs one script at a time per shard: a pop that walks two million
non-item entries in one call held a server for 1.87 s. Pops drop at most
``SCAN_LIMIT`` entries per call and reads return or scan at most that many;
the Python side calls again. Long reads go page by page and start over if the
list was rewritten between pages (appends only add at the tail, so they do
not invalidate a page).
"""

from __future__ import annotations

import uuid
from typing import Any, Awaitable, Callable

import pytest
from redis.asyncio import Redis

from conftest import Backend
from redis_sessions.errors import ErrorCode
from redis_sessions.items.redis import SCRIPTS
from slowlog import least_over_rounds
from redis_sessions.items import CompactionSession, ItemSession
from redis_sessions.items import header as hd
from test_items import (  # noqa: F401  (read_path is a fixture)
    GARBAGE, _summarize, expect_error, key_of, make, msgs, push_raw, read_path, texts,
)


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> int:
    """Pages, scans and pops of 3 entries, so a few entries make many calls."""
    monkeypatch.setattr(hd, "SCAN_LIMIT", 3)
    return 3


def count_calls(s: ItemSession, name: str, between: Callable[[int], Awaitable[Any]] | None = None) -> list[int]:
    """Count calls of one engine primitive; ``between(n)`` runs after the n-th call returns."""
    calls: list[int] = []
    real = getattr(s, name)

    async def counted(*args: Any) -> Any:
        reply = await real(*args)
        calls.append(len(calls) + 1)
        if between is not None:
            await between(len(calls))
        return reply

    setattr(s, name, counted)
    return calls


# -- each call bounded, the whole call still right -------------------------------------------
async def test_pop_drops_a_bounded_number_per_call(backend: Backend, small_pages: int) -> None:
    s = make(backend)
    await s.add_items(msgs(2))
    for _ in range(10):
        await push_raw(backend, "s1", GARBAGE)
    calls = count_calls(s, "_eng_pop")
    assert texts([await s.pop_item()]) == ["m1"]
    assert len(calls) == 4  # 3 + 3 + 3 dropped, then 1 more and the item
    for _ in range(4):
        await push_raw(backend, "s1", GARBAGE)
    calls.clear()
    assert texts([await s.pop_item()]) == ["m0"]
    assert await s.pop_item() is None


async def test_get_scans_a_bounded_number_per_call(backend: Backend, read_path: str, small_pages: int) -> None:
    s = make(backend)
    await s.add_items(msgs(4))
    for _ in range(8):
        await push_raw(backend, "s1", GARBAGE)
    await s.add_items(msgs(1, start=4))
    calls = count_calls(s, "_eng_tail")
    assert texts(await s.get_items(3)) == ["m2", "m3", "m4"]
    assert len(calls) == 4
    assert texts(await s.get_items(10)) == ["m0", "m1", "m2", "m3", "m4"]


async def test_full_reads_go_page_by_page(backend: Backend, read_path: str, small_pages: int) -> None:
    s = make(backend)
    await s.add_items(msgs(10))
    calls = count_calls(s, "_eng_page")
    assert texts(await s.get_items()) == [f"m{i}" for i in range(10)]
    snap = await s.snapshot()
    assert snap.count == 10 and snap.version == 1
    f = await s.fork("f")
    assert texts(await f.get_items()) == [f"m{i}" for i in range(10)]
    assert len(calls) >= 8  # 4 pages each for the snapshot and the fork (and the plain read, if any)


async def test_a_page_read_starts_over_after_a_rewrite(backend: Backend, small_pages: int) -> None:
    s = make(backend)
    other = make(backend)
    await s.add_items(msgs(8))

    async def pop_once(n: int) -> None:
        if n == 1:
            await other.pop_item()

    calls = count_calls(s, "_eng_page", pop_once)
    snap = await s.snapshot()
    assert texts(snap.items) == [f"m{i}" for i in range(7)] and snap.count == 8  # and the pop's stash
    assert len(calls) == 2 + 3  # a page, a pop, a page that sees it, then the whole read again
    assert await s.replace_prefix(snap, [{"type": "compaction", "summary": "7"}]) is True


async def test_appends_between_pages_do_not_restart(backend: Backend, small_pages: int) -> None:
    s = make(backend)
    other = make(backend)
    await s.add_items(msgs(5))

    async def add_once(n: int) -> None:
        if n == 1:
            await other.add_items(msgs(1, start=5))

    calls = count_calls(s, "_eng_page", add_once)
    snap = await s.snapshot()
    assert texts(snap.items) == [f"m{i}" for i in range(6)] and snap.version == 2  # the last page's
    assert len(calls) == 2  # 3, then 3 and "nothing follows": no empty last page, no restart


async def test_a_tail_read_starts_over_after_a_rewrite(backend: Backend, small_pages: int) -> None:
    s = make(backend)
    await s.add_items(msgs(6))
    for _ in range(6):
        await push_raw(backend, "s1", GARBAGE)

    async def compact_once(n: int) -> None:
        if n == 1:
            await CompactionSession(make(backend), _summarize).compact(force=True)

    count_calls(s, "_eng_tail", compact_once)
    assert await s.get_items(2) == [{"type": "compaction", "summary": "6 items"}]


async def test_a_read_that_never_settles_gives_up(backend: Backend, small_pages: int) -> None:
    s = make(backend)
    other = make(backend)
    await s.add_items(msgs(100))

    async def always_pop(n: int) -> None:
        await other.pop_item()

    count_calls(s, "_eng_page", always_pop)
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
        return names.get(words[1], "EVALSHA") if words[0] == b"EVALSHA" else None  # the garbage RPUSHes are the test's

    async def run_round() -> None:
        await client.delete(key)
        s = make(b)
        await s.add_items(msgs(3))
        for _ in range(20):
            await client.rpush(key, *([GARBAGE] * 10_000))
        tails, pages, pops = (count_calls(s, name) for name in ("_eng_tail", "_eng_page", "_eng_pop"))
        assert texts(await s.get_items(2)) == ["m1", "m2"]
        assert len(await s.get_items()) == 3
        assert texts([await s.pop_item()]) == ["m2"]
        assert len(tails) >= 200 and len(pages) >= 200 and len(pops) >= 200  # the work was split
        assert texts(await s.get_items()) == ["m0", "m1"]

    try:
        seen = await least_over_rounds(client, run_round, kind, limit_us=LIMIT_US)
    finally:
        await client.delete(key)
        await client.aclose()
    assert {"items_get", "items_read", "items_pop"} <= set(seen), seen
    assert {k: v for k, v in seen.items() if v >= LIMIT_US} == {}, seen
