"""How a resolve reads a chain's records after its walk (#9: no single call holds the
server long, at any record size): HMGETs sized by the largest record the thread holds,
which its ``m`` field tells while its last-write stamp is the one ``m`` names, and
which the walk measures record by record where ``m`` does not tell."""

from __future__ import annotations

import pytest

from chains import linear, make_store, thread_tag
from redis_sessions.responses import redis_engine
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
    if backend.client is None:
        entry = store.engine.threads.get(thread)
        return {k: v.encode() if isinstance(v, str) else v for k, v in (entry.fields if entry else {}).items()}
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
