"""MemoryStore mirrors the Lua scripts: a differential test holds the twins together.

Hypothesis draws random sequences of operations (adds, reads with limits,
pops, clears, snapshots and prefix replacements, forks, non-items written by
someone else, re-sent scripts, clock advances) and runs each one on a
MemorySession and on a RedisSession over fakeredis, both on one FakeClock
(fakeredis's time is patched by the ``clocked`` fixture). Every result, and
after every step every key byte for byte with its deadline, must be equal.

Tokens and epochs are drawn from a counter that restarts for each backend at
each step, so both sides write identical headers. The clock moves in steps of
1/8 s, TTLs are whole seconds, and it starts on a whole second: those times
are exact in binary floating point, so fakeredis (float seconds) and the
memory engine (whole milliseconds, as Redis) see the same deadlines.
"""

from __future__ import annotations

import itertools
from typing import Any, Awaitable, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import Backend
from redis_sessions.errors import SessionError
from redis_sessions.items import ItemSession, MemorySession, MemoryStore, RedisSession, Snapshot
from redis_sessions.items import base
from redis_sessions.items import header as hd
from redis_sessions.keys import KeySpace
from test_items import GARBAGE, LOOKALIKE, msgs

EXAMPLES = itertools.count()

Op = tuple[Any, ...]
# Eighths of a second: to a deadline of a 1 s or 2 s TTL, or of the 600 s retention, or just past it.
advance = st.tuples(st.just("advance"), st.sampled_from([4, 8, 9, 16, 17, 4800, 4801]))
ops = st.one_of(
    advance,
    advance,
    st.tuples(st.just("add"), st.integers(1, 3), st.sampled_from([None, "k1", "k2"])),
    st.tuples(st.just("get"), st.sampled_from([None, 0, 1, 2, 5])),
    st.tuples(st.just("pop")),
    st.tuples(st.just("clear")),
    st.tuples(st.just("snapshot")),
    st.tuples(st.just("compact"), st.integers(0, 2)),
    st.tuples(st.just("fork"), st.sampled_from(["f1", "f2"]), st.sampled_from([None, 0, 2])),
    st.tuples(st.just("use"), st.sampled_from(["s", "f1"])),
    st.tuples(st.just("foreign"), st.sampled_from([GARBAGE, LOOKALIKE])),
    st.tuples(st.just("resend_add"), st.sampled_from([b"R1", b"R2"])),
    st.tuples(st.just("resend_pop"), st.sampled_from([b"R3", b"R4"])),
    advance,
)


class Ids:
    """Deterministic tokens and epochs, restarted per backend per step."""

    def __init__(self) -> None:
        self.n = 0

    def token(self) -> bytes:
        self.n += 1
        return b"t%d" % self.n

    def epoch(self) -> bytes:
        self.n += 1
        return b"e%d" % self.n


class Side:
    """One backend's sessions and what it remembers between steps."""

    def __init__(self, make: Callable[[str], ItemSession]) -> None:
        self.make = make
        self.sessions = {sid: make(sid) for sid in ("s", "f1", "f2")}
        self.current = "s"
        self.snapshot: Snapshot | None = None
        self.counter = 0

    @property
    def s(self) -> ItemSession:
        return self.sessions[self.current]


async def outcome(call: Callable[[], Awaitable[Any]]) -> Any:
    try:
        return ("ok", await call())
    except SessionError as exc:
        return ("error", exc.code)


