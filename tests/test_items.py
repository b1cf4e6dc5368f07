"""Item sessions: one behaviour suite over every backend (memory, fakeredis, redis, cluster)."""

from __future__ import annotations

import asyncio
from typing import Any, Optional

import fakeredis
import pytest
from agents.memory import OpenAIResponsesCompactionAwareSession, Session, SessionSettings
from redis.asyncio.cluster import RedisCluster

from async_front import AsyncFront
from conftest import Backend
from redis_sessions.errors import ErrorCode, SessionError
from redis_sessions import MemorySession
from redis_sessions.items import CompactionSession, RedisSession, SyncCompactionSession, SyncRedisSession
from redis_sessions.link import run_blocking
from redis_sessions.items import header
from redis_sessions.items.header import Header
from redis_sessions import tokens
from redis_sessions.keys import KeySpace
from servers import free_port


# -- helpers ------------------------------------------------------------------
def make(b: Backend, sid: str = "s1", **kw: Any) -> RedisSession:
    """The session on ``b``; on a backend of the ``sync`` API (tests/conftest.py), the
    SyncRedisSession on a sync client of the same server, behind async methods."""
    if b.api == "sync":
        sync = SyncRedisSession(sid, client=b.sync_client(), key_prefix=b.prefix, **kw)
        return AsyncFront(sync)  # type: ignore[return-value]
    return RedisSession(sid, client=b.client, key_prefix=b.prefix, **kw)


def core(s: Any) -> RedisSession:
    """What a CompactionSession wraps: on the sync API, the SyncRedisSession's
    RedisSession, on the same sync client, awaited in the test's loop (for a compactor
    that waits on the test: Gate)."""
    return s.sync.core if isinstance(s, AsyncFront) else s


def compaction(s: Any, compactor: Any, **kw: Any) -> CompactionSession:
    """``s``'s CompactionSession; on the sync API the SyncCompactionSession, its compactor
    the plain function that runs ``compactor`` (one that never waits), behind async methods."""
    if isinstance(s, AsyncFront):
        return AsyncFront(SyncCompactionSession(s.sync, lambda items: run_blocking(compactor(items)), **kw))  # type: ignore[return-value]
    return CompactionSession(s, compactor, **kw)


def msgs(n: int, start: int = 0, role: str = "assistant") -> list[dict[str, Any]]:
    return [{"type": "message", "role": role, "content": f"m{i}"} for i in range(start, start + n)]


def texts(items: list[Any]) -> list[str]:
    return [i["content"] for i in items]


_INSERT = """
local tail = redis.call('LRANGE', KEYS[1], -2, -1)
local before, n, after = string.match(tail[2], '^(%z%S+ %d+ %d+ )(%d+)( .*)$')
redis.call('LTRIM', KEYS[1], 0, -3)
for i = 1, #ARGV, 1000 do redis.call('RPUSH', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV))) end
redis.call('RPUSH', KEYS[1], tail[1], before .. (tonumber(n) + #ARGV) .. after)
"""


async def push_raw(b: Backend, sid: str, *data: bytes) -> None:
    """``data`` as the session's newest entries, counted by its header: entries that are no
    items of this format, as damage in place or a writer of another version would leave."""
    await bury(b.client, KeySpace(b.prefix).session_items(sid), list(data))


async def bury(client: Any, key: str, entries: list[bytes]) -> None:
    """``entries`` after the items of the session at ``key``, as its header counts them, in
    batches of 10,000 (a test's way to a long session; the package writes at most MAX_BATCH_ITEMS a call)."""
    for at in range(0, len(entries), 10_000):
        await client.eval(_INSERT, 1, key, *entries[at:at + 10_000])


async def prefix_keys(b: Backend) -> list[str]:
    """Every key this test wrote (all cluster primaries)."""
    if isinstance(b.client, RedisCluster):
        found = await b.client.keys(f"{b.prefix}:*", target_nodes=RedisCluster.PRIMARIES)
    else:
        found = await b.client.keys(f"{b.prefix}:*")
    return sorted(k.decode() for k in found)


def key_of(b: Backend, sid: str = "s1") -> str:
    return KeySpace(b.prefix).session_items(sid)


async def pttl(b: Backend, sid: str = "s1") -> int:
    """Like PTTL: ms left, -1 without a TTL, -2 without a key."""
    return int(await b.client.pttl(key_of(b, sid)))


