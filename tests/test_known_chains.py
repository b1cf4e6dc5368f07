"""Reads by names (#9: Redis time near the floor for small chains): a store remembers the
chains it resolved and the turns it saved under them (redis_sessions/responses/names.py's
memo), and its next resolve of such a chain reads the records by their names in one call
that reads no pointer (lua/chain_known.lua). The memo is a hint: whatever another worker
did to the thread meanwhile, the answer is the one a worker that never saw the chain
gives, which walks it."""

from __future__ import annotations

import pytest

from chains import build_chain, calls_of, gateway_turns, make_store, nodes_of, record
from redis_sessions import SessionError
from redis_sessions.responses.protocol import INLINE_BYTES

PAYLOAD = "x" * 300
"""Records of about 0.55 KB: ten of them come back inline."""


async def gateway(store, n: int, parent: str | None = None, payload: str = PAYLOAD) -> list[str]:
    return await gateway_turns(store, n, parent, payload)


async def answer(store, rid: str, **options) -> object:
    """What a resolve answers: the snapshot, or the coded error."""
    try:
        snap = await store.resolve_chain(rid, **options)
    except SessionError as exc:
        return exc.code.value, exc.message
    return snap.model_dump() if hasattr(snap, "model_dump") else snap


async def test_a_worker_reads_the_chain_it_saved_under_in_one_trip_and_answers_as_a_walk(backend):
    store = make_store(backend, max_depth=100)
    ids = await gateway(store, 10)
    before = store.round_trips
    snap = await store.resolve_chain(ids[-1])
    assert store.round_trips - before == 1
    assert [s.id for s in snap.sessions] == ids
    assert [s.request.input for s in snap.sessions] == [f"turn {i}" for i in range(10)]
    assert await answer(store, ids[-1]) == await answer(make_store(backend, max_depth=100), ids[-1])


async def test_the_read_by_names_reads_no_pointer(real_backend):
    """On a server: one script call, whose reads are the thread's m and w, then the records,
    and none of the walk's pointer reads; a worker that has not seen the chain walks it."""
    store = make_store(real_backend, max_depth=100)
    ids = await gateway(store, 10)
    await store.resolve_chain(ids[-1])  # the script loaded
    nodes = nodes_of(real_backend)
    try:
        for reader, pointers in ((store, 0), (make_store(real_backend, max_depth=100), 10)):
            before = [await calls_of(nodes, name) for name in ("hget", "hmget", "evalsha")]
            assert [s.id for s in (await reader.resolve_chain(ids[-1])).sessions] == ids
            after = [await calls_of(nodes, name) for name in ("hget", "hmget", "evalsha")]
            assert [b - a for a, b in zip(before, after)] == [pointers, 2, 1]
    finally:
        for node in nodes:
            await node.aclose()


@pytest.mark.parametrize("change", ["delete_middle", "delete_tip", "drop_thread", "reparent_tip",
                                    "overwrite_middle", "overwrite_middle_big", "branch_big"])
async def test_a_chain_changed_by_another_worker_reads_as_a_walk_reads_it(backend, change):
    """Each change another worker can make to a remembered chain: the remembering store
    answers what a fresh one does, then and on the next resolve."""
    store = make_store(backend, max_depth=100)
    other = make_store(backend, max_depth=100)
    ids = await gateway(store, 8)
    await store.resolve_chain(ids[-1])
    if change == "delete_middle":
        assert await other.delete(ids[3])
    elif change == "delete_tip":
        assert await other.delete(ids[-1])
    elif change == "drop_thread":
        assert await other.delete_thread(ids[0]) == 8
    elif change == "reparent_tip":  # the tip saved again, straight under the root
        await other.save(record(ids[-1], ids[0], "turn 7", payload=PAYLOAD), overwrite=True)
    elif change == "overwrite_middle":  # new bytes, the same parent
        await other.save(record(ids[4], ids[3], "rewritten", payload=PAYLOAD), overwrite=True)
    elif change == "overwrite_middle_big":  # past the inline budget: the read must not copy it
        await other.save(record(ids[4], ids[3], "big", payload="y" * INLINE_BYTES), overwrite=True)
    else:  # another branch holds a big record: m tells the thread's largest
        big = await other.new_response_id(ids[2])
        await other.save(record(big, ids[2], "big", payload="y" * INLINE_BYTES))
    for _ in range(2):
        assert await answer(store, ids[-1]) == await answer(make_store(backend, max_depth=100), ids[-1])


async def test_a_refused_read_by_names_is_not_tried_again(backend):
    """Where the thread's m says the chain would not come back inline, the read by names is
    refused having read no record, and the store no longer tries it for that chain."""
    store = make_store(backend, max_depth=100)
    ids = await gateway(store, 8)
    other = make_store(backend, max_depth=100)
    big = await other.new_response_id(ids[2])
    await other.save(record(big, ids[2], "big", payload="y" * INLINE_BYTES))
    before = store.round_trips
    await store.resolve_chain(ids[-1])
    refused = store.round_trips - before
    before = store.round_trips
    await store.resolve_chain(ids[-1])
    assert refused == store.round_trips - before + 1  # one refused read, then the walk as a fresh store


async def test_a_chain_longer_than_max_depth_is_refused_as_by_the_walk(backend):
    store = make_store(backend, max_depth=100)
    ids = await gateway(store, 6)
    await store.resolve_chain(ids[-1])
    for depth in (5, 6, 0):
        assert await answer(store, ids[-1], max_depth=depth) == await answer(
            make_store(backend, max_depth=100), ids[-1], max_depth=depth)


async def test_a_sliding_store_reads_by_the_walk_so_every_read_gives_the_ttl_again(backend):
    """A read by names writes nothing, so a store with sliding expiry never uses it."""
    store = make_store(backend, max_depth=100, sliding_ttl=True, ttl_seconds=3600)
    ids = await build_chain(store, 4)
    await store.resolve_chain(ids[-1])
    known = store._memo.known(ids[-1])
    assert known is not None  # remembered, and still walked:
    before = store.round_trips
    await store.resolve_chain(ids[-1])
    assert store.round_trips - before == 1 and store._memo.known(ids[-1]) == known
    nodes = nodes_of(backend) if backend.name in ("redis", "cluster") else None
    if nodes:
        try:
            hgets = await calls_of(nodes, "hget")
            await store.resolve_chain(ids[-1])
            assert await calls_of(nodes, "hget") - hgets == 4  # the walk's pointer reads
        finally:
            for node in nodes:
                await node.aclose()
