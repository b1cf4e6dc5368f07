"""Bounded work per script call, and paged reads that stay consistent.

Redis runs one script at a time per shard: a pop that walks two million
non-item entries in one call held a server for 1.87 s. Pops drop at most
``SCAN_LIMIT`` entries per call and reads return or scan at most that many;
the Python side calls again. Long reads go page by page and start over if the
list was rewritten between pages (appends only add at the tail, so they do
not invalidate a page).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable

import pytest
from redis.asyncio.cluster import RedisCluster

from conftest import Backend
from redis_sessions.errors import ErrorCode
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


# -- on a real server: 200,000 non-items and nothing stalls ------------------------------
async def _node_call(b: Backend, key: str, method: str, *args: Any) -> Any:
    if isinstance(b.client, RedisCluster):
        return await getattr(b.client, method)(*args, target_nodes=b.client.get_node_from_key(key))
    return await getattr(b.client, method)(*args)


@pytest.mark.real
async def test_every_call_stays_short_over_200k_garbage(real_backend: Backend) -> None:
    b = real_backend
    s = make(b)
    key = key_of(b)
    await s.add_items(msgs(3))
    for _ in range(20):
        await b.client.rpush(key, *([GARBAGE] * 10_000))
    tails, pages, pops = (count_calls(s, name) for name in ("_eng_tail", "_eng_page", "_eng_pop"))
    pings: list[float] = []
    done = asyncio.Event()

    async def pinger() -> None:
        while not done.is_set():
            start = time.perf_counter()
            await _node_call(b, key, "ping")
            pings.append(time.perf_counter() - start)
            await asyncio.sleep(0.005)

    # Log the scripts that run a millisecond or more (one call over all 200k entries ran ~200 ms).
    old = await _node_call(b, key, "config_get", "slowlog-log-slower-than")
    await _node_call(b, key, "config_set", "slowlog-log-slower-than", 1000)
    await _node_call(b, key, "slowlog_reset")
    task = asyncio.ensure_future(pinger())
    try:
        assert texts(await s.get_items(2)) == ["m1", "m2"]
        assert len(await s.get_items()) == 3
        assert texts([await s.pop_item()]) == ["m2"]
        done.set()
        await task
        log = await _node_call(b, key, "slowlog_get", 128)
    finally:
        done.set()
        await _node_call(b, key, "config_set", "slowlog-log-slower-than", _value(old, "slowlog-log-slower-than"))
    # The work was split: each call read or dropped at most SCAN_LIMIT entries ...
    assert len(tails) >= 200 and len(pages) >= 200 and len(pops) >= 200
    # ... so no call held the server long (the server's own measure: the slow log), and
    # a PING always got through (a coarse check: this machine is shared and noisy).
    slow = [e["duration"] for e in log if _command(e).startswith(b"EVAL") and key.encode() in _command(e)]
    assert max(slow, default=0) < 50_000, slow
    assert max(pings) < 2.0, max(pings)
    assert texts(await s.get_items()) == ["m0", "m1"]


def _value(config: Any, name: str) -> Any:
    """CONFIG GET's answer, from a server or (per node) from a cluster."""
    if name in config:
        return config[name]
    return next(iter(config.values()))[name]


def _command(entry: dict[str, Any]) -> bytes:
    command = entry.get("command", b"")
    if isinstance(command, (list, tuple)):
        return b" ".join(c if isinstance(c, bytes) else str(c).encode() for c in command)
    return command if isinstance(command, bytes) else str(command).encode()
