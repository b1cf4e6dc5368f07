"""The memory store mirrors lua/conv_*.lua: a differential test holds the twins together.

Hypothesis draws random sequences of operations (creates, adds with minted,
chosen and clashing ids, item deletes, pages in both orders from every kind of
cursor, gets, updates, deletes, re-sent writes, clock advances) and runs each
on a MemoryConversationStore and on a RedisConversationStore over fakeredis,
both on one FakeClock (the ``clocked`` fixture points fakeredis's time at it).
Every result, and after every step every key field for field with its
deadline, must be equal. The scan budget is drawn small too, so pages that
take several calls are compared as well.

Tokens and ids come from a counter restarted per backend per step, so both
sides write identical hashes. Clock steps are eighths of a second from a whole
second (exact in binary floating point), as in test_items_differential.py.
"""

from __future__ import annotations

import itertools
from typing import Any, Awaitable, Callable, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import Backend
from redis_sessions.conversations import ConversationStore, HashStore, MemoryConversationStore, RedisConversationStore
from redis_sessions.conversations import base, checks, paging
from redis_sessions.errors import SessionError

EXAMPLES = itertools.count()
Op = tuple[Any, ...]

advance = st.tuples(st.just("advance"), st.sampled_from([4, 8, 9, 16, 17, 2400, 2401]))
pick = st.integers(0, 40)
ops = st.one_of(
    advance,
    st.tuples(st.just("create"), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("use"), st.integers(0, 3)),
    st.tuples(st.just("add"), st.integers(1, 4), st.sampled_from([None, "fixed", "known"]), pick),
    st.tuples(st.just("add"), st.integers(1, 4), st.sampled_from([None, "fixed", "known"]), pick),
    st.tuples(st.just("delete_item"), st.sampled_from(["known", "unknown"]), pick),
    st.tuples(st.just("delete_item"), st.sampled_from(["known", "unknown"]), pick),
    st.tuples(st.just("list"), st.sampled_from([1, 2, 3, 20]), st.sampled_from(["asc", "desc"]),
              st.sampled_from([None, "known", "unknown"]), pick),
    st.tuples(st.just("list"), st.sampled_from([1, 2, 3, 20]), st.sampled_from(["asc", "desc"]),
              st.sampled_from([None, "known", "unknown"]), pick),
    st.tuples(st.just("scan"), st.sampled_from(["asc", "desc"]), st.integers(1, 5), st.sampled_from(["", "known"]),
              st.sampled_from(["", "0", "1", "3", "7"]), pick),
    st.tuples(st.just("get")),
    st.tuples(st.just("get_item"), pick),
    st.tuples(st.just("update"), st.sampled_from([{}, {"a": "1"}, {"b": "2", "c": "3"}])),
    st.tuples(st.just("delete")),
    st.tuples(st.just("resend"), st.sampled_from(["conv_add", "conv_delete_item", "conv_update", "conv_delete"]),
              pick),
)


class Ids:
    """Deterministic tokens and ids, restarted per backend per step."""

    def __init__(self) -> None:
        self.n = 0

    def token(self) -> bytes:
        self.n += 1
        return b"%016x" % self.n

    def mint(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}_{self.n:048x}"


class Side:
    def __init__(self, store: ConversationStore) -> None:
        self.store = store
        self.convs: list[str] = ["conv_none"]
        self.current = "conv_none"
        self.items: list[str] = []
        self.counter = 0


async def outcome(call: Callable[[], Awaitable[Any]]) -> Any:
    try:
        return ("ok", await call())
    except SessionError as exc:
        return ("error", exc.code)


def chosen(side: Side, n: int) -> str:
    return side.items[n % len(side.items)] if side.items else "msg_none"


