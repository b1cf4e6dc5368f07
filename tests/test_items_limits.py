"""Every item-session call is bounded by count as well as by bytes, whatever the
session's length, and a popped item never rides in the header.

A byte limit alone let four million one-byte items into one script (half a second
of a server that every other client waits on). One add, compaction or fork writes
at most ``MAX_BATCH_ITEMS`` items; a call past a bound is refused
(``session.input.invalid``, 400) before anything is written. A session itself holds
any number, as the Agents SDK's does (a cap of 10,000 failed a long-running agent
the day it got there), unless ``max_items`` bounds it: sessions of 200,000 items and
of 1,000,000 are measured here call by call on a private server.
"""

from __future__ import annotations

import base64
import random
from collections import Counter
from typing import Any, AsyncIterator, Callable, Optional

import fakeredis
import pytest
from redis.asyncio import Redis

from conftest import Backend
from slowlog import least_over_rounds
from redis_sessions.items.redis import SCRIPTS
from redis_sessions.codec import encode, encode_items, pack
from redis_sessions.errors import ErrorCode, SessionError
from redis_sessions.items import CompactionSession, RedisSession
from redis_sessions.items import header as hd
from test_items import (
    GARBAGE, _summarize, bury, expect_error, header_of, key_of, make as make_any, msgs, prefix_keys, push_raw, texts,
)
from test_items_bounded import count_calls
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
        await s.add_items([EMPTY] * (hd.MAX_BATCH_ITEMS + 1))
    refused(err.value)
    assert await prefix_keys(redis_backend) == []
    with pytest.raises(SessionError) as err:  # far past it: refused before anything is encoded
        await s.add_items([EMPTY] * (4 << 20))
    refused(err.value)
    assert await prefix_keys(redis_backend) == []


async def test_a_session_holds_more_than_any_one_write(redis_backend: Backend) -> None:
    """The Agents SDK's sessions have no cap: a session that reached 10,000 items refused
    every later write, so an agent that changed one import failed the day it got there."""
    s = make(redis_backend)
    for _ in range(2):
        await s.add_items([EMPTY] * hd.MAX_BATCH_ITEMS)
    await s.add_items(msgs(1))
    await s.add_items(msgs(1, start=1), idempotency_key="k1")
    assert texts(await s.get_items(2)) == ["m0", "m1"]
    assert len(await s.get_items()) == 2 * hd.MAX_BATCH_ITEMS + 2
    assert (await s.snapshot()).count == 2 * hd.MAX_BATCH_ITEMS + 2
    assert texts([await s.pop_item()]) == ["m1"]
    assert await CompactionSession(s, _summarize).compact(force=True) == "compacted"
    assert await s.get_items() == [{"type": "compaction", "summary": f"{2 * hd.MAX_BATCH_ITEMS + 1} items"}]


async def test_max_items_bounds_a_session_when_given(redis_backend: Backend) -> None:
    b = redis_backend
    s = make(b, max_items=3)
    await s.add_items(msgs(2))
    await s.add_items(msgs(1, start=2))  # the bound itself is admitted
    before = await state(b)
    for call in (lambda: s.add_items(msgs(1, start=3)), lambda: s.add_items(msgs(1, start=3), idempotency_key="k1"),
                 lambda: s.add_items(msgs(4, start=3))):
        with pytest.raises(SessionError) as err:
            await call()
        refused(err.value)
        assert "max_items" in str(err.value)
    assert await state(b) == before
    await s.pop_item()
    await s.add_items(msgs(1, start=3))  # room again: a pop makes room
    assert texts(await s.get_items()) == ["m0", "m1", "m3"]
    # A fork is a session of the same settings: it copies at most max_items.
    other = make(b, "wide")
    await other.add_items(msgs(5))
    capped = make(b, "wide", max_items=3)
    with pytest.raises(SessionError) as err:
        await capped.fork("f")
    refused(err.value)
    assert await prefix_keys(b) == sorted([key_of(b), key_of(b, "wide")])
    f = await capped.fork("f", upto=3)
    assert texts(await f.get_items()) == ["m0", "m1", "m2"] and f.max_items == 3
    with pytest.raises(SessionError) as err:
        await f.add_items(msgs(1))
    refused(err.value)
    # A compaction that leaves more than max_items is refused only if it grows the session:
    # one set lower than a session already holds still lets it shrink.
    snap = await capped.snapshot()
    before = await state(b)
    with pytest.raises(SessionError) as err:
        await capped.replace_prefix(snap, msgs(6))
    refused(err.value)
    assert await state(b) == before
    assert await capped.replace_prefix(snap, msgs(4, start=10)) is True
    assert texts(await capped.get_items()) == ["m10", "m11", "m12", "m13"]


