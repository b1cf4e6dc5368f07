"""The memory engine and the Lua scripts are twins: the same random programs run on
both must give the same answers.

Each example draws store settings (TTL, sliding or not, max_depth) and a program of
saves (new roots, children, the same record again, another record under an
existing id, expected_previous_response_id right and wrong, overwrite, and re-sent
copies of the same script), gets, resolve_chain calls, deletes (re-sent too) and
clock advances, over ids minted here and ids minted elsewhere. The program runs on
``MemoryResponseSessionStore`` and on ``RedisResponseSessionStore`` over fakeredis,
each on a FakeClock from the same start (fakeredis reads it in place of
``time.time``), with the same operation tokens. Every answer (value or error code
and message) must match, and so must the state after every step (every key with
its fields and its expiry in ms) and at the end (what every id reads and resolves
to).

Times sit on a 1/8 s grid and TTLs are whole multiples of it, so fakeredis's float
seconds are exact and both sides meet every deadline on the same millisecond (on a
1 s grid with sliding TTLs: fakeredis's GETEX PX drops the milliseconds).
"""

from __future__ import annotations

import asyncio
import itertools
import types
import unittest.mock
from typing import Any

import fakeredis
import fakeredis._helpers
import fakeredis._socket._base
import fakeredis.commands_mixins.server_mixin
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chains import Resending, record
from redis_sessions import MemoryResponseSessionStore, RedisResponseSessionStore, SessionError, UNSET
from redis_sessions.clock import FakeClock
from redis_sessions.ids import thread_of
from redis_sessions.responses import ChainStore
from redis_sessions.responses import store as store_module
from redis_sessions.responses.jumps import JUMP_BYTES, JUMP_MIN_BYTES, JUMPS

PREFIX = "df"
START = 1_700_000_000.0
THREADS = ["0123456789abcdef", "fedcba9876543210"]
MINTED = [f"resp_{t}_{i:032x}" for t in THREADS for i in range(3)]
FOREIGN = ["ext-a", "ext-b", "ext-c", "ext-d"]
IDS = MINTED + FOREIGN
PARENT = "the record's own parent"

KINDS = ["save"] * 6 + ["get", "get", "resolve", "resolve", "delete", "delete", "new_id", "advance", "advance"]


def same_thread(rid: str) -> list[str]:
    tag = thread_of(rid)
    return [m for m in MINTED if thread_of(m) == tag] if tag else IDS


@st.composite
def programs(draw: Any, steps_ms: list[int]) -> list[dict[str, Any]]:
    """Operations biased toward ids a save was drawn for, so most of them meet stored
    records: children of earlier saves, the same id saved again, deletes that hit."""
    known: list[str] = []
    program: list[dict[str, Any]] = []

    def some_id(pool: list[str]) -> str:
        mine = [k for k in known if k in pool]
        return draw(st.sampled_from(mine if mine and draw(st.integers(0, 3)) else pool))

    for _ in range(draw(st.integers(min_value=1, max_value=40))):
        kind = draw(st.sampled_from(KINDS))
        if kind == "advance":
            program.append({"op": kind, "ms": draw(st.sampled_from(steps_ms))})
            continue
        if kind != "save":
            op: dict[str, Any] = {"op": kind, "id": some_id(IDS)}
            if kind == "resolve":
                op.update(max_depth=draw(st.sampled_from([None, 0, 1, 2, 3, 8])), include_incomplete=draw(st.booleans()))
            if kind == "delete":
                op["resend"] = draw(st.booleans())
            program.append(op)
            continue
        parent = draw(st.none() | st.just(some_id(IDS))) if known else None
        rid = some_id(same_thread(parent) if parent and draw(st.integers(0, 4)) else IDS)
        program.append({
            "op": "save", "id": rid, "parent": parent, "text": draw(st.sampled_from(["one", "two"])),
            "status": draw(st.sampled_from(["completed", "completed", "incomplete"])),
            "expect": draw(st.sampled_from([UNSET] * 6 + [None, PARENT, PARENT, "any"])),
            "overwrite": draw(st.booleans()), "resend": draw(st.booleans()),
            # Some records big enough to keep a jump list (lua/chain_lib.lua), so that
            # overwrites which move records leave lists stale for the walks to meet.
            "payload": draw(st.sampled_from([0, 0, JUMP_MIN_BYTES, JUMPS * JUMP_BYTES])),
        })
        if program[-1]["expect"] == "any":
            program[-1]["expect"] = some_id(IDS)
        known.append(rid)
    return program


