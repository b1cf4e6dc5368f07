"""Every item-session call is bounded by count as well as by bytes, and a popped item
never rides in the header.

A byte limit alone let four million one-byte items into one script (half a second
of a server that every other client waits on). A session holds at most
``MAX_ITEMS`` entries, so one add, fork, clear, compaction or read of a whole
session stays short; a call past a bound is refused (``session.input.invalid``,
400) before anything is written.
"""

from __future__ import annotations

from typing import Any, AsyncIterator

import pytest
from redis.asyncio import Redis

from conftest import Backend
from slowlog import least_over_rounds
from redis_sessions.items.redis import SCRIPTS
from redis_sessions.codec import encode
from redis_sessions.errors import ErrorCode, SessionError
from redis_sessions.items import CompactionSession, RedisSession
from redis_sessions.items import header as hd
from test_items import _summarize, expect_error, header_of, key_of, make as make_any, msgs, prefix_keys, texts
from test_items_layout import state


def make(b: Backend, sid: str = "s1", **kw: Any) -> Any:
    """These tests size their items ("x" * n, which compresses to nothing): stored as they are."""
    return make_any(b, sid, compression=False, **kw)


EMPTY: dict[str, Any] = {}


def refused(ev: BaseException) -> None:
    assert isinstance(ev, SessionError) and ev.code is ErrorCode.INPUT_INVALID and ev.http_status == 400, ev


# -- one past each bound is refused, and writes nothing -------------------------------------
async def test_an_add_of_one_item_past_the_bound_is_refused(redis_backend: Backend) -> None:
    s = make(redis_backend)
    with pytest.raises(SessionError) as err:
        await s.add_items([EMPTY] * (hd.MAX_ITEMS + 1))
    refused(err.value)
    assert await prefix_keys(redis_backend) == []
    with pytest.raises(SessionError) as err:  # far past it: refused before anything is encoded
        await s.add_items([EMPTY] * (4 << 20))
    refused(err.value)
    assert await prefix_keys(redis_backend) == []


async def test_a_full_session_refuses_one_more_item(redis_backend: Backend) -> None:
    s = make(redis_backend)
    await s.add_items([EMPTY] * (hd.MAX_ITEMS - 1))
    await s.add_items(msgs(1))  # the bound itself is admitted
    before = await state(redis_backend)
    with pytest.raises(SessionError) as err:
        await s.add_items(msgs(1))
    refused(err.value)
    with pytest.raises(SessionError) as err:
        await s.add_items(msgs(1), idempotency_key="k1")
    refused(err.value)
    assert await state(redis_backend) == before
    assert texts(await s.get_items(1)) == ["m0"]
    await s.pop_item()
    await s.add_items(msgs(1, start=1))  # room again: a pop makes room
    assert texts(await s.get_items(1)) == ["m1"]


async def test_a_compaction_past_the_bound_is_refused(redis_backend: Backend) -> None:
    s = make(redis_backend)
    await s.add_items(msgs(3))
    snap = await s.snapshot()
    before = await state(redis_backend)
    with pytest.raises(SessionError) as err:
        await s.replace_prefix(snap, [EMPTY] * (hd.MAX_ITEMS + 1))
    refused(err.value)
    assert await state(redis_backend) == before
    # Within the bound itself, but with the items appended after the snapshot (kept
    # after the replacement) the session would hold one entry past it.
    await s.add_items(msgs(1, start=3))
    before = await state(redis_backend)
    with pytest.raises(SessionError) as err:
        await s.replace_prefix(snap, [EMPTY] * (hd.MAX_ITEMS))
    refused(err.value)
    assert await state(redis_backend) == before
    assert await CompactionSession(s, _summarize).compact(force=True) == "compacted"


async def test_a_fork_past_the_bounds_is_refused(redis_backend: Backend) -> None:
    b = redis_backend
    # A session from before the bound, longer than one: pushed by hand.
    await b.client.rpush(key_of(b, "old"), *[encode(EMPTY)] * (hd.MAX_ITEMS + 1))
    with pytest.raises(SessionError) as err:
        await make(b, "old").fork("f")
    refused(err.value)
    assert await make(b, "old").fork("g", upto=hd.MAX_ITEMS)  # a prefix within the bound is fine
    assert len(await make(b, "g").get_items()) == hd.MAX_ITEMS
    # Bytes: a fork carries its items in one call, bounded like an add_items.
    s = make(b, "big", max_batch_bytes=10_000)
    await s.add_items([{"x": "y" * 4000}] * 2)
    await s.add_items([{"x": "y" * 4000}] * 2)
    with expect_error(ErrorCode.RECORD_TOO_LARGE):
        await s.fork("h")
    assert sorted(await prefix_keys(b)) == sorted(key_of(b, sid) for sid in ("old", "g", "big"))


