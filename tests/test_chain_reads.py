"""How a resolve reads a chain: pointers walked in bounded calls (lua/chain_walk.lua), the
records back with the walk while they fit its reply, else read after it with HMGETs sized
by the largest record the thread has held (its header), and what happens when the chain
changes between the two: it is read again, never returned mixed or short."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from redis.asyncio import Redis

from chains import build_chain, calls_of, linear, make_store, nodes_of, plant, record, stored, thread_tag
from redis_sessions import ErrorCode, SessionError
from redis_sessions.codec import ID_LEFT_OUT, MARK, RESPONSE_ID_LEFT_OUT, encode_record
from redis_sessions.responses.store import (
    INLINE_BYTES,
    READ_SLICE_BYTES,
    SLICE_RECORDS,
    SLICES_PER_TRIP,
    WALK_STEPS,
    read_plan,
)

BIG = "x" * 4000  # three of these are past the inline budget: the chain is walked, then read


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
    assert all(len(trip) == SLICES_PER_TRIP for trip in plan[:-1])  # every trip but the last is full


async def thread_fields(backend: Any, store: Any, rid: str) -> dict[str, bytes]:
    """The fields of ``rid``'s thread as stored ({} once the thread is gone)."""
    return {k.decode(): v for k, v in (await backend.client.hgetall(store.keys.thread(thread_tag(rid)))).items()}


def largest_record(fields: dict[str, bytes]) -> int:
    return max(len(v) for k, v in fields.items() if k.startswith("d:"))


def header_largest(fields: dict[str, bytes]) -> int:
    return int(fields["h"].split()[1])


async def test_a_loop_longer_than_one_walk_call_is_a_cycle(backend):
    store = make_store(backend, max_depth=5000)
    thread = "00000000000000aa"
    n = WALK_STEPS + 100
    ids = [f"resp_{thread}_{i:032x}" for i in range(n)]
    blob = encode_record(record(ids[0]), False, 1 << 20)
    await plant(backend, store, thread, {rid: (ids[i - 1] if i else ids[-1], blob) for i, rid in enumerate(ids)})
    with pytest.raises(SessionError) as err:
        await store.resolve_chain(ids[-1])
    assert err.value.code == ErrorCode.CHAIN_CYCLE_DETECTED


@pytest.mark.parametrize("max_record_bytes", [1024 * 1024, 4 * 1024 * 1024, 8 * 1024 * 1024])
async def test_every_record_size_limit_reads_the_same_chain(backend, max_record_bytes):
    store = make_store(backend, max_depth=200, max_record_bytes=max_record_bytes)
    payloads = ["", BIG, "", "y" * 30000, "", BIG]
    ids, parent = [], None
    for i, payload in enumerate(payloads * 3):
        rid = f"ext-{i}"
        await store.save(record(rid, parent, f"turn {i}", payload=payload))
        ids.append(rid)
        parent = rid
    for end in (1, 2, 5, len(ids)):
        snap = await store.resolve_chain(ids[end - 1])
        assert [s.id for s in snap.sessions] == ids[:end]
        assert [s.request.input for s in snap.sessions] == [f"turn {i}" for i in range(end)]


def reading(store: Any, change: Any) -> list[list[str]]:
    """Make ``store``'s reads of records after a walk call ``change(n)`` first (n: the read's
    number); returns the ids each read asked for."""
    read, calls = store._read, []

    async def changed(key: str, ids: list[str], record_bytes: int, who: str) -> list[Any]:
        calls.append(list(ids))
        await change(len(calls))
        return await read(key, ids, record_bytes, who)

    store._read = changed
    return calls


async def test_a_record_overwritten_between_walk_and_read_is_read_again(redis_backend):
    """Records leave their ids out: the walk's ids name them, and each names its parent."""
    store = make_store(redis_backend, max_depth=100)
    ids = await linear(store, 6, BIG)
    await store.save(record("ext-side", ids[1], payload=BIG))

    async def move(n: int) -> None:
        if n == 1:  # the walk went through ext-3; now ext-3 moves under ext-side
            await store.save(record(ids[3], "ext-side", "turn 3", payload=BIG), overwrite=True)

    calls = reading(store, move)
    snap = await store.resolve_chain(ids[-1])
    assert len(calls) == 2 and "ext-side" in calls[1]
    assert [s.id for s in snap.sessions] == [ids[0], ids[1], "ext-side", ids[3], ids[4], ids[5]]


async def test_a_chain_that_keeps_changing_is_a_coded_error_not_a_mixed_history(redis_backend):
    store = make_store(redis_backend, max_depth=100)
    ids = await linear(store, 6, BIG)
    await store.save(record("ext-a", ids[1], payload=BIG))
    await store.save(record("ext-b", ids[1], payload=BIG))

    async def flip(n: int) -> None:
        await store.save(record(ids[3], "ext-a" if n % 2 else "ext-b", "turn 3", payload=BIG), overwrite=True)

    calls = reading(store, flip)
    with pytest.raises(SessionError) as err:
        await store.resolve_chain(ids[-1])
    assert err.value.code == ErrorCode.BACKEND_UNAVAILABLE and err.value.http_status == 503
    assert len(calls) == 3


