"""Expiry for real, once per real server kind (a redis-server, a 3-master cluster).

Every other TTL test runs on the fake clock (``clocked`` in tests/conftest.py), which
moves fakeredis's clock and with it the scripts' TIME. This one proves what the fake
clock cannot: that the TTLs the scripts set make a real server remove every key by
itself, and that a response's own deadline, kept in its thread by the server's TIME,
removes it from a thread that lives on.

Nothing here sleeps a fixed time and then asserts. A check either holds at any moment
(a key that is still there carries a TTL no longer than its store's) or is polled for
until a generous deadline: a slow machine can make the test take longer, not fail it.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

import pytest
from redis.asyncio.cluster import RedisCluster

from chains import record
from redis_sessions import ErrorCode, RedisConversationStore, RedisResponseSessionStore, RedisSession, SessionError
from redis_sessions.ids import thread_of
from redis_sessions.keys import KeySpace

SHORT = 1
"""The TTL under test, in seconds."""
LONG = 3600
"""A control written the same way, which must outlive the test."""
DEADLINE = 60.0
"""Seconds to wait for what a TTL of SHORT must bring about."""


@dataclass
class Written:
    """One of each kind of key, written under ``prefix`` with a TTL of ``ttl``."""

    prefix: str
    session: RedisSession
    conversations: RedisConversationStore
    responses: RedisResponseSessionStore
    conversation_id: str
    response_ids: list[str]

    def keys(self) -> set[bytes]:
        """Every key these writes made: an item session, a conversation, a thread, a locator."""
        ks = KeySpace(self.prefix)
        return {k.encode() for k in (ks.session_items("s"), ks.conversation(self.conversation_id),
                                     ks.thread(thread_of(self.response_ids[0]) or ""), ks.locator("ext-real"))}


async def write(client: Any, prefix: str, ttl: int) -> Written:
    session = RedisSession("s", client=client, key_prefix=prefix, ttl_seconds=ttl)
    await session.add_items([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    conversations = RedisConversationStore(client, key_prefix=prefix, ttl_seconds=ttl)
    conv = await conversations.create(items=[{"type": "message", "role": "user", "content": "a"}])
    responses = RedisResponseSessionStore(client, key_prefix=prefix, ttl_seconds=ttl)
    root = await responses.new_response_id()
    await responses.save(record(root))
    child = await responses.new_response_id(root)
    await responses.save(record(child, root))
    await responses.save(record("ext-real", child))  # an id minted elsewhere: its locator is a key of its own
    return Written(prefix, session, conversations, responses, conv.id, [root, child, "ext-real"])


async def ttls(client: Any, prefix: str) -> dict[bytes, int]:
    """Every key under ``prefix`` (every primary of a cluster), with its PTTL in ms."""
    kwargs: dict[str, Any] = {"match": f"{prefix}:*"}
    if isinstance(client, RedisCluster):
        kwargs["target_nodes"] = RedisCluster.PRIMARIES
    return {key: int(await client.pttl(key)) async for key in client.scan_iter(**kwargs)}


async def gone(written: Written) -> bool:
    """Nothing of ``written`` is left, by key or by any read."""
    if await ttls(written.session.client, written.prefix):
        return False
    if await written.session.get_items():
        return False
    try:
        await written.conversations.get(written.conversation_id)
        return False
    except SessionError as exc:
        assert exc.code is ErrorCode.CONVERSATION_NOT_FOUND, exc
    return all([await written.responses.get(rid) is None for rid in written.response_ids])


async def until(condition: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not await condition():
        assert time.monotonic() < deadline, f"{what}: not within {DEADLINE:.0f} s"
        await asyncio.sleep(0.05)


async def test_a_short_ttl_removes_every_key_and_a_response_past_its_deadline(real_backend: Any) -> None:
    client = real_backend.client
    control = await write(client, f"{real_backend.prefix}k", LONG)
    # In the control's thread, a regeneration saved with the short TTL: the thread lives
    # on (each turn below renews it by LONG), the regeneration has its own deadline.
    abandoned = RedisResponseSessionStore(client, key_prefix=control.prefix, ttl_seconds=SHORT)
    regen = await abandoned.new_response_id(control.response_ids[0])
    await abandoned.save(record(regen, control.response_ids[0], "regenerated"))
    short = await write(client, real_backend.prefix, SHORT)

    assert set(await ttls(client, control.prefix)) == control.keys()  # the scan sees every kind of key
    left = await ttls(client, short.prefix)
    assert set(left) <= short.keys()
    assert all(0 < ms <= SHORT * 1000 for ms in left.values()), left  # any key still there: the short TTL

    await until(lambda: gone(short), "the keys of the short TTL to expire")

    turns = [control.response_ids[1]]

    async def regen_went() -> bool:
        """A turn goes on in the regeneration's thread; each save removes what is past its deadline."""
        rid = await control.responses.new_response_id(turns[-1])
        await control.responses.save(record(rid, turns[-1]))
        turns.append(rid)
        return await control.responses.get(regen) is None

    await until(regen_went, "the regeneration past its deadline to go")

    after = await ttls(client, control.prefix)
    assert set(after) == control.keys() and all(ms > 0.9 * LONG * 1000 for ms in after.values()), after
    chain = [s.id for s in (await control.responses.resolve_chain(turns[-1])).sessions]
    assert chain == control.response_ids[:2] + turns[1:]  # every ancestor of a live response stays
    thread = await client.hgetall(KeySpace(control.prefix).thread(thread_of(chain[0]) or ""))
    fields = {k.decode(): v for k, v in thread.items()}
    records = sorted(f[2:] for f in fields if f.startswith("d:"))
    assert records == sorted([*chain, "ext-real"])  # the regeneration went, and only it
    leaves = sorted(f[2:] for f in fields if f.startswith("e:") and not fields[f].startswith(b"s"))
    assert leaves == sorted([chain[-1], "ext-real"])  # the books name the two leaves left, and no other
    assert len(await control.session.get_items()) == 2
    assert (await control.conversations.get(control.conversation_id)).id == control.conversation_id