@pytest.mark.parametrize("value", [0, -1, True, "5", 2.0])
def test_max_items_is_a_positive_int_or_none(value: Any) -> None:
    client = fakeredis.FakeAsyncRedis()
    with expect_error(ErrorCode.INPUT_INVALID):
        RedisSession("s1", client=client, max_items=value)
    with expect_error(ErrorCode.INPUT_INVALID):
        RedisSession.from_url("s1", url="redis://127.0.0.1:1/0", max_items=value)
    assert RedisSession("s1", client=client).max_items is None
    assert RedisSession.from_url("s1", url="redis://127.0.0.1:1/0", max_items=7).max_items == 7


async def test_a_compaction_past_the_bound_is_refused(redis_backend: Backend) -> None:
    s = make(redis_backend)
    await s.add_items(msgs(3))
    snap = await s.snapshot()
    before = await state(redis_backend)
    with pytest.raises(SessionError) as err:
        await s.replace_prefix(snap, [EMPTY] * (hd.MAX_BATCH_ITEMS + 1))
    refused(err.value)
    assert await state(redis_backend) == before
    # The bound itself is admitted, with the items appended after the snapshot kept after it.
    await s.add_items(msgs(1, start=3))
    assert await s.replace_prefix(snap, [EMPTY] * hd.MAX_BATCH_ITEMS) is True
    assert len(await s.get_items()) == hd.MAX_BATCH_ITEMS + 1
    assert texts(await s.get_items(1)) == ["m3"]


async def test_a_fork_past_the_bounds_is_refused(redis_backend: Backend) -> None:
    b = redis_backend
    # A session longer than one call writes.
    await make(b, "old").add_items([EMPTY])
    await bury(b.client, key_of(b, "old"), [pack(encode(EMPTY), 0)] * hd.MAX_BATCH_ITEMS)
    with pytest.raises(SessionError) as err:
        await make(b, "old").fork("f")
    refused(err.value)
    assert await make(b, "old").fork("g", upto=hd.MAX_BATCH_ITEMS)  # a prefix within the bound is fine
    assert len(await make(b, "g").get_items()) == hd.MAX_BATCH_ITEMS
    # Bytes: a fork carries its items in one call, bounded like an add_items.
    s = make(b, "big", max_batch_bytes=10_000)
    await s.add_items([{"x": "y" * 4000}] * 2)
    await s.add_items([{"x": "y" * 4000}] * 2)
    with expect_error(ErrorCode.RECORD_TOO_LARGE):
        await s.fork("h")
    assert sorted(await prefix_keys(b)) == sorted(key_of(b, sid) for sid in ("old", "g", "big"))