# -- a popped item is not carried by every later write ----------------------------------
async def test_a_popped_item_leaves_the_header_small(redis_backend: Backend) -> None:
    s = make(redis_backend)
    big = {"blob": "x" * ((1 << 20) - 64)}
    await s.add_items(msgs(2))
    await s.add_items([big])
    assert await s.pop_item() == big
    for i in range(3):
        await s.add_items(msgs(1, start=2 + i))
        header = await redis_backend.client.lindex(key_of(redis_backend), 0)
        assert len(header) < 1024, len(header)
    assert texts(await s.get_items()) == ["m0", "m1", "m2", "m3", "m4"]
    assert (await header_of(redis_backend)).version == 6


# -- on a real private server: no command over 5 ms ----------------------------------------
@pytest.fixture
async def private(redis_server: Any) -> AsyncIterator[Backend]:
    client = Redis.from_url(redis_server.url)
    old = (await client.config_get("slowlog-log-slower-than"))["slowlog-log-slower-than"]
    try:
        yield Backend("redis", "limits", client, url=redis_server.url, server=redis_server)
    finally:
        await client.config_set("slowlog-log-slower-than", old)
        await client.delete(*(await client.keys("limits:*")) or ["limits:none"])
        await client.aclose()


@pytest.mark.real
async def test_no_command_over_5ms_at_the_bounds(private: Backend) -> None:
    """The largest calls the defaults admit, on a private server: every command's time in
    SLOWLOG, the least of the rounds per kind (tests/slowlog.py)."""
    b, client = private, private.client
    names = {s.sha.encode(): s.name for s in SCRIPTS}

    def kind(words: list[bytes], _: bytes) -> str | None:
        if words[0] in (b"SLOWLOG", b"CONFIG", b"DEL"):
            return None
        return names.get(words[1], words[0].decode()) if words[0] == b"EVALSHA" else words[0].decode()

    async def run_round() -> None:
        await client.delete(key_of(b), key_of(b, "f"))
        s = make(b)
        try:  # the largest add the byte default admits by count: refused now, not half a second
            await s.add_items([EMPTY] * (4 << 20))
        except SessionError as exc:
            refused(exc)
        await s.add_items([EMPTY] * hd.MAX_ITEMS)  # a full session, in one add
        assert len(await s.get_items()) == hd.MAX_ITEMS
        assert len(await s.get_items(hd.MAX_ITEMS)) == hd.MAX_ITEMS
        f = await s.fork("f")  # a fork of a full session
        assert await s.pop_item() == EMPTY
        assert await CompactionSession(s, _summarize).compact(force=True) == "compacted"
        await f.clear_session()  # a clear of a full session

    seen = await least_over_rounds(client, run_round, kind)
    assert {"items_add", "items_fork", "items_pop", "items_compact", "items_clear"} <= set(seen), seen
    assert {k: v for k, v in seen.items() if v >= 5000} == {}, seen


@pytest.mark.real
async def test_writes_after_a_big_pop_stay_cheap(private: Backend) -> None:
    b, client = private, private.client
    s = make(b)
    await s.add_items([{"blob": "x" * ((1 << 20) - 64)}])
    await s.pop_item()
    before = (await client.info("commandstats"))["cmdstat_evalsha"]
    for i in range(20):
        await s.add_items(msgs(1, start=i))
    after = (await client.info("commandstats"))["cmdstat_evalsha"]
    per_add = (after["usec"] - before["usec"]) / (after["calls"] - before["calls"])
    assert per_add < 1000, per_add  # a 1 MiB header read and rewritten by each: about 4,000
    assert len(await client.lindex(key_of(b), 0)) < 1024


@pytest.mark.real
async def test_reads_of_big_items_are_bounded_by_bytes(private: Backend) -> None:
    """Reads were bounded by count only: get_items of four items of the default 1 MiB held
    Redis 17-23 ms in one script. A read now takes about READ_BYTES a call, by the largest
    entry the header knows, and calls again: no command over 5 ms, every item read whole."""
    b, client = private, private.client
    big = [{"blob": str(i) * ((1 << 20) - 64)} for i in range(6)]
    names = {s.sha.encode(): s.name for s in SCRIPTS}

    def kind(words: list[bytes], _: bytes) -> str | None:
        if words[0] not in (b"EVALSHA", b"LRANGE", b"LINDEX"):
            return None
        return names.get(words[1], "EVALSHA") if words[0] == b"EVALSHA" else words[0].decode()

    async def run_round() -> None:
        await client.delete(key_of(b))
        s = make(b)
        for item in big:
            await s.add_items([item])
        assert await s.get_items() == big
        assert await s.get_items(3) == big[-3:]
        assert (await s.snapshot()).items == big
        assert await s.pop_item() == big[-1]
        assert await s.get_items(10) == big[:-1]

    seen = await least_over_rounds(client, run_round, kind)
    assert {"items_get", "items_read"} <= set(seen), seen
    assert {k: v for k, v in seen.items() if v >= 5000} == {}, seen
    assert (await header_of(b)).largest is not None