# fakeredis's GETEX PX (the sliding refresh of a locator) keeps whole seconds only
# (``int(expire_time)``; Redis keeps ms), so with sliding TTLs the grid is 1 s.
FINE = ([None, 1, 2.5, 10], [125, 500, 875, 1000, 1125, 2500, 5000])
COARSE = ([None, 1, 3, 10], [1000, 2000, 3000, 5000, 10_000])


@st.composite
def cases(draw: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    sliding = draw(st.booleans())
    ttls, steps_ms = COARSE if sliding else FINE
    opts = {"ttl_seconds": draw(st.sampled_from(ttls)), "sliding_ttl": sliding, "max_depth": draw(st.sampled_from([3, 64])),
            "compact_records": draw(st.booleans())}
    return opts, draw(programs(steps_ms))


def outcome(call: Any) -> Any:
    """A call's answer in comparable form: a value, or the error's code and message."""
    async def run() -> Any:
        try:
            return ("ok", await call)
        except SessionError as exc:
            return ("error", exc.code.value, exc.message)
    return run()


async def step(store: ChainStore, clock: FakeClock, op: dict[str, Any]) -> Any:
    kind = op["op"]
    if kind == "advance":
        clock.advance(op["ms"] / 1000)
        return None
    if kind == "get":
        return await outcome(store.get(op["id"]))
    if kind == "resolve":
        return await outcome(store.resolve_chain(op["id"], max_depth=op["max_depth"],
                                                 include_incomplete=op["include_incomplete"]))
    if kind == "new_id":
        got = await outcome(store.new_response_id(op["id"]))
        return (got[0], thread_of(got[1])) if got[0] == "ok" else got
    engine = store.engine
    if op["resend"]:
        store.engine = Resending(engine, {"save", "delete", "point", "unpoint"})  # type: ignore[assignment]
    try:
        if kind == "delete":
            return await outcome(store.delete(op["id"]))
        expect = op["parent"] if op["expect"] == PARENT else op["expect"]
        rec = record(op["id"], op["parent"], op["text"], status=op["status"], payload="x" * op.get("payload", 0))
        return await outcome(store.save(rec, expected_previous_response_id=expect, overwrite=op["overwrite"]))
    finally:
        store.engine = engine


async def final_state(store: ChainStore, raw: Any) -> Any:
    reads = {rid: (await outcome(store.get(rid)), await outcome(store.resolve_chain(rid, include_incomplete=True)))
             for rid in IDS}
    return reads, await raw()


def as_bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogateescape")


def memory_keys(store: MemoryResponseSessionStore) -> Any:
    async def raw() -> dict[str, Any]:
        engine: Any = store.engine
        out: dict[str, Any] = {}
        for thread in list(engine.threads):
            entry = engine._live_thread(thread)
            if entry is not None:
                fields = {as_bytes(k): as_bytes(v) for k, v in entry.fields.items()}
                out[store.keys.thread(thread)] = (fields, entry.expires_at)
        for rid in list(engine.locators):
            if engine._live_locator(rid) is not None:
                thread, deadline = engine.locators[rid]
                out[store.keys.locator(rid)] = (as_bytes(thread), deadline)
        return out
    return raw


def redis_keys(client: Any, clock: FakeClock) -> Any:
    async def raw() -> dict[str, Any]:
        out: dict[str, Any] = {}
        now_ms = round(clock() * 1000)
        async for key in client.scan_iter(match=f"{PREFIX}:*"):
            at = await client.pexpiretime(key)
            if at >= 0 and now_ms > at:
                continue  # expired; fakeredis may not have dropped it yet
            value = await client.hgetall(key) if await client.type(key) == b"hash" else await client.get(key)
            out[key.decode()] = (value, None if at < 0 else at)
        return out
    return raw


class Tokens:
    """The same operation tokens, in the same order, for each run."""

    def __init__(self) -> None:
        self.counter = itertools.count()

    def __call__(self) -> str:
        return f"{next(self.counter):016x}"


async def run_memory(opts: dict[str, Any], program: list[dict[str, Any]]) -> Any:
    clock = FakeClock(START)
    store = MemoryResponseSessionStore(key_prefix=PREFIX, clock=clock, **opts)
    with unittest.mock.patch.object(store_module, "new_token", Tokens()):
        raw = memory_keys(store)
        answers = [(await step(store, clock, op), await raw()) for op in program]
        return answers, await final_state(store, raw)


async def run_fakeredis(opts: dict[str, Any], program: list[dict[str, Any]]) -> Any:
    clock = FakeClock(START)
    fake_time = types.SimpleNamespace(time=clock, sleep=lambda s: None, monotonic=lambda: clock())
    client = fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer())
    store = RedisResponseSessionStore(client, key_prefix=PREFIX, **opts)
    try:
        with unittest.mock.patch.object(fakeredis._helpers, "time", fake_time), \
                unittest.mock.patch.object(fakeredis._socket._base, "time", fake_time), \
                unittest.mock.patch.object(fakeredis.commands_mixins.server_mixin, "time", fake_time), \
                unittest.mock.patch.object(store_module, "new_token", Tokens()):
            raw = redis_keys(client, clock)
            answers = [(await step(store, clock, op), await raw()) for op in program]
            return answers, await final_state(store, raw)
    finally:
        await client.aclose()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_memory_and_lua_give_the_same_answers(case: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
    opts, program = case
    memory_answers, memory_state = asyncio.run(run_memory(opts, program))
    redis_answers, redis_state = asyncio.run(run_fakeredis(opts, program))
    for i, ((mine, my_keys), (theirs, their_keys)) in enumerate(zip(memory_answers, redis_answers)):
        assert mine == theirs, f"step {i} {program[i]}: the answer"
        assert my_keys == their_keys, f"step {i} {program[i]}: keys, fields and expiry after it"
    assert memory_state[0] == redis_state[0], "what the ids read and resolve to"
    assert memory_state[1] == redis_state[1], "keys, fields and expiry"


def test_the_programs_reach_every_outcome() -> None:
    """Guard against a strategy that never reaches the interesting cases: one fixed
    program with a re-sent save, a re-sent delete, both expectations, a conflict,
    an expiry on its deadline ms and a chain too deep, compared the same way."""
    a, b, c = MINTED[0], MINTED[1], MINTED[2]
    program: list[dict[str, Any]] = [
        {"op": "save", "id": a, "parent": None, "text": "one", "status": "completed", "expect": None,
         "overwrite": False, "resend": True},
        {"op": "save", "id": b, "parent": a, "text": "one", "status": "completed", "expect": PARENT,
         "overwrite": False, "resend": False},
        {"op": "save", "id": b, "parent": a, "text": "two", "status": "completed", "expect": UNSET,
         "overwrite": False, "resend": True},
        {"op": "save", "id": c, "parent": b, "text": "one", "status": "completed", "expect": a,
         "overwrite": False, "resend": False},
        {"op": "save", "id": "ext-a", "parent": b, "text": "one", "status": "completed", "expect": UNSET,
         "overwrite": False, "resend": True},
        {"op": "resolve", "id": "ext-a", "max_depth": 2, "include_incomplete": False},
        {"op": "delete", "id": b, "resend": True},
        {"op": "delete", "id": "ext-a", "resend": True},
        {"op": "advance", "ms": 1000},
        {"op": "get", "id": a},
        {"op": "advance", "ms": 125},
        {"op": "get", "id": a},
    ]
    memory = asyncio.run(run_memory({"ttl_seconds": 1, "sliding_ttl": False, "max_depth": 64}, program))
    redis = asyncio.run(run_fakeredis({"ttl_seconds": 1, "sliding_ttl": False, "max_depth": 64}, program))
    assert memory == redis
    answers = [answer for answer, _ in memory[0]]
    assert answers[0] == ("ok", None) and answers[1] == ("ok", None)
    assert answers[2][:2] == ("error", "session.store.conflict")
    assert answers[3][:2] == ("error", "session.store.conflict")
    assert answers[5][:2] == ("error", "session.chain.depth_exceeded")
    assert answers[6] == ("ok", True) and answers[7] == ("ok", True)
    assert answers[9][0] == "ok" and answers[9][1] is not None  # on its deadline ms: still there
    assert answers[11] == ("ok", None)  # 125 ms later: gone



# -- per-response expiry: branches that outlive their TTL go, on both twins alike -------
BRANCH_IDS = [f"ext-b{i}" for i in range(8)]


def assert_twins(program: list[dict[str, Any]], memory: Any, redis: Any) -> None:
    """The twins' runs of ``program`` agree at every step and at the end."""
    for i, ((mine, my_keys), (theirs, their_keys)) in enumerate(zip(memory[0], redis[0])):
        assert mine == theirs, f"step {i} {program[i]}: the answer"
        assert my_keys == their_keys, f"step {i} {program[i]}: keys, fields and expiry after it"
    assert memory[1] == redis[1]


def read_or_delete(draw: Any, kind: str, known: list[str]) -> dict[str, Any]:
    """A get, a resolve of the whole chain, or a delete (re-sent or not) of a saved id."""
    op: dict[str, Any] = {"op": kind, "id": draw(st.sampled_from(known))}
    if kind == "resolve":
        op.update(max_depth=None, include_incomplete=True)
    if kind == "delete":
        op["resend"] = draw(st.booleans())
    return op


@st.composite
def branch_cases(draw: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One conversation that keeps going while its branches age: children of any saved
    response (new ones, the same id again, overwrites that move a record to another
    parent), advances of a third or two thirds of the TTL, reads (sliding or not)
    and deletes, so that leaves pass their deadline while the thread lives on."""
    sliding = draw(st.booleans())
    opts = {"ttl_seconds": 3, "sliding_ttl": sliding, "max_depth": 64}

    def save(rid: str, parent: str | None) -> dict[str, Any]:
        return {"op": "save", "id": rid, "parent": parent, "text": draw(st.sampled_from(["one", "two"])),
                "status": "completed", "expect": UNSET, "overwrite": draw(st.booleans()),
                "resend": draw(st.booleans())}

    program = [save(BRANCH_IDS[0], None)]
    known = [BRANCH_IDS[0]]
    for _ in range(draw(st.integers(min_value=5, max_value=40))):
        kind = draw(st.sampled_from(["save"] * 4 + ["advance"] * 3 + ["resolve", "get", "delete"]))
        if kind == "advance":
            program.append({"op": "advance", "ms": draw(st.sampled_from([1000, 2000]))})
        elif kind == "save":
            rid = draw(st.sampled_from(BRANCH_IDS))
            program.append(save(rid, draw(st.sampled_from(known))))
            known.append(rid)
        else:
            program.append(read_or_delete(draw, kind, known))
    return opts, program


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=branch_cases())
def test_memory_and_lua_expire_the_same_branches(case: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
    opts, program = case
    memory = asyncio.run(run_memory(opts, program))
    redis = asyncio.run(run_fakeredis(opts, program))
    assert_twins(program, memory, redis)


def test_the_branch_programs_reach_removal() -> None:
    """A fixed program of the kind above: a regeneration left behind goes once its TTL
    has passed and the conversation goes on; its parent, continued, stays."""
    root, turn, regen, later = BRANCH_IDS[:4]

    def save(rid: str, parent: str | None) -> dict[str, Any]:
        return {"op": "save", "id": rid, "parent": parent, "text": "one", "status": "completed",
                "expect": UNSET, "overwrite": False, "resend": False}

    program = [save(root, None), save(regen, root), save(turn, root), {"op": "advance", "ms": 2000},
               save(later, turn), {"op": "advance", "ms": 2000}, save(BRANCH_IDS[4], later),
               {"op": "get", "id": regen}, {"op": "get", "id": turn}, {"op": "resolve", "id": BRANCH_IDS[4],
                                                                      "max_depth": None, "include_incomplete": True}]
    opts = {"ttl_seconds": 3, "sliding_ttl": False, "max_depth": 64}
    memory = asyncio.run(run_memory(opts, program))
    assert memory == asyncio.run(run_fakeredis(opts, program))
    answers = [answer for answer, _ in memory[0]]
    assert answers[7] == ("ok", None)  # the regeneration: gone
    assert answers[8][0] == "ok" and answers[8][1] is not None  # the turn continued: kept
    # the root too (kept by its descendants: its own locator has expired, the chain reads it)
    assert [s.id for s in answers[9][1].sessions] == [root, turn, later, BRANCH_IDS[4]]


# -- names lists (redis_sessions/responses/names.py): the twins keep the same lists -------
NAMED_THREAD = "00112233445566aa"
NAMED_IDS = [f"resp_{NAMED_THREAD}_{NAMED_THREAD[8:] if i and not i % 2 else '0' * 8}{i:024x}" for i in range(10)]
"""Every other one after the first marked as keeping a list (ids.marks_names): the Redis
engine reads those by a plain HMGET first, whatever the list's state, the memory twin by
the walk."""
NAMES_MIN = 3
"""Lists from chains this deep (13 in use), so short programs make, carry on, drop and
leave stale many lists; records of up to 3 KB, so that the walk's reply is the list."""


@st.composite
def names_cases(draw: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One thread of ids minted for it: saves under known records (new ones, the same
    id again, overwrites that move a record below another parent, which leaves its
    descendants' lists stale), resolves (whose names a save under the same id takes),
    deletes, and advances of a third of the TTL or more."""
    sliding = draw(st.booleans())
    opts = {"ttl_seconds": 3, "sliding_ttl": sliding, "max_depth": draw(st.sampled_from([4, 64]))}

    def save(rid: str, parent: str | None) -> dict[str, Any]:
        return {"op": "save", "id": rid, "parent": parent, "text": draw(st.sampled_from(["one", "two"])),
                "status": "completed", "expect": UNSET, "overwrite": draw(st.booleans()),
                "resend": draw(st.booleans()), "payload": draw(st.sampled_from([0, 3000]))}

    program = [save(NAMED_IDS[0], None)]
    known = [NAMED_IDS[0]]
    for _ in range(draw(st.integers(min_value=5, max_value=40))):
        kind = draw(st.sampled_from(["save"] * 5 + ["resolve"] * 3 + ["advance", "get", "delete"]))
        if kind == "advance":
            program.append({"op": "advance", "ms": draw(st.sampled_from([1000, 2000]))})
        elif kind == "save":
            rid = draw(st.sampled_from(NAMED_IDS))
            program.append(save(rid, draw(st.sampled_from(known[-4:] + known[:1]))))
            known.append(rid)
        else:
            program.append(read_or_delete(draw, kind, known))
    return opts, program


def shallow_names() -> Any:
    return unittest.mock.patch.object(store_module.names, "NAMES_MIN", NAMES_MIN)


def names_fields(state: Any) -> list[bytes]:
    return [name for fields, _ in state.values() if isinstance(fields, dict) for name in fields
            if name.startswith(b"n:")]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=names_cases())
def test_memory_and_lua_keep_the_same_names_lists(case: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
    opts, program = case
    with shallow_names():
        memory = asyncio.run(run_memory(opts, program))
        redis = asyncio.run(run_fakeredis(opts, program))
    assert_twins(program, memory, redis)


def test_the_names_programs_make_carry_and_outlive_stale_lists() -> None:
    """A fixed program of the kind above: a resolve starts a list, the saves after it
    carry it on (one list, at the tip), and an overwrite that moves an ancestor leaves
    the tip's list stale, which the reader finds out and reads past: both twins resolve
    the moved chain alike, and the save after that resolve mends the list."""
    a, b, c, d, e, f, g = NAMED_IDS[:7]

    def save(rid: str, parent: str | None, overwrite: bool = False) -> dict[str, Any]:
        return {"op": "save", "id": rid, "parent": parent, "text": "one", "status": "completed",
                "expect": UNSET, "overwrite": overwrite, "resend": False, "payload": 3000}

    def resolve(rid: str) -> dict[str, Any]:
        return {"op": "resolve", "id": rid, "max_depth": None, "include_incomplete": True}

    program = [save(a, None), save(b, a), save(c, b), resolve(c), save(d, c), save(e, d),
               save(f, a), save(c, f, overwrite=True), resolve(e), save(g, e)]
    opts = {"ttl_seconds": 30, "sliding_ttl": False, "max_depth": 64}
    with shallow_names():
        memory = asyncio.run(run_memory(opts, program))
        assert memory == asyncio.run(run_fakeredis(opts, program))
    states = [state for _, state in memory[0]]
    packed = {rid: bytes.fromhex(rid[-32:]) for rid in NAMED_IDS}
    thread = f"{PREFIX}:{{{NAMED_THREAD}}}:chain"
    assert names_fields(states[3]) == []  # chains of 3 and less keep none
    assert states[4][thread][0][b"n:" + d.encode()] == packed[c] + packed[b] + packed[a]
    assert names_fields(states[5]) == [b"n:" + e.encode()]  # carried on: d's went
    assert states[5][thread][0][b"n:" + e.encode()] == packed[d] + packed[c] + packed[b] + packed[a]
    # c moved below f: e's list still names b, the reader reads past it by the pointers
    moved = memory[0][8][0]
    assert moved[0] == "ok" and [s.id for s in moved[1].sessions] == [a, f, c, d, e]
    assert states[9][thread][0][b"n:" + g.encode()] == b"".join(packed[x] for x in (e, d, c, f, a))
    assert names_fields(states[9]) == [b"n:" + g.encode()]