async def run(side: Side, op: Op, push: Callable[[str, bytes], Awaitable[None]]) -> Any:
    s, kind = side.s, op[0]
    if kind == "add":
        items = msgs(op[1], start=side.counter)
        side.counter += op[1]
        return await outcome(lambda: s.add_items(items, idempotency_key=op[2]))
    if kind == "get":
        return await outcome(lambda: s.get_items(op[1]))
    if kind == "pop":
        return await outcome(s.pop_item)
    if kind == "clear":
        return await outcome(s.clear_session)
    if kind == "snapshot":
        result = await outcome(s.snapshot)
        side.snapshot = result[1] if result[0] == "ok" else None
        return result
    if kind == "compact":
        snap = side.snapshot or Snapshot(items=[], count=0, version=0, epoch="", rewrites=0)
        summary = [{"type": "compaction", "summary": f"{len(snap.items)} items"}] * op[1]
        return await outcome(lambda: s.replace_prefix(snap, summary))
    if kind == "fork":
        result = await outcome(lambda: s.fork(op[1], upto=op[2]))
        return (result[0], result[1] if result[0] == "error" else None)
    if kind == "use":
        side.current = op[1]
        return None
    if kind == "foreign":
        await push(s._items_key, op[1])
        return None
    if kind == "resend_add":
        entries = [b"\x81\xa1n\xa1r"]  # {"n": "r"}
        return [await outcome(lambda: s._eng_add(entries, op[1], b"E")) for _ in range(2)]
    if kind == "resend_pop":
        return [await outcome(lambda: s._eng_pop(op[1], b"E", hd.SCAN_LIMIT)) for _ in range(2)]
    raise AssertionError(op)


@pytest.mark.parametrize("clocked", ["fakeredis"], indirect=True)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    steps=st.lists(ops, min_size=10, max_size=40),
    ttl=st.sampled_from([None, 1, 1, 2]),
    sliding=st.booleans(),
    old_layout=st.integers(0, 2),
    page=st.sampled_from([2, 3, hd.SCAN_LIMIT]),
)
async def test_memory_engine_mirrors_the_scripts(clocked: Backend, steps: list[Op], ttl: int | None, sliding: bool,
                                                 old_layout: int, page: int) -> None:
    clock, client = clocked.clock, clocked.client
    clock.now = float(int(clock.now))
    prefix = f"{clocked.prefix}x{next(EXAMPLES)}"
    store = MemoryStore()
    options: dict[str, Any] = dict(key_prefix=prefix, ttl_seconds=ttl, sliding_ttl=sliding)
    memory = Side(lambda sid: MemorySession(sid, clock=clock, store=store, **options))
    redis = Side(lambda sid: RedisSession(sid, client=client, **options))

    async def push_memory(key: str, data: bytes) -> None:
        store.push_raw(key, data, clock())

    async def push_redis(key: str, data: bytes) -> None:
        await client.rpush(key, data)

    async def state() -> tuple[dict[str, Any], dict[str, Any]]:
        keys = sorted(k.decode() for k in await client.keys(f"{prefix}:*"))
        theirs = {k: (await client.lrange(k, 0, -1), await client.pexpiretime(k)) for k in keys}
        ours = {k: store.raw(k, clock()) for k in store.keys(clock())}
        return {k: (v[0], -1 if v[1] is None else v[1]) for k, v in ours.items() if v}, {
            k: (list(v[0]), v[1]) for k, v in theirs.items()}

    for n in range(old_layout):  # a session from before headers: items only, index 0 included
        item = b"\x81\xa1o\xa1%d" % n
        await push_memory(KeySpace(prefix).session_items("s"), item)
        await push_redis(KeySpace(prefix).session_items("s"), item)

    ids = Ids()
    saved = (base.new_token, base.new_epoch, hd.SCAN_LIMIT)
    base.new_token, base.new_epoch, hd.SCAN_LIMIT = ids.token, ids.epoch, page  # type: ignore[assignment]
    try:
        for step, op in enumerate(steps):
            if op[0] == "advance":
                clock.advance(op[1] / 8)
            else:
                ids.n = 1000 * step
                ours = await run(memory, op, push_memory)
                ids.n = 1000 * step
                theirs = await run(redis, op, push_redis)
                assert ours == theirs, (step, op)
            mine, fake = await state()
            assert mine == fake, (step, op)
    finally:
        base.new_token, base.new_epoch, hd.SCAN_LIMIT = saved  # type: ignore[assignment]