async def header_of(b: Backend, sid: str = "s1") -> Header:
    return header.parse(await b.client.lindex(key_of(b, sid), -1), "test")


async def ring_of(b: Backend, sid: str = "s1") -> list[tuple[int, bytes, bytes]]:
    """The session's token ring (lua/tokens.lua), oldest first: (server s, token, outcome)."""
    ring = await b.client.lindex(key_of(b, sid), -2)
    out = []
    for line in ring.split(b"\n")[:-1]:
        token, _, outcome = line[10:].partition(b" ")
        out.append((int(line[:10]), token, outcome))
    return out


async def tokens_of(b: Backend, sid: str = "s1") -> list[bytes]:
    return [token for _, token, _ in await ring_of(b, sid)]


def expect_error(code: ErrorCode) -> Any:
    class _Ctx:
        def __enter__(self) -> None:
            return None

        def __exit__(self, et: Any, ev: Any, tb: Any) -> bool:
            assert isinstance(ev, SessionError), f"expected SessionError({code}), got {ev!r}"
            assert ev.code is code, ev
            return True

    return _Ctx()


# -- the protocol ------------------------------------------------------------------
async def test_satisfies_sdk_protocols(backend: Backend) -> None:
    s = make(backend)
    assert isinstance(s, Session)
    assert s.session_id == "s1"
    comp = CompactionSession(core(s), _summarize)
    assert isinstance(comp, Session)
    assert isinstance(comp, OpenAIResponsesCompactionAwareSession)
    assert comp.session_id == "s1" and comp.session_settings is s.session_settings


async def test_order_and_limits(backend: Backend) -> None:
    s = make(backend)
    assert await s.get_items() == []
    assert await s.pop_item() is None
    await s.add_items(msgs(3))
    await s.add_items(msgs(2, start=3))
    assert texts(await s.get_items()) == ["m0", "m1", "m2", "m3", "m4"]
    assert texts(await s.get_items(2)) == ["m3", "m4"]
    assert texts(await s.get_items(10)) == ["m0", "m1", "m2", "m3", "m4"]
    assert await s.get_items(0) == []
    assert await s.get_items(-1) == []
    await s.add_items([])
    assert len(await s.get_items()) == 5
    with expect_error(ErrorCode.INPUT_INVALID):
        await s.get_items("3")  # type: ignore[arg-type]


async def test_session_settings_limit(backend: Backend) -> None:
    s = make(backend, session_settings=SessionSettings(limit=3))
    await s.add_items(msgs(5))
    assert texts(await s.get_items()) == ["m2", "m3", "m4"]
    assert texts(await s.get_items(4)) == ["m1", "m2", "m3", "m4"]
    d = make(backend, session_settings={"limit": 2})
    assert isinstance(d.session_settings, SessionSettings)
    assert texts(await d.get_items()) == ["m3", "m4"]
    assert make(backend, "s2").session_settings == SessionSettings()  # the SDK's default


async def test_stored_state_cannot_be_mutated_through_objects(backend: Backend) -> None:
    s = make(backend)
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    await s.add_items([item])
    item["content"][0]["text"] = "changed"
    got = await s.get_items()
    assert got[0]["content"][0]["text"] == "hi"
    got[0]["content"][0]["text"] = "changed again"
    assert (await s.get_items())[0]["content"][0]["text"] == "hi"


@pytest.mark.parametrize(
    "bad, code",
    [
        ([{"ok": 1}, "not a dict"], ErrorCode.INPUT_INVALID),
        ([{"ok": 1}, {"x": object()}], ErrorCode.INPUT_INVALID),
        ([{"ok": 1}, {1: "int key"}], ErrorCode.INPUT_INVALID),
        ([{"ok": 1}, {"big": "x" * 300}], ErrorCode.RECORD_TOO_LARGE),
        ({"not": "a list"}, ErrorCode.INPUT_INVALID),
    ],
)
async def test_add_is_all_or_nothing(backend: Backend, bad: Any, code: ErrorCode) -> None:
    s = make(backend, max_item_bytes=256)
    await s.add_items(msgs(2))
    with expect_error(code):
        await s.add_items(bad)
    assert texts(await s.get_items()) == ["m0", "m1"]


async def test_default_size_limit_is_one_mib(backend: Backend) -> None:
    s = make(backend)
    with expect_error(ErrorCode.RECORD_TOO_LARGE):
        await s.add_items([{"blob": "x" * (1 << 20)}])
    await s.add_items([{"blob": "x" * ((1 << 20) - 100)}])
    assert len(await s.get_items()) == 1