async def run(side: Side, op: Op, step: int) -> Any:
    s, kind = side.store, op[0]
    if kind == "create":
        items = [{"role": "user", "content": f"c{side.counter + i}"} for i in range(op[1])]
        side.counter += op[1]
        result = await outcome(lambda: s.create(items=items, metadata={"m": "1"} if op[2] else None))
        if result[0] == "ok":
            side.convs.append(result[1].id)
            side.current = result[1].id
        return result
    if kind == "use":
        side.current = side.convs[op[1] % len(side.convs)]
        return None
    conv = side.current
    if kind == "add":
        items: list[dict[str, Any]] = [{"role": "user", "content": f"a{side.counter + i}"} for i in range(op[1])]
        side.counter += op[1]
        if op[2] == "fixed":
            items[0]["id"] = f"msg_fixed{op[3] % 3}"
        elif op[2] == "known":
            items[0]["id"] = chosen(side, op[3])
        result = await outcome(lambda: s.add_items(conv, items))
        if result[0] == "ok":
            side.items += [i["id"] for i in result[1].data]
        return result
    if kind == "delete_item":
        item = chosen(side, op[2]) if op[1] == "known" else "msg_unknown"
        return await outcome(lambda: s.delete_item(conv, item))
    if kind == "list":
        after = None if op[3] is None else chosen(side, op[4]) if op[3] == "known" else "msg_unknown"
        return await outcome(lambda: s.list_items(conv, limit=op[1], order=op[2], after=after))
    if kind == "scan":  # one raw script call: its continuation position is compared too
        after = chosen(side, op[5]) if op[3] == "known" else ""
        return await s._read("conv_list", conv, [op[1], op[2], after, op[4], paging.SCAN_BUDGET, s._slide_ms])
    if kind == "get":
        return await outcome(lambda: s.get(conv))
    if kind == "get_item":
        return await outcome(lambda: s.get_item(conv, chosen(side, op[1])))
    if kind == "update":
        return await outcome(lambda: s.update(conv, op[1]))
    if kind == "delete":
        return await outcome(lambda: s.delete(conv))
    if kind == "resend":
        token = b"%016x" % (10**9 + op[2] % 4)
        args: dict[str, list[Any]] = {
            "conv_add": [s._ttl_ms, token, f"msg_r{op[2] % 4}", base.encode({"role": "user", "content": "r"})],
            "conv_delete_item": [s._ttl_ms, token, chosen(side, op[2])],
            "conv_update": [s._ttl_ms, token, base.encode({"r": str(op[2])})],
            "conv_delete": [token],
        }
        return [await s._write(op[1], conv, args[op[1]]) for _ in range(2)]
    raise AssertionError(op)


@pytest.mark.parametrize("clocked", ["fakeredis"], indirect=True)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    steps=st.lists(ops, min_size=10, max_size=50),
    ttl=st.sampled_from([None, 1, 1, 2]),
    sliding=st.booleans(),
    budget=st.sampled_from([1, 2, 3, paging.SCAN_BUDGET]),
)
async def test_memory_store_mirrors_the_scripts(clocked: Backend, steps: list[Op], ttl: Optional[int], sliding: bool,
                                                budget: int) -> None:
    clock, client = clocked.clock, clocked.client
    clock.now = float(int(clock.now))
    prefix = f"{clocked.prefix}x{next(EXAMPLES)}"
    hashes = HashStore()
    options: dict[str, Any] = dict(key_prefix=prefix, ttl_seconds=ttl, sliding_ttl=sliding, clock=clock)
    memory = Side(MemoryConversationStore(store=hashes, **options))
    redis = Side(RedisConversationStore(client, **options))

    async def state() -> tuple[dict[str, Any], dict[str, Any]]:
        keys = sorted(k.decode() for k in await client.keys(f"{prefix}:*"))
        theirs = {}
        for k in keys:
            fields = {f.decode(): v for f, v in (await client.hgetall(k)).items()}
            theirs[k] = (fields, await client.pexpiretime(k))
        ours = {}
        for k in hashes.keys(clock()):
            raw = hashes.raw(k, clock())
            assert raw is not None
            ours[k] = (raw[0], -1 if raw[1] is None else raw[1])
        return ours, theirs

    ids = Ids()
    saved = (base.new_token, base.mint_id, checks.mint_id, paging.SCAN_BUDGET)
    base.new_token, base.mint_id, checks.mint_id = ids.token, ids.mint, ids.mint  # type: ignore[assignment]
    paging.SCAN_BUDGET = budget
    try:
        for step, op in enumerate(steps):
            if op[0] == "advance":
                clock.advance(op[1] / 8)
            else:
                ids.n = 1000 * step
                ours = await run(memory, op, step)
                ids.n = 1000 * step
                theirs = await run(redis, op, step)
                assert ours == theirs, (step, op)
            mine, fake = await state()
            assert mine == fake, (step, op)
    finally:
        base.new_token, base.mint_id, checks.mint_id, paging.SCAN_BUDGET = saved  # type: ignore[assignment]
