"""The chain walk of #9: pointers walked in bounded calls, records read after in slices,
and what happens when the chain changes between the two."""

from __future__ import annotations

import msgspec
import pytest

from chains import linear, make_store, plant, record
from redis_sessions import ErrorCode, SessionError, StoredResponseSession
from redis_sessions.codec import PACKED as COMPACT, ID_LEFT_OUT, RESPONSE_ID_LEFT_OUT, decode_session
from redis_sessions.responses.jumps import JUMP_BYTES, JUMPS
from redis_sessions.responses.redis_engine import WALK_STEPS
from redis_sessions.responses.store import encode_record

BIG = "x" * 4000  # five of these are past the inline budget: the chain is walked, then read


async def test_a_loop_longer_than_one_walk_call_is_a_cycle(backend):
    store = make_store(backend, max_depth=5000)
    thread = "00000000000000aa"
    n = WALK_STEPS + 100
    ids = [f"resp_{thread}_{i:032x}" for i in range(n)]
    blob = encode_record(record(ids[0]))
    await plant(backend, store, thread, {rid: (ids[i - 1] if i else ids[-1], blob) for i, rid in enumerate(ids)})
    with pytest.raises(SessionError) as err:
        await store.resolve_chain(ids[-1])
    assert err.value.code == ErrorCode.CHAIN_CYCLE_DETECTED


@pytest.mark.parametrize("max_record_bytes", [1024 * 1024, 4 * 1024 * 1024, 8 * 1024 * 1024])
async def test_every_record_size_limit_reads_the_same_chain(backend, max_record_bytes):
    """The record-size limit picks how many records one HMGET reads (8 at 1 MB, 2 at 4 MB,
    1 at 8 MB): the chain read is the same."""
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


@pytest.mark.parametrize("compact", [False, True], ids=["full", "compact"])
async def test_a_record_overwritten_between_walk_and_read_is_read_again(redis_backend, compact):
    """Compact records too: their ids come from the walk, so their parents still tell."""
    store = make_store(redis_backend, max_depth=100, compact_records=compact)
    ids = await linear(store, 6, BIG)
    await store.save(record("ext-side", ids[1], payload=BIG))
    engine = store.engine
    read, calls = engine._read, []

    async def changing(key, entries, record_bytes):
        calls.append(list(entries))
        if len(calls) == 1:  # the walk went through ext-3; now ext-3 moves under ext-side
            await store.save(record(ids[3], "ext-side", "turn 3", payload=BIG), overwrite=True)
        return await read(key, entries, record_bytes)

    engine._read = changing
    snap = await store.resolve_chain(ids[-1])
    assert len(calls) == 2 and "ext-side" in calls[1]
    assert [s.id for s in snap.sessions] == [ids[0], ids[1], "ext-side", ids[3], ids[4], ids[5]]


@pytest.mark.parametrize("compact", [False, True], ids=["full", "compact"])
async def test_a_chain_that_keeps_changing_is_a_coded_error_not_a_mixed_history(redis_backend, compact):
    store = make_store(redis_backend, max_depth=100, compact_records=compact)
    ids = await linear(store, 6, BIG)
    await store.save(record("ext-a", ids[1], payload=BIG))
    await store.save(record("ext-b", ids[1], payload=BIG))
    engine = store.engine
    read, flips = engine._read, {"n": 0}

    async def flipping(key, entries, record_bytes):
        flips["n"] += 1
        parent = "ext-a" if flips["n"] % 2 else "ext-b"
        await store.save(record(ids[3], parent, "turn 3", payload=BIG), overwrite=True)
        return await read(key, entries, record_bytes)

    engine._read = flipping
    with pytest.raises(SessionError) as err:
        await store.resolve_chain(ids[-1])
    assert err.value.code == ErrorCode.BACKEND_UNAVAILABLE and err.value.http_status == 503
    assert flips["n"] == 3