async def test_a_record_deleted_between_walk_and_read_is_not_found_never_a_shorter_chain(redis_backend):
    store = make_store(redis_backend, max_depth=100)
    ids = await linear(store, 6, BIG)

    async def delete(n: int) -> None:
        if n == 1:
            await store.delete(ids[2])

    reading(store, delete)
    with pytest.raises(SessionError) as err:
        await store.resolve_chain(ids[-1])
    assert err.value.code == ErrorCode.CHAIN_NOT_FOUND and repr(ids[2]) in err.value.message


async def test_records_with_and_without_their_defaults_decode_alike(backend):
    """A record written with every field and one without its defaulted ones (omit_defaults)
    decode to equal Structs, side by side in one chain."""
    store = make_store(backend)
    thread = "00000000000000bb"
    a, b = f"resp_{thread}_{'0' * 32}", f"resp_{thread}_{'0' * 31}1"
    full = stored(msgspec.to_builtins(record(a)) | {"conversation_id": None, "metadata": None})
    assert len(full) > len(encode_record(record(a), False, 1 << 20))
    await plant(backend, store, thread, {a: ("", full), b: (a, encode_record(record(b, a), False, 1 << 20))})
    assert [s for s in (await store.resolve_chain(b)).sessions] == [record(a), record(b, a)]


async def test_records_are_stored_without_the_ids_their_field_names_say(redis_backend):
    store = make_store(redis_backend)
    a = await store.new_response_id()
    await store.save(record(a))
    blob = await redis_backend.client.hget(store.keys.thread(thread_tag(a)), f"d:{a}")
    assert blob[0] == MARK and blob[1] == 1 << 4 | ID_LEFT_OUT | RESPONSE_ID_LEFT_OUT
    assert blob == encode_record(record(a), False, 1 << 20) and a.encode() not in blob


async def test_every_save_keeps_the_largest_record_in_the_header(backend):
    store = make_store(backend, max_depth=100)
    ids = await linear(store, 4, payloads=["", "x" * 30_000, "", "y" * 5_000])
    fields = await thread_fields(backend, store, ids[0])
    largest = largest_record(fields)
    assert largest > 30_000 and header_largest(fields) == largest
    await store.delete(ids[1])  # deleting records leaves it an upper bound
    assert header_largest(await thread_fields(backend, store, ids[0])) == largest


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


async def walk_reads(nodes: list[Redis], store: Any, rid: str) -> tuple[list[str], dict[str, int], int]:
    """``rid``'s chain resolved: its ids, the hash reads the servers ran for it, by name, and its round trips."""
    before = {name: await calls_of(nodes, name) for name in ("hstrlen", "hget", "hmget")}
    trips = store.round_trips
    snap = await store.resolve_chain(rid)
    reads = {name: await calls_of(nodes, name) - n for name, n in before.items()}
    return [s.id for s in snap.sessions], reads, store.round_trips - trips


async def test_a_small_chain_comes_back_with_its_walk(real_backend):
    """Ten small records, inside INLINE_BYTES counted at the largest: the walk reads the
    header and the first pointer, then the pointers, then the ten records in one HMGET, in
    the one round trip; no record sized, none copied twice. A chain that fits only by its
    records' own sizes (one big, some small) comes as ids, its records in a second trip."""
    store = make_store(real_backend, max_depth=100)
    ids = await build_chain(store, 10)
    assert 10 * largest_record(await thread_fields(real_backend, store, ids[0])) <= INLINE_BYTES
    nodes = nodes_of(real_backend)
    try:
        await store.resolve_chain(ids[-1])  # the script loaded, connections made
        walked, reads, trips = await walk_reads(nodes, store, ids[-1])
        assert walked == ids and trips == 1
        assert reads == {"hstrlen": 0, "hget": 9, "hmget": 2}
        mixed = await linear(store, 4, payloads=["", "", "", "y" * 6000], prefix="mix")
        fields = await thread_fields(real_backend, store, mixed[0])
        sizes = [len(fields[f"d:{rid}"]) for rid in mixed]
        assert sum(sizes) <= INLINE_BYTES < 4 * max(sizes)
        await store.resolve_chain(mixed[-1])
        walked, reads, trips = await walk_reads(nodes, store, mixed[-1])
        assert walked == mixed and trips == 3  # its locator, the walk, the records' HMGET
        assert reads["hstrlen"] == 0
    finally:
        for node in nodes:
            await node.aclose()


async def test_a_pointer_left_without_its_record_is_missing_there(real_backend):
    """A hand edit that deletes a record's d: field and leaves its pointer: the chain is
    missing at that record, never returned short."""
    store = make_store(real_backend, max_depth=100)
    ids = await build_chain(store, 8)
    await real_backend.client.hdel(store.keys.thread(thread_tag(ids[0])), f"d:{ids[3]}")
    with pytest.raises(SessionError) as err:
        await store.resolve_chain(ids[-1])
    assert err.value.code is ErrorCode.CHAIN_NOT_FOUND and repr(ids[3]) in err.value.message