async def test_large_batch_is_one_atomic_add(backend: Backend) -> None:
    s = make(backend)
    await s.add_items(msgs(2500))  # more than one Lua unpack chunk
    items = await s.get_items()
    assert texts(items) == [f"m{i}" for i in range(2500)]


async def test_pop_until_empty(backend: Backend) -> None:
    s = make(backend, ttl_seconds=None)
    await s.add_items(msgs(3))
    assert (await s.pop_item() or {})["content"] == "m2"
    assert (await s.pop_item() or {})["content"] == "m1"
    await s.add_items(msgs(1, start=9))
    assert (await s.pop_item() or {})["content"] == "m9"
    assert (await s.pop_item() or {})["content"] == "m0"
    assert await s.pop_item() is None
    assert await s.get_items() == []
    # An emptied session keeps its header (and token ring) for a while (its TTL; without
    # one, tokens.RETAIN_MS), then goes.
    assert await prefix_keys(backend) == [key_of(backend)]
    assert 0 < await pttl(backend) <= tokens.RETAIN_MS


async def test_clear(backend: Backend) -> None:
    s = make(backend, ttl_seconds=60)
    other = make(backend, "other")
    await s.add_items(msgs(3))
    await other.add_items(msgs(1))
    await s.clear_session()
    assert await s.get_items() == []
    assert await s.pop_item() is None
    assert texts(await other.get_items()) == ["m0"]
    await s.clear_session()  # idempotent
    await s.add_items(msgs(1, start=5))
    assert texts(await s.get_items()) == ["m5"]


# -- corrupt entries ----------------------------------------------------------------
GARBAGE = b"garbage"  # not a msgpack map: skipped by the scripts themselves
LOOKALIKE = b"\x81\xc1\xc1"  # starts like a map, fails to decode: skipped in Python


async def test_corrupt_entries_skipped_by_get_items(backend: Backend) -> None:
    s = make(backend)
    await s.add_items(msgs(5))
    await push_raw(backend, "s1", GARBAGE)
    await push_raw(backend, "s1", LOOKALIKE)
    await s.add_items(msgs(2, start=5))
    await push_raw(backend, "s1", GARBAGE)
    await push_raw(backend, "s1", LOOKALIKE)
    assert texts(await s.get_items()) == [f"m{i}" for i in range(7)]
    assert texts(await s.get_items(3)) == ["m4", "m5", "m6"]
    assert texts(await s.get_items(2)) == ["m5", "m6"]
    assert texts(await s.get_items(100)) == [f"m{i}" for i in range(7)]


async def test_get_items_reads_back_past_much_garbage(backend: Backend) -> None:
    s = make(backend)
    await s.add_items(msgs(40))
    for _ in range(50):
        await push_raw(backend, "s1", GARBAGE)
    await s.add_items(msgs(1, start=40))
    await push_raw(backend, "s1", GARBAGE)
    assert texts(await s.get_items(3)) == ["m38", "m39", "m40"]
    assert texts(await s.get_items(41)) == [f"m{i}" for i in range(41)]
    assert len(await s.get_items(1000)) == 41


async def test_corrupt_entries_dropped_by_pop(backend: Backend) -> None:
    s = make(backend)
    await s.add_items(msgs(2))
    await push_raw(backend, "s1", GARBAGE)
    await s.add_items(msgs(1, start=2))
    await push_raw(backend, "s1", LOOKALIKE)
    await push_raw(backend, "s1", GARBAGE)
    assert (await s.pop_item() or {})["content"] == "m2"
    assert texts(await s.get_items()) == ["m0", "m1"]
    assert (await s.pop_item() or {})["content"] == "m1"
    assert (await s.pop_item() or {})["content"] == "m0"
    assert await s.pop_item() is None
    await push_raw(backend, "s1", GARBAGE)
    assert await s.pop_item() is None
    assert await prefix_keys(backend) == [key_of(backend)]
    assert await s.get_items() == [] and await tokens_of(backend)