async def test_a_record_deleted_between_walk_and_read_is_not_found_never_a_shorter_chain(redis_backend):
    store = make_store(redis_backend, max_depth=100)
    ids = await linear(store, 6, BIG)
    engine = store.engine
    read = engine._read

    async def deleting(key, entries, record_bytes):
        engine._read = read
        await store.delete(ids[2])
        return await read(key, entries, record_bytes)

    engine._read = deleting
    with pytest.raises(SessionError) as err:
        await store.resolve_chain(ids[-1])
    assert err.value.code == ErrorCode.CHAIN_NOT_FOUND and repr(ids[2]) in err.value.message


async def test_records_encoded_before_omit_defaults_and_after_decode_alike(backend):
    """Records written with every field (before omit_defaults) and without the defaulted
    ones (now) decode to equal Structs, side by side in one chain."""
    store = make_store(backend)
    thread = "00000000000000bb"
    a, b = f"resp_{thread}_{'0' * 32}", f"resp_{thread}_{'0' * 31}1"
    full = msgspec.msgpack.encode(msgspec.to_builtins(record(a)) | {"conversation_id": None, "metadata": None})
    assert len(full) > len(encode_record(record(a)))
    await plant(backend, store, thread, {a: ("", full), b: (a, encode_record(record(b, a)))})
    assert [s for s in (await store.resolve_chain(b)).sessions] == [record(a), record(b, a)]


def test_a_compact_record_is_refused_loudly_by_a_reader_that_does_not_know_it():
    """What a version before compact records does with one: its decoder (the same Struct,
    no marker check) fails on the marker byte, so it answers session.record.corrupt
    rather than a record with an empty id."""
    rid = f"resp_{'ab' * 8}_{'0' * 32}"
    session = record(rid, payload="x" * 100)
    blob = encode_record(session, compact=True)
    assert blob[0] == COMPACT and blob[1] == ID_LEFT_OUT | RESPONSE_ID_LEFT_OUT
    assert len(encode_record(session)) - len(blob) == 2 * len(rid)  # each id: its 2-byte header and itself, less an empty string, less the marker
    with pytest.raises(msgspec.DecodeError):
        msgspec.msgpack.Decoder(StoredResponseSession).decode(blob)
    assert decode_session(blob, "here", rid) == session
    for bad, why in ((blob, "without its id"), (bytes([COMPACT, 8]) + blob[2:], "does not know"),
                     (bytes([COMPACT, 0]) + blob[2:], "does not know"), (bytes([COMPACT]), "does not know"),
                     (bytes([COMPACT, ID_LEFT_OUT]) + encode_record(session), "holds an id")):
        with pytest.raises(SessionError) as err:
            decode_session(bad, "here", None if why == "without its id" else rid)
        assert err.value.code is ErrorCode.RECORD_CORRUPT and why in err.value.message


async def test_compact_records_are_what_the_server_stores(redis_backend):
    full, compact = make_store(redis_backend, compact_records=False), make_store(redis_backend)
    a = await compact.new_response_id()
    b = await full.new_response_id()
    await compact.save(record(a))
    await full.save(record(b))
    client = redis_backend.client
    stored_a = await client.hget(compact.keys.thread(a.split("_")[1]), f"d:{a}")
    stored_b = await client.hget(full.keys.thread(b.split("_")[1]), f"d:{b}")
    assert stored_a == encode_record(record(a), compact=True) and stored_a[0] == COMPACT
    assert stored_b == encode_record(record(b)) and len(stored_b) - len(stored_a) == 2 * len(a)


HUGE = "x" * (JUMPS * JUMP_BYTES)  # records this big keep the longest jump list


