"""How a resolve reads a chain's records after its walk (#9: no single call holds the
server long, at any record size): HMGETs sized by the largest record the thread holds,
which its ``m`` field tells while its last-write stamp is the one ``m`` names, and
which the walk measures record by record where ``m`` does not tell."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from chains import build_chain, calls_of, linear, make_store, nodes_of, thread_tag
from redis_sessions.responses import redis_engine
from redis_sessions.responses.protocol import INLINE_BYTES
from redis_sessions.responses.redis_engine import (
    READ_SLICE_BYTES,
    SLICE_RECORDS,
    SLICES_PER_TRIP,
    read_plan,
)
from redis_sessions.keys import KeySpace

M, W = KeySpace.LARGEST_FIELD, KeySpace.LAST_WRITE_FIELD


@pytest.mark.parametrize("count", [1, 2, 255, 256, 257, 1000, 1024, 1025, 5000])
@pytest.mark.parametrize("record_bytes", [1, 700, 4096, 20_000, 1 << 20, 3 << 20])
def test_the_read_plan_covers_every_record_once_in_bounded_slices(count, record_bytes):
    plan = read_plan(count, record_bytes)
    slices = [part for trip in plan for part in trip]
    assert [i for part in slices for i in range(count)[part]] == list(range(count))
    assert all(1 <= len(trip) <= SLICES_PER_TRIP for trip in plan)
    for part in slices:
        n = len(range(count)[part])
        assert 1 <= n <= SLICE_RECORDS
        assert n == 1 or n * record_bytes <= READ_SLICE_BYTES  # one record bigger than a slice is read alone
    # no more trips than the bounds need: every trip but the last is full
    assert all(len(trip) == SLICES_PER_TRIP for trip in plan[:-1])


async def thread_fields(backend, store, rid) -> dict[str, bytes]:
    """The fields of ``rid``'s thread as stored ({} once the thread is gone)."""
    thread = thread_tag(rid)
    return {k.decode(): v for k, v in (await backend.client.hgetall(store.keys.thread(thread))).items()}


def largest_record(fields: dict[str, bytes]) -> int:
    return max(len(v) for k, v in fields.items() if k.startswith("d:"))


async def test_every_save_keeps_the_largest_record_stamped_with_its_write(backend):
    store = make_store(backend, max_depth=100)
    sizes = ["", "x" * 30_000, "", "y" * 5_000]
    ids = await linear(store, 4, payloads=sizes)
    fields = await thread_fields(backend, store, ids[0])
    largest = largest_record(fields)
    assert largest > 30_000
    assert fields[M].decode() == f"{largest} {fields[W].decode()}"
    # deleting records leaves it an upper bound; deleting the last one removes it with the stamp
    await store.delete(ids[1])
    fields = await thread_fields(backend, store, ids[0])
    assert fields[M].decode().split()[0] == str(largest)
    for rid in (ids[3], ids[2], ids[0]):
        await store.delete(rid)
    fields = await thread_fields(backend, store, ids[0])
    assert not any(k.startswith("d:") for k in fields)
    assert M not in fields and W not in fields


async def test_a_stamp_an_older_version_wrote_stops_the_size_and_the_walk_measures_instead(redis_backend, monkeypatch):
    """A version before m writes w on its saves and leaves m as it was: m no longer
    tells (its stamp is another w), so the walk sizes each record it passes, by the
    pointers, and the records are read sized by the largest it found. The next save
    of this version drops the m that does not tell, and the walk keeps measuring."""
    store = make_store(redis_backend, max_depth=100)
    # the leaf's jump list names all its ancestors: a walk that followed it would size
    # none of them, and miss the largest
    payloads = ["a" * 3000] * 5 + ["b" * 90_000] + ["c" * 3000] * 4 + ["d" * 20_000]
    ids = await linear(store, len(payloads), payloads=payloads)
    key = store.keys.thread(thread_tag(ids[0]))
    sized: list[int] = []
    plan = redis_engine.read_plan
    monkeypatch.setattr(redis_engine, "read_plan", lambda count, record_bytes: sized.append(record_bytes) or plan(count, record_bytes))
    largest = int((await redis_backend.client.hget(key, M)).split()[0])
    assert largest == largest_record(await thread_fields(redis_backend, store, ids[0])) > 90_000

    snap = await store.resolve_chain(ids[-1])
    assert [s.id for s in snap.sessions] == ids
    assert sized[-1] == largest  # told by m

    await redis_backend.client.hset(key, W, b"1")  # an older version's save: another stamp
    snap = await store.resolve_chain(ids[-1])
    assert [s.id for s in snap.sessions] == ids
    assert sized[-1] == largest  # measured by the walk: the largest record of this chain, exactly

    more = await linear(store, 1, payloads=[""], prefix="ext-next", first_parent=ids[-1])
    assert await redis_backend.client.hget(key, M) is None  # dropped, not carried on wrong
    snap = await store.resolve_chain(more[-1])
    assert [s.id for s in snap.sessions] == ids + more
    assert sized[-1] == largest