async def test_wrong_redis_type_is_corrupt(redis_backend: Backend) -> None:
    s = make(redis_backend)
    await redis_backend.client.set(KeySpace(redis_backend.prefix).session_items("s1"), b"x")
    ops = (lambda: s.add_items(msgs(1)), s.pop_item, s.get_items, lambda: s.get_items(2), s.snapshot,
           lambda: s.fork("f"), lambda: make(redis_backend, "src").fork("s1"), s.clear_session)
    for op in ops:
        await make(redis_backend, "src").add_items(msgs(1))
        with expect_error(ErrorCode.RECORD_CORRUPT):
            await op()
    assert await redis_backend.client.get(KeySpace(redis_backend.prefix).session_items("s1")) == b"x"


# -- ids ---------------------------------------------------------------------------
BAD_IDS = ["", "x" * 257, "a b", "tab\there", "nl\n", "ctl\x00", "ctl\x1b", "a{b", "a}b", "{s}"]


@pytest.mark.parametrize("bad_id", BAD_IDS, ids=repr)
async def test_invalid_ids_are_refused(backend: Backend, bad_id: str) -> None:
    with expect_error(ErrorCode.ID_INVALID):
        make(backend, bad_id)
    s = make(backend)
    await s.add_items(msgs(2))
    before = await prefix_keys(backend)
    with expect_error(ErrorCode.ID_INVALID):
        await s.fork(bad_id)
    assert await prefix_keys(backend) == before
    assert texts(await s.get_items()) == ["m0", "m1"]


async def test_invalid_settings_are_refused(backend: Backend) -> None:
    for kw in ({"ttl_seconds": 0}, {"ttl_seconds": -1}, {"ttl_seconds": "5"}, {"max_item_bytes": 0},
               {"ttl_seconds": float("nan")}, {"sliding_ttl": 1}, {"max_item_bytes": True},
               {"max_batch_bytes": 0}, {"max_batch_bytes": 1.5}, {"max_batch_bytes": False}):
        with expect_error(ErrorCode.INPUT_INVALID):
            make(backend, **kw)
    with expect_error(ErrorCode.ID_INVALID):
        make(backend.__class__(backend.name, "bad prefix", backend.client, backend.clock))


# -- TTL ---------------------------------------------------------------------------
async def test_ttl_expires_the_whole_session(clocked: Backend) -> None:
    s = make(clocked, ttl_seconds=10)
    await s.add_items(msgs(2))
    clocked.clock.advance(6)
    await s.add_items(msgs(1, start=2))  # every write renews the TTL
    clocked.clock.advance(6)
    assert texts(await s.get_items()) == ["m0", "m1", "m2"]
    clocked.clock.advance(5)
    assert await s.get_items() == []
    assert await s.pop_item() is None
    assert await prefix_keys(clocked) == []
    await s.add_items(msgs(1, start=7))
    assert texts(await s.get_items()) == ["m7"]


async def test_reads_do_not_slide_by_default(clocked: Backend) -> None:
    s = make(clocked, ttl_seconds=10)
    await s.add_items(msgs(2))
    clocked.clock.advance(8)
    assert len(await s.get_items()) == 2
    clocked.clock.advance(3)
    assert await s.get_items() == []


async def test_sliding_ttl(clocked: Backend) -> None:
    s = make(clocked, ttl_seconds=10, sliding_ttl=True)
    await s.add_items(msgs(2))
    for _ in range(3):
        clocked.clock.advance(8)
        assert len(await s.get_items(1)) == 1
    clocked.clock.advance(11)
    assert await s.get_items() == []


@pytest.mark.parametrize("name", ["ttl_seconds", "ttl"])
async def test_no_ttl_means_no_expiry(clocked: Backend, name: str) -> None:
    s = make(clocked, **{name: None})
    await s.add_items(msgs(1))
    clocked.clock.advance(10 * 365 * 86400)
    assert len(await s.get_items()) == 1


async def test_one_key_per_session_and_its_ttl_covers_everything(backend: Backend) -> None:
    s = make(backend, ttl_seconds=100)
    c = compaction(s, _summarize)
    ops = (lambda: s.add_items(msgs(12)), s.pop_item, lambda: c.compact(force=True), s.pop_item,
           lambda: s.add_items(msgs(1)), s.clear_session)
    for op in ops:
        await op()
        assert await prefix_keys(backend) == [key_of(backend)]  # items and metadata: one key
        if op == s.clear_session:  # nothing left but the ring: kept as long as its tokens
            assert 0 < await pttl(backend) <= tokens.RETAIN_MS
        else:
            assert 90_000 < await pttl(backend) <= 100_000
    await s.fork("f")
    assert await prefix_keys(backend) == [key_of(backend), key_of(backend, "f")] or await s.get_items() == []


