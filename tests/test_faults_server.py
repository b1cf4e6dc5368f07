"""Faults of the server itself: eviction under ``maxmemory`` and a live slot migration.

- ``allkeys-lru`` evicts whole keys. An item session is one key, so after
  eviction every session is whole or absent, never items without metadata; and
  a compaction whose snapshot predates an eviction never drops an item appended
  after that snapshot.
- During a slot migration (``IMPORTING``/``MIGRATING`` open, part of the slot's
  keys moved) every item and chain operation on keys of that slot succeeds:
  each script touches one key, so redis-py follows ``ASK``.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any, Iterator

import pytest
from redis.asyncio import Redis

from chains import record
from faultservers import FaultServer, key_slot, start_slot_migration
from redis_sessions import RedisResponseSessionStore, RedisSession, new_response_id
from redis_sessions.items import CompactionSession
from redis_sessions.keys import KeySpace

pytestmark = pytest.mark.real


def msg(tag: str, i: int, size: int = 0) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": f"{tag}-{i}", "pad": "x" * size}


@pytest.fixture
def lru_server() -> Iterator[FaultServer]:
    from conftest import _need_binary

    _need_binary()
    server = FaultServer("--maxmemory", "3mb", "--maxmemory-policy", "allkeys-lru", "--maxmemory-samples", "10")
    try:
        yield server
    finally:
        server.close()


async def until_idle(client: Redis, key: str, deadline: float = 60) -> None:
    """Until the server's LRU clock says ``key`` has been idle a second or more."""
    end = time.monotonic() + deadline
    while await client.object("idletime", key) < 1:
        assert time.monotonic() < end, f"{key} was not idle for a second within {deadline} s"
        await asyncio.sleep(0.1)


async def test_eviction_takes_item_sessions_whole_and_never_splits_one(lru_server: FaultServer) -> None:
    client = Redis.from_url(lru_server.url)
    try:
        sessions = [RedisSession(f"s{i}", client=client, key_prefix="ev", ttl_seconds=3600,
                                compression=False)  # "x" pads must take memory
                    for i in range(400)]
        added: dict[str, list[dict[str, Any]]] = {}
        for round_ in range(3):  # the server evicts while the sessions grow
            for s in sessions:
                batch = [msg(s.session_id, round_ * 2, 900), msg(s.session_id, round_ * 2 + 1, 900)]
                await s.add_items(batch)
                added.setdefault(s.session_id, []).extend(batch)
        info = await client.info("stats")
        assert info["evicted_keys"] > 0, "the test must actually evict"
        whole = absent = 0
        for s in sessions:
            # Items and metadata in one read: the server may still evict between two reads
            # (a Valkey CI run evicted s0 right after its get_items), which says nothing.
            snap = await s.snapshot()
            got = snap.items
            if not got:
                assert await client.keys(f"ev:{{s:{s.session_id}}}*") == []  # absent: nothing of it is left
                absent += 1
                continue
            assert snap.epoch, s.session_id  # its metadata came with its items
            # Whole: exactly a suffix-free history, every item it was given since it (re)appeared, in order.
            history = added[s.session_id]
            assert got == history[len(history) - len(got):], s.session_id
            whole += 1
        assert whole > 0 and absent > 0
    finally:
        await client.aclose()


async def test_a_compaction_never_drops_an_item_appended_after_its_snapshot_across_eviction(lru_server: FaultServer) -> None:
    client = Redis.from_url(lru_server.url)
    sessions = [RedisSession(f"c{i}", client=client, key_prefix="evc", ttl_seconds=3600, compression=False) for i in range(300)]
    for s in sessions:
        await s.add_items([msg(s.session_id, i, 600) for i in range(3)])
    snapshots = {s.session_id: await s.snapshot() for s in sessions}
    # The LRU clock counts whole seconds: once it has ticked, every session is older than
    # any filler, and eviction takes sessions first. Pushing the server just past
    # maxmemory then evicts some of them, never all (with the whole filler at once, a
    # tick between the snapshots and the filler evicted all 300, and nothing was left
    # to compact). The server's own idle time of the session read last says it has
    # ticked (OBJECT IDLETIME leaves the key's LRU alone).
    await until_idle(client, f"evc:{{s:{sessions[-1].session_id}}}:items")
    filler = b"f" * 50_000
    for i in range(120):
        await client.set(f"filler:{i}", filler)
        if (await client.info("stats"))["evicted_keys"] > 0:
            break
    for j in range(3):  # a little further past it: about 150 KB, some 60 sessions
        await client.set(f"filler:more:{j}", filler)
    present = [await client.exists(f"evc:{{s:{s.session_id}}}:items") for s in sessions]
    assert 0 < sum(present) < len(sessions), sum(present)  # some evicted whole, some not
    later = {s.session_id: [msg(s.session_id, 100 + i) for i in range(2)] for s in sessions}
    for s in sessions:  # appended after the snapshot (recreating the evicted ones)
        await s.add_items(later[s.session_id])
    compacted = 0
    for s in sessions:
        if await s.replace_prefix(snapshots[s.session_id], [{"type": "message", "role": "assistant", "content": "summary"}]):
            compacted += 1
    kept = 0
    for s in sessions:
        got = [g["content"] for g in await s.get_items()]
        if not got:
            continue  # evicted again after the appends: gone whole
        tail = [m["content"] for m in later[s.session_id]]
        assert got[-2:] == tail, (s.session_id, got)  # never dropped, never overwritten by a stale summary
        assert got[:-2] in ([], ["summary"], [f"{s.session_id}-{i}" for i in range(3)]), got
        kept += 1
    assert compacted > 0 and kept > 0
    await client.aclose()


