"""fakeredis (memory mode) against a real Redis: the same random operations, the same answers.

Memory mode runs the package's Lua on fakeredis; this holds fakeredis to the real
server where the twins used to drift: non-ASCII ids (the expiry index counted bytes
in Lua and characters in Python), items and records at the size limits and one
byte past them, bulk calls at the count limits, and expiry. Each seed draws one
sequence of operations on item sessions, response chains and conversations; it runs
on both servers, under one fresh prefix each, and every answer (values, or the
error code) and the shape of every key left (type, length, TTL set or not) must match.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any, Awaitable, Callable

import fakeredis
import pytest
from redis.asyncio import Redis

from chains import record
from redis_sessions import (
    MemoryConversationStore,
    MemoryResponseSessionStore,
    MemorySession,
    RedisConversationStore,
    RedisResponseSessionStore,
    RedisSession,
    SessionError,
)
from redis_sessions.codec import encode_items
from redis_sessions.limits import MAX_ITEM_BYTES

pytestmark = pytest.mark.real

NAMES = ["séance", "東京", "ünïcödé-ß", "😀-emoji", "plain", "ça/va:ok"]


def item(text: str, pad: int = 0) -> dict[str, Any]:
    return {"role": "user", "content": text + "é" * pad}


def at_limit(text: str, over: int = 0) -> dict[str, Any]:
    """An item whose encoding is exactly ``MAX_ITEM_BYTES`` (``over`` bytes more)."""
    base = len(encode_items([item(text)], MAX_ITEM_BYTES, 1 << 30, 1)[0])
    spare = MAX_ITEM_BYTES - base
    padded = {"role": "user", "content": text + "x" * (spare - 2)}  # msgpack str32 header: 2 more bytes
    while len(encode_items([padded], 1 << 30, 1 << 30, 1)[0]) < MAX_ITEM_BYTES + over:
        padded["content"] += "x"
    return padded


def script(seed: int) -> list[tuple[Any, ...]]:
    rnd = random.Random(seed)
    ops: list[tuple[Any, ...]] = []
    for n in range(40):
        name = rnd.choice(NAMES)
        kind = rnd.random()
        if kind < 0.35:
            ops.append(("items", rnd.choice(["add", "add", "get", "pop", "clear", "fork", "compact", "big"]), name,
                        rnd.randint(1, 3), n))
        elif kind < 0.7:
            ops.append(("chain", rnd.choice(["save", "save", "resolve", "get", "delete"]), name, rnd.randint(0, n), n))
        else:
            ops.append(("conv", rnd.choice(["create", "add", "list", "delete_item", "delete"]), name,
                        rnd.randint(1, 3), n))
    return ops


class Side:
    def __init__(self, sessions: Callable[[str], Any], responses: Any, conversations: Any, client: Any,
                 prefix: str) -> None:
        self.sessions, self.responses, self.conversations = sessions, responses, conversations
        self.client, self.prefix = client, prefix
        self.saved: list[str] = []
        self.convs: list[str] = []

    async def run(self, op: tuple[Any, ...]) -> Any:
        try:
            return await self._run(*op)
        except SessionError as exc:
            return ("error", exc.code.value)

    async def _run(self, family: str, what: str, name: str, k: int, n: int) -> Any:
        if family == "items":
            s = self.sessions(name)
            if what == "add":
                return await s.add_items([item(f"{name}-{n}-{i}", pad=i * 7) for i in range(k)])
            if what == "big":  # one item at the limit, then one a byte past it
                return [await s.add_items([at_limit(name)]), await self.run_one(s.add_items, [at_limit(name, over=1)])]
            if what == "get":
                return await s.get_items(k)
            if what == "pop":
                return await s.pop_item()
            if what == "clear":
                return await s.clear_session()
            if what == "fork":
                return (await s.fork(f"{name}-fork-{n}")).session_id
            snap = await s.snapshot()
            return await s.replace_prefix(snap, [item(f"summary-{n}")])
        if family == "chain":
            if what == "save":
                parent = self.saved[k % len(self.saved)] if self.saved and k % 3 else None
                rid = f"ext-{name}-{n}"
                await self.responses.save(record(rid, parent, text=f"{name} {n}"))
                self.saved.append(rid)
                return rid
            if not self.saved:
                return None
            rid = self.saved[k % len(self.saved)]
            if what == "resolve":
                return [x.id for x in (await self.responses.resolve_chain(rid)).sessions]
            if what == "get":
                got = await self.responses.get(rid)
                return None if got is None else got.id
            return await self.responses.delete(rid)
        if what == "create" or not self.convs:
            conv = await self.conversations.create(items=[item(f"{name}-{i}") for i in range(k)])
            self.convs.append(conv.id)
            return "created"
        cid = self.convs[k % len(self.convs)]
        if what == "add":
            return len((await self.conversations.add_items(cid, [item(f"{name}-{n}")])).data)
        if what == "list":
            return [i["content"] for i in (await self.conversations.list_items(cid)).data]
        if what == "delete_item":
            page = await self.conversations.list_items(cid, limit=1)
            return bool(page.data) and bool(await self.conversations.delete_item(cid, page.data[0]["id"]))
        return (await self.conversations.delete(cid)).deleted

    async def run_one(self, call: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        try:
            return await call(*args)
        except SessionError as exc:
            return ("error", exc.code.value)

    async def shape(self) -> list[tuple[str, str, int, bool]]:
        """Every key of this side: its name without the prefix, type, length, TTL set."""
        out = []
        for key in sorted(await self.client.keys(f"{self.prefix}:*")):
            kind = (await self.client.type(key)).decode()
            size = await (self.client.hlen(key) if kind == "hash" else self.client.llen(key) if kind == "list"
                          else self.client.strlen(key))
            name = key.decode()[len(self.prefix):]
            for i, cid in enumerate(self.convs):  # minted at random: named by their order
                name = name.replace(cid, f"conv#{i}")
            out.append((name, kind, size, await self.client.pttl(key) > 0))
        return sorted(out)


def side(client: Any, prefix: str, memory: fakeredis.FakeServer | None) -> Side:
    ttl = {"ttl_seconds": 600}
    if memory is not None:  # memory mode itself, on the server the test reads
        conversations: Any = MemoryConversationStore(server=memory, key_prefix=prefix, **ttl)
        responses: Any = MemoryResponseSessionStore(conversations=conversations, key_prefix=prefix, **ttl)
        return Side(lambda sid: MemorySession(sid, server=memory, key_prefix=prefix, **ttl), responses,
                    conversations, client, prefix)
    conversations = RedisConversationStore(client, key_prefix=prefix, **ttl)
    responses = RedisResponseSessionStore(client, key_prefix=prefix, conversations=conversations, **ttl)
    return Side(lambda sid: RedisSession(sid, client=client, key_prefix=prefix, **ttl), responses,
                conversations, client, prefix)


@pytest.mark.parametrize("seed", range(10))
async def test_random_operations_answer_alike_on_fakeredis_and_redis(redis_server: Any, seed: int) -> None:
    server = fakeredis.FakeServer()
    fake = side(fakeredis.FakeAsyncRedis(server=server), f"d{seed}", server)
    real_client = Redis.from_url(redis_server.url)
    real = side(real_client, f"diff{seed}-{random.getrandbits(32):08x}", None)
    try:
        for op in script(seed):
            ours, theirs = await fake.run(op), await real.run(op)
            assert ours == theirs, op
        assert await fake.shape() == await real.shape()
    finally:
        await real_client.aclose()


async def test_the_expiry_index_of_many_non_ascii_children_matches(redis_server: Any) -> None:
    """Defect 10: with non-ASCII ids the expiry index was cut at 16,384 bytes in Lua and
    16,384 characters in the twin, so Redis kept 37 expired children and memory 0. A root
    with 300 long non-ASCII children, each to expire on its own, is written on both
    servers: the thread's fields and its index of leaves (L) have the same sizes."""
    server = fakeredis.FakeServer()
    real_client = Redis.from_url(redis_server.url)
    prefix = f"exp{random.getrandbits(32):08x}"
    sides = [(MemoryResponseSessionStore(server=server, key_prefix=prefix), fakeredis.FakeAsyncRedis(server=server)),
             (RedisResponseSessionStore(real_client, key_prefix=prefix), real_client)]
    try:
        seen = []
        for store, client in sides:
            await store.save(record("ext-根"))
            for n in range(300):
                await store.save(record(f"ext-子-{'é' * 60}-{n}", "ext-根"))
            keys = await client.keys(f"{prefix}:*:chain")
            seen.append([(await client.hlen(k), len(await client.hget(k, "L") or b"")) for k in keys])
        assert seen[0] == seen[1]
    finally:
        await real_client.aclose()