@pytest.mark.parametrize("n, payload", [(12, HUGE), (40, HUGE), (40, "x" * 4500)], ids=["12x16KB", "40x16KB", "40x5KB"])
async def test_jump_lists_name_the_nearest_ancestors_and_a_stale_one_never_gives_a_wrong_chain(backend, n, payload):
    """Big records keep their JUMPS nearest ancestors; the walk follows those lists (40
    records: two full lists, then one that ends at the root), and when an overwrite
    elsewhere leaves one stale the reader notices (each record names its own parent) and
    walks by the pointers: the right chain, or the right error."""
    store = make_store(backend, max_depth=100)
    ids = await linear(store, n, payload, prefix="jump")
    last = n - 1
    await store.save(record("side", ids[0], "side", payload=HUGE))
    thread = await store.engine.locate(ids[0], 0)
    lists = await backend.client.hget(store.keys.thread(thread), f"j:{ids[last]}")
    size = len(encode_record(record(ids[last], ids[last - 1], f"turn {last}", payload=payload)))
    want = min(JUMPS, size // JUMP_BYTES)  # one ancestor per KB of the record
    assert want == (JUMPS if payload == HUGE else 4)
    listed = list(reversed(ids[max(0, last - want):last]))
    goes_on = "" if listed[-1] == ids[0] else listed[-1]
    assert lists.decode() == f"{len(listed)} {goes_on} {' '.join(listed)}"
    for end in sorted({n, n - 1, min(n, 17), min(n, 16), min(n, 15), 2}):
        assert [s.id for s in (await store.resolve_chain(ids[end - 1])).sessions] == ids[:end]
    for depth in sorted({n - 1, min(n - 1, 16), 1}):
        with pytest.raises(SessionError) as err:
            await store.resolve_chain(ids[last], max_depth=depth)
        assert err.value.code is ErrorCode.CHAIN_DEPTH_EXCEEDED
    # ids[5] moves under "side": the lists after it still name ids[4], ids[3]...
    await store.save(record(ids[5], "side", "moved", payload=payload), overwrite=True)
    moved = [ids[0], "side", *ids[5:]]
    assert [s.id for s in (await store.resolve_chain(ids[last])).sessions] == moved
    assert [s.id for s in (await store.resolve_chain(ids[4])).sessions] == ids[:5]
    with pytest.raises(SessionError) as err:
        await store.resolve_chain(ids[last], max_depth=len(moved) - 1)
    assert err.value.code is ErrorCode.CHAIN_DEPTH_EXCEEDED
    assert len((await store.resolve_chain(ids[last], max_depth=len(moved))).sessions) == len(moved)
    # A record in the middle deleted: the chain is not found, never shorter.
    await store.delete(ids[8])
    with pytest.raises(SessionError) as err:
        await store.resolve_chain(ids[last])
    assert err.value.code is ErrorCode.CHAIN_NOT_FOUND and repr(ids[8]) in err.value.message
    # ...and saved again under another parent: its descendants' lists are stale again.
    await store.save(record(ids[8], ids[4], "again", payload=payload))
    assert [s.id for s in (await store.resolve_chain(ids[last])).sessions] == [*ids[:5], *ids[8:]]
    # A record saved small again under the same id keeps no list; its children still resolve.
    await store.save(record(ids[9], ids[8], "small now"), overwrite=True)
    assert [s.id for s in (await store.resolve_chain(ids[last])).sessions] == [*ids[:5], *ids[8:]]


@pytest.mark.parametrize("payload", [BIG, "x" * 4500, HUGE], ids=["4KB", "5KB", "16KB"])
async def test_ids_shaped_like_a_jump_list_are_walked_as_ids(backend, payload):
    """Ids may hold '|' and digits, never whitespace: a walk's reply entry is a jump list
    only when it holds a space (an id such as ``7|1|x-19`` was once read as a list)."""
    store = make_store(backend, max_depth=100)
    ids = await linear(store, 20, payload, prefix="7|1|x")
    assert [s.id for s in (await store.resolve_chain(ids[-1])).sessions] == ids
    assert [s.id for s in (await store.resolve_chain(ids[9])).sessions] == ids[:10]