async def test_a_chain_of_huge_records_is_read_in_several_trips_each_bounded(redis_backend):
    """13 records of 600 KB (7.8 MB): three per HMGET (READ_SLICE_BYTES 2 MiB), four HMGETs
    per trip, so two trips after the walk."""
    store = make_store(redis_backend, max_depth=100)
    ids = await linear(store, 13, payloads=["z" * 600_000] * 13)
    plan = read_plan(13, largest_record(await thread_fields(redis_backend, store, ids[0])))
    assert [len(trip) for trip in plan] == [4, 1]
    before = store.round_trips
    snap = await store.resolve_chain(ids[-1])
    assert [s.id for s in snap.sessions] == ids
    assert [s.request.input for s in snap.sessions] == [f"turn {i}" for i in range(13)]
    assert store.round_trips - before == 2 + len(plan)  # the locator of an id minted elsewhere, one walk call, the trips


async def walk_reads(nodes: list[Redis], store, rid: str) -> tuple[list[str], dict[str, int], int]:
    """``rid``'s chain resolved: its ids, the hash reads the servers ran for it, by name, and its round trips."""
    before = {name: await calls_of(nodes, name) for name in ("hstrlen", "hget", "hmget")}
    trips = store.round_trips
    snap = await store.resolve_chain(rid)
    reads = {name: await calls_of(nodes, name) - n for name, n in before.items()}
    return [s.id for s in snap.sessions], reads, store.round_trips - trips


async def test_a_small_chain_is_copied_through_the_walk_once_where_m_tells_its_largest_record(real_backend):
    """Ten small records (inside INLINE_BYTES): the walk reads m, then only the pointers,
    then the ten records in one HMGET, in the one round trip: no record sized, none copied
    twice. Where m does not tell (an older version's stamp), it sizes each record and reads
    it with its pointer, in one round trip still."""
    store = make_store(real_backend, max_depth=100)
    ids = await build_chain(store, 10)
    assert 10 * largest_record(await thread_fields(real_backend, store, ids[0])) <= INLINE_BYTES
    nodes = nodes_of(real_backend)
    try:
        await store.resolve_chain(ids[-1])  # the script loaded, connections made
        # each read by a worker that has not seen the chain (one that has reads it by its names)
        walked, reads, trips = await walk_reads(nodes, make_store(real_backend, max_depth=100), ids[-1])
        assert walked == ids and trips == 1
        assert reads == {"hstrlen": 0, "hget": 10, "hmget": 2}

        await real_backend.client.hset(store.keys.thread(thread_tag(ids[0])), W, b"1")
        walked, reads, trips = await walk_reads(nodes, make_store(real_backend, max_depth=100), ids[-1])
        assert walked == ids and trips == 1
        assert reads == {"hstrlen": 10, "hget": 0, "hmget": 11}  # m, w; then each record with its pointer
    finally:
        for node in nodes:
            await node.aclose()


async def test_a_chain_that_fits_the_budget_only_by_its_sizes_comes_in_two_trips_where_m_tells(real_backend):
    """Three small records and one of 6 KB: 6.7 KB in all, inside INLINE_BYTES, but not
    four records of the largest's size. By m the walk sends their ids and the records
    come in a second trip (no record sized or copied in vain); where m does not tell, the
    walk sizes each and returns them itself. The same chain either way."""
    store = make_store(real_backend, max_depth=100)
    ids = await linear(store, 4, payloads=["", "", "", "y" * 6000])
    fields = await thread_fields(real_backend, store, ids[0])
    sizes = [len(fields[f"d:{rid}"]) for rid in ids]
    assert sum(sizes) <= INLINE_BYTES < 4 * max(sizes)
    nodes = nodes_of(real_backend)
    try:
        await store.resolve_chain(ids[-1])
        by_m = await walk_reads(nodes, store, ids[-1])
        await real_backend.client.hset(store.keys.thread(thread_tag(ids[0])), W, b"1")
        by_size = await walk_reads(nodes, store, ids[-1])
        assert by_m[0] == by_size[0] == ids
        assert by_size[2] == by_m[2] - 1  # one trip fewer when each record is sized
        assert by_m[1]["hstrlen"] == 0 and by_size[1]["hstrlen"] == 4
    finally:
        for node in nodes:
            await node.aclose()


@pytest.mark.parametrize("m_tells", [True, False])
async def test_a_pointer_left_without_its_record_ends_an_inline_walk_as_missing_there(real_backend, m_tells):
    """A hand edit that deletes a record's d: field and leaves its pointer: the walk reports
    the chain missing at that record, with the newer records it read, whether it read
    them by m in one HMGET at the end or each with its pointer."""
    store = make_store(real_backend, max_depth=100)
    ids = await build_chain(store, 8)
    thread = thread_tag(ids[0])
    key = store.keys.thread(thread)
    if not m_tells:
        await real_backend.client.hset(key, W, b"1")
    fields = await thread_fields(real_backend, store, ids[0])
    await real_backend.client.hdel(key, f"d:{ids[3]}")
    status, detail, records, _ = await store.engine.walk(thread, ids[-1], 64, 0)
    assert (status, detail) == ("missing", ids[3])
    assert list(records) == [fields[f"d:{rid}"] for rid in ids[:3:-1]]