async def test_sliding_ttl_renews_the_key(redis_backend: Backend) -> None:
    s = make(redis_backend, ttl_seconds=100, sliding_ttl=True)
    await s.add_items(msgs(3))
    for read in (lambda: s.get_items(2), s.get_items, s.snapshot):
        await redis_backend.client.pexpire(key_of(redis_backend), 5000)
        await read()
        assert await pttl(redis_backend) > 90_000


# -- fork --------------------------------------------------------------------------
async def test_fork_copies_and_is_independent(backend: Backend) -> None:
    s = make(backend, ttl_seconds=300, session_settings=SessionSettings(limit=10))
    await s.add_items(msgs(5))
    f = await s.fork("branch")
    assert type(f) is type(s)
    assert f.session_id == "branch" and f.ttl_seconds == 300 and f.session_settings == s.session_settings
    assert texts(await f.get_items()) == texts(await s.get_items())
    await f.add_items(msgs(1, start=100))
    await s.pop_item()
    assert texts(await f.get_items()) == ["m0", "m1", "m2", "m3", "m4", "m100"]
    assert texts(await s.get_items()) == ["m0", "m1", "m2", "m3"]


async def test_fork_upto(backend: Backend) -> None:
    s = make(backend)
    await s.add_items(msgs(2))
    await push_raw(backend, "s1", GARBAGE)  # corrupt entries are neither copied nor counted
    await s.add_items(msgs(3, start=2))
    f = await s.fork("first3", upto=3)
    assert texts(await f.get_items()) == ["m0", "m1", "m2"]
    empty = await s.fork("none", upto=0)
    assert await empty.get_items() == []
    with expect_error(ErrorCode.INPUT_INVALID):
        await s.fork("neg", upto=-1)


async def test_fork_refuses_to_overwrite(backend: Backend) -> None:
    s = make(backend)
    await s.add_items(msgs(3))
    existing = make(backend, "taken")
    await existing.add_items(msgs(1, start=50))
    with expect_error(ErrorCode.STORE_CONFLICT):
        await s.fork("taken")
    assert texts(await existing.get_items()) == ["m50"]
    with expect_error(ErrorCode.STORE_CONFLICT):
        await s.fork("s1")
    await s.fork("free")
    with expect_error(ErrorCode.STORE_CONFLICT):
        await s.fork("free")


async def test_fork_records_its_source(backend: Backend) -> None:
    s = make(backend)
    await s.add_items(msgs(2))
    await s.add_items(msgs(1))
    await s.fork("child")
    h = await header_of(backend, "child")
    assert (h.forked_from, h.forked_at, h.version, h.count) == (b"s1", b"2", 1, 3)
    assert h.epoch != (await header_of(backend)).epoch


async def test_fork_onto_an_emptied_session(backend: Backend) -> None:
    s = make(backend)
    await s.add_items(msgs(2))
    taken = make(backend, "taken")
    await taken.add_items(msgs(1, start=7))
    assert await taken.pop_item() is not None  # header only now: free to fork onto
    before = await tokens_of(backend, "taken")
    f = await s.fork("taken")
    assert texts(await f.get_items()) == ["m0", "m1"]
    assert (await tokens_of(backend, "taken"))[:-1] == before  # its ring is kept
    with expect_error(ErrorCode.STORE_CONFLICT):
        await s.fork("taken")


# -- compaction --------------------------------------------------------------------
async def _summarize(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "compaction", "summary": f"{len(items)} items"}]


async def test_compaction_threshold(backend: Backend) -> None:
    s = make(backend)
    c = compaction(s, _summarize)
    await s.add_items(msgs(9))
    assert await c.compact() == "not_triggered"
    await c.run_compaction()
    assert len(await s.get_items()) == 9
    await s.add_items(msgs(1, start=9))
    assert await c.compact() == "compacted"
    assert await s.get_items() == [{"type": "compaction", "summary": "10 items"}]


async def test_candidates_exclude_user_messages_and_compactions(backend: Backend) -> None:
    s = make(backend)
    c = compaction(s, _summarize)
    await s.add_items([{"type": "compaction", "summary": "old"}])
    await s.add_items(msgs(20, role="user"))
    await s.add_items([{"role": "user", "content": "easy input form"}])
    await s.add_items(msgs(9, start=20))
    await c.run_compaction({"response_id": "r1"})
    assert len(await s.get_items()) == 31
    await s.add_items([{"type": "function_call_output", "call_id": "c1", "output": "x"}])
    await c.run_compaction({"response_id": "r2"})
    assert await s.get_items() == [{"type": "compaction", "summary": "32 items"}]