async def test_a_fork_reads_no_further_than_it_copies(redis_backend: Backend) -> None:
    """A fork of a long session read all of it before refusing it: 25 pages here, 200 for
    200,000 items. It now stops one item past what one call may carry, or at ``upto``."""
    s = make(redis_backend)
    for _ in range(2):
        await s.add_items([EMPTY] * hd.MAX_BATCH_ITEMS)
    await s.add_items([EMPTY] * (hd.MAX_BATCH_ITEMS // 2))
    pages = count_calls(s, "_lrange")

    def read() -> int:  # the entries the LRANGEs since the last call could take (the newest few aside)
        took = sum(stop - start + 1 for start, stop in pages if start > 0 and stop > 0)
        pages.clear()
        return took

    with pytest.raises(SessionError) as err:
        await s.fork("f")
    refused(err.value)
    assert read() <= hd.MAX_BATCH_ITEMS + 1 + 16
    await s.fork("g", upto=3)
    assert read() <= 16 and await make(redis_backend, "g").get_items() == [EMPTY] * 3
    assert (await header_of(redis_backend, "g")).forked_at == b"3"
    await s.fork("h", upto=hd.MAX_BATCH_ITEMS)
    assert read() <= hd.MAX_BATCH_ITEMS and len(await make(redis_backend, "h").get_items()) == hd.MAX_BATCH_ITEMS


# -- a popped item is not carried by every later write ----------------------------------
async def test_a_popped_item_leaves_the_header_small(redis_backend: Backend) -> None:
    s = make(redis_backend)
    big = {"blob": "x" * ((1 << 20) - 64)}
    await s.add_items(msgs(2))
    await s.add_items([big])
    assert await s.pop_item() == big
    for i in range(3):
        await s.add_items(msgs(1, start=2 + i))
        header = await redis_backend.client.lindex(key_of(redis_backend), -1)
        assert len(header) < 100, len(header)
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
        await s.add_items([EMPTY] * hd.MAX_BATCH_ITEMS)  # a full session, in one add
        assert len(await s.get_items()) == hd.MAX_BATCH_ITEMS
        assert len(await s.get_items(hd.MAX_BATCH_ITEMS)) == hd.MAX_BATCH_ITEMS
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
    per_add = float("inf")
    for round_ in range(12):  # the least of the rounds, as tests/slowlog.py: a descheduled server reads slow
        before = (await client.info("commandstats"))["cmdstat_evalsha"]
        for i in range(20):
            await s.add_items(msgs(1, start=20 * round_ + i))
        after = (await client.info("commandstats"))["cmdstat_evalsha"]
        per_add = min(per_add, (after["usec"] - before["usec"]) / (after["calls"] - before["calls"]))
        if per_add < 1000:
            break
    assert per_add < 1000, per_add  # a 1 MiB header read and rewritten by each: about 4,000
    assert len(await client.lindex(key_of(b), -1)) < 100


@pytest.mark.real
async def test_reads_of_big_items_are_bounded_by_bytes(private: Backend) -> None:
    """Reads were bounded by count only: get_items of four items of the default 1 MiB held
    Redis 17-23 ms in one script. A read now takes at most READ_BYTES an LRANGE, by the
    largest entry the header knows (before it knows, by max_item_bytes), and calls again:
    no command over 5 ms, every item read whole. At the defaults, compression included:
    the items are base64 of random bytes (an image's data, the least compressible text an
    item carries), which zstd stores at about three quarters of its size. A pop copies its
    item through Lua twice (docs/benchmarks.md#the-longest-hold-by-size), so with
    compression=False an item of 1 MiB that does not compress at all pops in about the
    bound itself; guarantees.md says so."""
    b, client = private, private.client
    big = [{"blob": base64.b64encode(random.Random(i).randbytes(3 << 18)).decode()[:(1 << 20) - 64]}
           for i in range(6)]
    names = {s.sha.encode(): s.name for s in SCRIPTS}

    def kind(words: list[bytes], _: bytes) -> str | None:
        if words[0] not in (b"EVALSHA", b"LRANGE", b"LINDEX"):
            return None
        return names.get(words[1], "EVALSHA") if words[0] == b"EVALSHA" else words[0].decode()

    async def run_round() -> None:
        await client.delete(key_of(b))
        s = make_any(b, "s1")  # the defaults, compression on
        for item in big:
            await s.add_items([item])
        assert await s.get_items() == big
        assert await s.get_items(3) == big[-3:]
        assert (await s.snapshot()).items == big
        assert await s.pop_item() == big[-1]
        assert await s.get_items(10) == big[:-1]

    seen = await least_over_rounds(client, run_round, kind)
    assert {"LRANGE", "items_add", "items_pop"} <= set(seen), seen
    assert {k: v for k, v in seen.items() if v >= 5000} == {}, seen
    largest = (await header_of(b)).largest
    assert largest is not None and largest > 700_000  # stored big: compression took off a quarter at most

# -- a session of any length: every call of every operation, on a private server ------------
LONG = 200_000
"""A long-running agent's session: twenty times the cap that was removed."""
LONGEST = 1_000_000


def numbered(item: int) -> dict[str, Any]:
    """Items of one encoded length, so the largest entry the header knows is every entry's."""
    return {"type": "message", "role": "assistant", "content": f"m{item:07d}"}


async def grow(b: Backend, sid: str, first: dict[str, Any], rest: list[bytes]) -> RedisSession:
    """A session at the defaults holding ``first`` and then ``rest``, made fast: ``first``
    through add_items (the package writes the header), ``rest`` (entries the package
    encoded) put behind it as the header counts them, a batch per call."""
    await b.client.delete(key_of(b, sid))
    s = RedisSession(sid, client=b.client, key_prefix=b.prefix)
    await s.add_items([first])
    await bury(b.client, key_of(b, sid), rest)
    assert await b.client.llen(key_of(b, sid)) == 2 + 1 + len(rest) + 2  # the stash, first, rest, ring, header
    return s


class CallByCall:
    """Names each logged command by its kind and its place in the round ("items_read 17"),
    so that the least over the rounds (tests/slowlog.py) is taken call by call: a round
    of hundreds of pages nearly always has one that the busy machine descheduled, but
    the same call is slow in every round only if it is slow itself."""

    def __init__(self, kind: Callable[[list[bytes], bytes], Optional[str]]) -> None:
        self.kind, self.places = kind, Counter[str]()

    def __call__(self, words: list[bytes], command: bytes) -> Optional[str]:
        name = self.kind(words, command)
        if name is None:
            return None
        self.places[name] += 1
        return f"{name} {self.places[name]}"

    def start(self) -> None:
        """A new round: SLOWLOG lists the same calls in the same order."""
        self.places.clear()


@pytest.mark.real
async def test_no_command_over_5ms_on_a_session_of_any_length(private: Backend) -> None:
    """Every operation on sessions of 200,000 items and of 1,000,000, at the defaults: no
    script call over 5 ms. Writes touch the list's ends; pops, reads, scans, forks and
    snapshots go in pages of SCAN_LIMIT entries (or READ_BYTES); a clear or a
    compaction frees what it removes in its LTRIM, whose time follows the bytes freed,
    not their count. A fork of more than one call's worth is refused after that many."""
    b, client = private, private.client
    names = {s.sha.encode(): s.name for s in SCRIPTS}

    def kind(words: list[bytes], _: bytes) -> str | None:
        if words[0] == b"EVALSHA":
            return names.get(words[1], "EVALSHA")
        # the session's plain reads and its scripts' own; not the test's EVAL and DEL: a
        # script's commands are in its EVALSHA's time
        return words[0].decode() if words[0] in (b"LRANGE", b"LINDEX", b"LLEN") else None

    calls = CallByCall(kind)
    first = numbered(0)
    rest = [pack(e, 0) for e in encode_items([numbered(i) for i in range(1, LONG)], 1 << 20, 1 << 30, LONG)]
    batch = [numbered(i) for i in range(LONG, LONG + hd.MAX_BATCH_ITEMS)]
    tiny = [pack(encode(EMPTY), 0)] * (LONGEST - 1)
    summary = {"type": "compaction", "summary": "all of it"}

    async def run_round() -> None:
        calls.start()
        await client.delete(key_of(b, "g"))
        s = await grow(b, "s1", first, rest)
        cleared = await grow(b, "c", first, rest)
        longest = await grow(b, "d", EMPTY, tiny)
        await s.add_items([numbered(LONG + hd.MAX_BATCH_ITEMS)])  # one item
        await s.add_items(batch)  # one call's worth: MAX_BATCH_ITEMS
        assert await s.get_items(20) == batch[-20:]
        assert await s.get_items(5 * hd.SCAN_LIMIT) == batch[-5 * hd.SCAN_LIMIT:]  # five calls
        sliding = RedisSession("s1", client=client, key_prefix=b.prefix, sliding_ttl=True)
        assert await sliding.get_items(20) == batch[-20:]
        assert await s.pop_item() == batch[-1]
        await bury(client, key_of(b), [GARBAGE] * (2 * hd.SCAN_LIMIT + hd.SCAN_LIMIT // 2))
        assert await s.pop_item() == batch[-2]  # three calls, the non-items dropped on the way
        with pytest.raises(SessionError) as err:  # after MAX_BATCH_ITEMS + 1 items read
            await s.fork("f")
        refused(err.value)
        f = await s.fork("g", upto=hd.MAX_BATCH_ITEMS)
        assert await f.get_items(1) == [numbered(hd.MAX_BATCH_ITEMS - 1)]
        held = await s.get_items()  # every item, page by page
        assert len(held) == LONG + hd.MAX_BATCH_ITEMS - 1 and held[-1] == batch[-3]
        assert await s._atomic_replace_items([summary]) is True  # the SDK's compaction: all of it
        assert await s.get_items() == [summary]
        await cleared.clear_session()
        await longest.add_items([EMPTY])
        assert await longest.get_items(20) == [EMPTY] * 20
        assert await longest.pop_item() == EMPTY
        await longest.clear_session()
        assert await longest.get_items() == [] and await cleared.get_items() == []

    seen = await least_over_rounds(client, run_round, calls)
    worst: dict[str, int] = {}
    for name, us in seen.items():
        worst[name.split(" ")[0]] = max(us, worst.get(name.split(" ")[0], 0))
    assert {"items_add", "LRANGE", "items_pop", "items_fork", "items_compact", "items_clear"} <= set(worst), worst
    assert {k: v for k, v in seen.items() if v >= 5000} == {}, worst