# -- a live slot migration on the test cluster -------------------------------------
def ids_in_one_slot() -> tuple[str, str, str, str, str, int]:
    """Four session ids and a chain thread whose keys all hash to one slot."""
    keys = KeySpace("mig")
    anchor = new_response_id()
    thread = anchor.split("_")[1]
    slot = key_slot(keys.thread(thread))
    found = []
    for n in itertools.count():
        sid = f"sess{n}"
        if key_slot(keys.session_items(sid)) == slot:
            found.append(sid)
            if len(found) == 4:
                return anchor, found[0], found[1], found[2], found[3], slot
    raise AssertionError("unreachable")


async def test_every_operation_succeeds_on_a_slot_that_is_being_migrated(redis_cluster: Any) -> None:
    anchor, moved_sid, staying_sid, new_sid, fork_sid, slot = ids_in_one_slot()
    store = RedisResponseSessionStore.from_url(redis_cluster.url, key_prefix="mig", ttl_seconds=600)
    moved = RedisSession.from_url(moved_sid, url=redis_cluster.url, key_prefix="mig", ttl_seconds=600)
    staying = RedisSession.from_url(staying_sid, url=redis_cluster.url, key_prefix="mig", ttl_seconds=600)
    fresh = RedisSession.from_url(new_sid, url=redis_cluster.url, key_prefix="mig", ttl_seconds=600)
    await store.save(record(anchor))
    second = new_response_id(anchor)
    await store.save(record(second, parent=anchor))
    await moved.add_items([msg("m", i) for i in range(4)])
    await staying.add_items([msg("s", i) for i in range(4)])
    keys = KeySpace("mig")
    thread_key = keys.thread(anchor.split("_")[1])

    async def summarize(items: list[Any]) -> list[Any]:
        return [{"type": "message", "role": "assistant", "content": f"summary of {len(items)}"}]

    with start_slot_migration(redis_cluster, slot, [thread_key, moved._items_key]) as migration:
        assert migration.state == "open"
        # Chains: the thread was moved to the importing node.
        third = new_response_id(second)
        await store.save(record(third, parent=second), expected_previous_response_id=second)
        assert [s.id for s in (await store.resolve_chain(third)).sessions] == [anchor, second, third]
        assert (await store.get(second)) is not None
        assert await store.delete(third) is True
        # Items on a moved session, one that stayed, and one created during the migration.
        for session, tag in ((moved, "m"), (staying, "s"), (fresh, "f")):
            await session.add_items([msg(tag, 10), msg(tag, 11)])
            assert (await session.get_items(2)) == [msg(tag, 10), msg(tag, 11)]
            assert (await session.pop_item()) == msg(tag, 11)
            outcome = await CompactionSession(session, summarize).compact(force=True)
            assert outcome == "compacted"
            assert [g["content"] for g in await session.get_items()][0].startswith("summary of")
        fork = await staying.fork(fork_sid)  # a new key, created on the slot's importing node
        assert [g["content"] for g in await fork.get_items()] == [g["content"] for g in await staying.get_items()]
        await moved.clear_session()
        assert await moved.get_items() == []
        migration.finish()
        assert [g["content"] for g in await staying.get_items()] == ["summary of 5"]
    await store.close()
    for s in (moved, staying, fresh):
        await s.close()