async def test_force_and_custom_trigger(backend: Backend) -> None:
    s = make(backend)
    seen: list[dict[str, Any]] = []

    def never(ctx: dict[str, Any]) -> bool:
        seen.append(ctx)
        return False

    c = compaction(s, _summarize, should_trigger=never)
    assert await c.compact() == "empty"
    await s.add_items(msgs(30))
    await c.run_compaction({"response_id": "r"})
    assert len(await s.get_items()) == 30 and len(seen[0]["compaction_candidate_items"]) == 30
    await c.run_compaction({"force": True})
    assert await s.get_items() == [{"type": "compaction", "summary": "30 items"}]


class Gate:
    """A compactor that waits, so a test can act while it runs."""

    def __init__(self, fail: Optional[Exception] = None, output: Any = None) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.fail = fail
        self.output = output

    async def __call__(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.entered.set()
        await self.release.wait()
        if self.fail is not None:
            raise self.fail
        return self.output if self.output is not None else await _summarize(items)


async def _during(gate: Gate, c: CompactionSession, action: Any) -> Any:
    task = asyncio.ensure_future(c.compact(force=True))
    await gate.entered.wait()
    await action()
    gate.release.set()
    return await task


async def test_appends_during_compaction_are_kept(backend: Backend) -> None:
    s = make(backend)
    gate = Gate()
    c = CompactionSession(core(s), gate)
    await s.add_items(msgs(12))
    assert await _during(gate, c, lambda: s.add_items(msgs(2, start=12))) == "compacted"
    items = await s.get_items()
    assert items[0] == {"type": "compaction", "summary": "12 items"}
    assert texts(items[1:]) == ["m12", "m13"]


async def test_failed_compaction_leaves_history(backend: Backend) -> None:
    s = make(backend)
    gate = Gate(fail=RuntimeError("model down"))
    c = CompactionSession(core(s), gate)
    await s.add_items(msgs(12))
    with pytest.raises(RuntimeError, match="model down"):
        await _during(gate, c, lambda: s.add_items(msgs(1, start=12)))
    assert texts(await s.get_items()) == [f"m{i}" for i in range(13)]


async def test_invalid_compactor_output_leaves_history(backend: Backend) -> None:
    s = make(backend)
    c = CompactionSession(core(s), Gate(output=["not a dict"]))
    c.compactor.release.set()  # type: ignore[attr-defined]
    await s.add_items(msgs(12))
    with expect_error(ErrorCode.INPUT_INVALID):
        await c.compact(force=True)
    assert len(await s.get_items()) == 12


async def test_pop_during_compaction_refuses_it(backend: Backend) -> None:
    s = make(backend)
    gate = Gate()
    c = CompactionSession(core(s), gate)
    await s.add_items(msgs(12))
    assert await _during(gate, c, s.pop_item) == "conflict"
    assert texts(await s.get_items()) == [f"m{i}" for i in range(11)]


async def test_clear_and_refill_during_compaction_refuses_it(backend: Backend) -> None:
    s = make(backend)
    gate = Gate()
    c = CompactionSession(core(s), gate)
    await s.add_items(msgs(12))

    async def clear_and_refill() -> None:
        await s.clear_session()
        await s.add_items(msgs(15, start=100))

    assert await _during(gate, c, clear_and_refill) == "conflict"
    assert texts(await s.get_items()) == [f"m{i}" for i in range(100, 115)]


async def test_concurrent_compactions_one_wins(backend: Backend) -> None:
    s = make(backend)
    g1, g2 = Gate(), Gate()
    c1, c2 = CompactionSession(core(s), g1), CompactionSession(core(make(backend)), g2)
    await s.add_items(msgs(12))
    t1 = asyncio.ensure_future(c1.compact(force=True))
    t2 = asyncio.ensure_future(c2.compact(force=True))
    await g1.entered.wait()
    await g2.entered.wait()
    g1.release.set()
    assert await t1 == "compacted"
    g2.release.set()
    assert await t2 == "conflict"
    assert await s.get_items() == [{"type": "compaction", "summary": "12 items"}]


async def test_compaction_drops_corrupt_entries_it_read(backend: Backend) -> None:
    s = make(backend)
    await s.add_items(msgs(11))
    await push_raw(backend, "s1", GARBAGE)
    c = compaction(s, _summarize)
    assert await c.compact() == "compacted"
    assert await s.get_items() == [{"type": "compaction", "summary": "11 items"}]


async def test_compaction_to_nothing_deletes_session(backend: Backend) -> None:
    s = make(backend, ttl_seconds=None)
    await s.add_items(msgs(11))

    async def nothing(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return []

    assert await compaction(s, nothing).compact() == "compacted"
    assert await s.get_items() == [] and await prefix_keys(backend) == [key_of(backend)]
    assert 0 < await pttl(backend) <= tokens.RETAIN_MS


def test_compaction_wraps_only_item_sessions() -> None:
    with expect_error(ErrorCode.INPUT_INVALID):
        CompactionSession(object(), _summarize)  # type: ignore[arg-type]
    with expect_error(ErrorCode.INPUT_INVALID):
        SyncCompactionSession(MemorySession("s"), lambda items: items)  # type: ignore[arg-type]
    with expect_error(ErrorCode.INPUT_INVALID):  # a sync compaction cannot wait on a coroutine
        SyncCompactionSession(SyncRedisSession("s", client=fakeredis.FakeRedis()), _summarize)  # type: ignore[arg-type]


def test_a_sync_compactor_that_returns_an_awaitable_is_refused_and_changes_nothing() -> None:
    """Not a coroutine function, but it returns one (a partial of one): refused as the
    coded error when it returns, before the replace; the history stays as it was."""
    import functools

    async def waits(items: list[Any], delay: float) -> list[Any]:
        await asyncio.sleep(delay)
        return []

    session = SyncRedisSession("s", client=fakeredis.FakeRedis())
    session.add_items(msgs(12))
    with expect_error(ErrorCode.INPUT_INVALID):
        SyncCompactionSession(session, functools.partial(waits, delay=0.01)).compact(force=True)
    assert texts(session.get_items()) == [f"m{i}" for i in range(12)]


# -- Redis edges ---------------------------------------------------------------------
async def test_script_flush_then_everything_works(redis_backend: Backend) -> None:
    s = make(redis_backend, ttl_seconds=60, sliding_ttl=True)
    c = compaction(s, _summarize)
    await s.add_items(msgs(3))  # scripts now cached
    await redis_backend.client.script_flush()  # every primary, on a cluster
    await s.add_items(msgs(9, start=3))
    assert len(await s.get_items(5)) == 5
    assert len(await s.get_items()) == 12
    assert (await s.pop_item() or {})["content"] == "m11"
    f = await s.fork("f")
    assert await c.compact() == "compacted"
    assert len(await s.get_items()) == 1
    await f.clear_session()
    assert await f.get_items() == []


@pytest.mark.parametrize("scheme", ["redis", "redis+cluster"])
async def test_redis_down_is_backend_unavailable(scheme: str) -> None:
    s = RedisSession.from_url("s1", url=f"{scheme}://127.0.0.1:{free_port()}/0")
    try:
        for op in (s.get_items, lambda: s.add_items(msgs(1)), s.pop_item, s.clear_session, lambda: s.fork("f")):
            with expect_error(ErrorCode.BACKEND_UNAVAILABLE):
                await op()
    finally:
        await s.close()


@pytest.mark.real
async def test_from_url_owns_its_client(real_backend: Backend) -> None:
    s = RedisSession.from_url("s1", url=real_backend.url, key_prefix=real_backend.prefix, ttl_seconds=30)
    await s.add_items(msgs(2))
    f = await s.fork("f")
    assert texts(await make(real_backend).get_items()) == ["m0", "m1"]
    await f.close()  # a fork shares its parent's client: closing either closes both (on this loop)
    for closed in (s, f):
        with expect_error(ErrorCode.CLIENT_CLOSED):
            await closed.get_items()
    await s.close()  # closing again does nothing
    given = make(real_backend)
    await given.close()  # never closes a client it was given
    assert len(await given.get_items()) == 2


async def test_memory_close_is_a_no_op() -> None:
    s = MemorySession("s1", key_prefix="tclose")
    await s.close()
    assert await s.get_items() == []


def test_repr_names_the_session() -> None:
    assert repr(MemorySession("s1", key_prefix="p")) == "MemorySession('s1', key_prefix='p')"
