"""Names lists (redis_sessions/responses/names.py, #9: a deep chain of small records
resolved near the cost of one HMGET): the tip of a chain 13 or more deep keeps its
ancestors' ids packed in ``n:<id>``; the walk hands the reader that list, and the reader
reads the records and checks that they link up, walking by the pointers where they do not."""

from __future__ import annotations

import pytest

from chains import calls_of, gateway_turns, make_store, nodes_of, record, thread_tag
from redis_sessions import SessionError
from redis_sessions.ids import marks_names, mint_named_id, mint_root_id, roots_thread, thread_of
from redis_sessions.responses.names import NAMES_MIN, Memo, pack, unpack

PAYLOAD = "x" * 400
"""Records of about 0.65 KB: NAMES_MIN of them pass the walk's inline budget, one fewer
does not, so chains keep lists from NAMES_MIN deep, and a list is what a resolve reads."""


async def turns(store, n: int, parent: str | None = None, payload: str = PAYLOAD) -> list[str]:
    return await gateway_turns(store, n, parent, payload)


async def fields_of(backend, store, rid: str) -> dict[str, bytes]:
    thread = thread_tag(rid)
    return {k.decode(): v for k, v in (await backend.client.hgetall(store.keys.thread(thread))).items()}


def lists(fields: dict[str, bytes]) -> dict[str, bytes]:
    return {k[2:]: v for k, v in fields.items() if k.startswith("n:")}


def packed(ids: list[str]) -> bytes:
    return b"".join(bytes.fromhex(rid[-32:]) for rid in ids)


def test_pack_takes_only_ids_minted_for_the_thread_and_unpack_gives_them_back():
    a = "resp_0123456789abcdef_" + "0" * 31 + "a"
    b = "resp_0123456789abcdef_0123456789abcdef0123456789abcdef"
    assert unpack(pack([a, b], "0123456789abcdef"), "0123456789abcdef") == [a, b]
    assert pack([a], "fedcba9876543210") is None  # another thread's
    assert pack([a, "ext-1"], "0123456789abcdef") is None  # minted elsewhere
    assert pack([a.upper()[:5] + a[5:-1] + "A"], "0123456789abcdef") is None  # upper-case hex: not as minted
    assert pack([a[:-1] + "g"], "0123456789abcdef") is None
    assert unpack(b"x" * 17, "0123456789abcdef") is None  # not whole names


def test_the_memo_keeps_the_latest_chains_only():
    memo = Memo(entries=2, inline=1000)
    one, two = b"1" * 16, b"2" * 16
    memo.remember("a", one, 100)
    memo.remember("b", two, 100)
    memo.remember("a", two, 100)  # a again: the newest
    memo.remember("c", one, 100)
    assert (memo.known("a"), memo.known("b"), memo.known("c")) == (two, None, one)


def test_the_memo_tells_lists_marks_and_reads_by_the_size_of_the_chain_a_save_makes():
    memo = Memo(inline=1000)
    names = b"1" * 16
    memo.remember("small", names, 300)  # 2 records: 600 B inline; a save under it makes 3, 900 B
    assert (memo.above("small"), memo.marks("small"), memo.known("small")) == (b"", False, names)
    memo.remember("big", names, 400)  # 800 B inline; the save makes 1,200 B: listed, marked
    assert (memo.above("big"), memo.marks("big"), memo.known("big")) == (names, True, names)
    memo.remember("deep", names * (NAMES_MIN - 2), 1)  # a save under it makes NAMES_MIN: listed only
    assert (memo.above("deep"), memo.marks("deep")) == (names * (NAMES_MIN - 2), False)
    memo.remember("apart", names, 10, readable=False)  # its walk read the records apart
    assert memo.known("apart") is None

    memo.saved("small", "child", b"2" * 16, 250)  # one deeper, its own size
    assert (memo.known("child"), memo.marks("child")) == (b"2" * 16 + names, True)  # 4 x 300 B
    memo.saved("unknown", "orphan", b"3" * 16, 10)  # a parent it does not hold: nothing
    assert memo.known("orphan") is None

    memo.outgrown("small", 2_000)  # the engine refused: the thread holds a 2 KB record
    assert (memo.known("small"), memo.marks("small"), memo.above("small")) == (None, True, names)
    memo.forget("child")
    memo.forget("child")  # twice is harmless
    assert memo.known("child") is None and memo.held == sum(
        len(memo._chains[k][0]) for k in memo._chains)


async def test_a_deep_chain_keeps_one_list_at_its_tip_naming_every_ancestor(backend):
    store = make_store(backend, max_depth=200)
    ids = await turns(store, NAMES_MIN - 1)
    assert lists(await fields_of(backend, store, ids[0])) == {}  # shallower chains keep none
    ids += await turns(store, 20, ids[-1])
    assert lists(await fields_of(backend, store, ids[0])) == {ids[-1]: packed(ids[-2::-1])}
    snap = await store.resolve_chain(ids[-1])
    assert [s.id for s in snap.sessions] == ids and [s.request.input for s in snap.sessions] == [
        f"turn {i}" for i in range(NAMES_MIN - 1)] + [f"turn {i}" for i in range(20)]

    # a regeneration of turn 15: resolved, then saved beside the turn that was there;
    # the tip's list stays, the new branch keeps its own
    regen = await turns(store, 1, ids[15])
    assert lists(await fields_of(backend, store, ids[0])) == {ids[-1]: packed(ids[-2::-1]),
                                                              regen[0]: packed(ids[15::-1])}
    assert [s.id for s in (await store.resolve_chain(regen[0])).sessions] == ids[:16] + regen

    # deleting a tip deletes its list with it
    assert await store.delete(regen[0])
    assert regen[0] not in lists(await fields_of(backend, store, ids[0]))


async def test_a_save_without_a_resolve_carries_its_parents_list_on(backend):
    store = make_store(backend, max_depth=200)
    ids = await turns(store, NAMES_MIN)
    other = make_store(backend, max_depth=200)  # another worker: it remembers no chain
    for i in range(3):
        rid = await other.new_response_id(ids[-1])
        await other.save(record(rid, ids[-1], f"more {i}", payload=PAYLOAD))
        ids.append(rid)
    assert lists(await fields_of(backend, store, ids[0])) == {ids[-1]: packed(ids[-2::-1])}


async def test_chains_with_an_id_minted_elsewhere_keep_no_list(backend):
    store = make_store(backend, max_depth=200)
    ids = await turns(store, NAMES_MIN)
    await store.resolve_chain(ids[-1])
    await store.save(record("ext-x", ids[-1], "foreign", payload=PAYLOAD))  # a foreign id's list may name minted ones
    await store.resolve_chain("ext-x")
    rid = await store.new_response_id("ext-x")
    await store.save(record(rid, "ext-x", "after", payload=PAYLOAD))  # but none names a foreign one
    assert set(lists(await fields_of(backend, store, ids[0]))) == {"ext-x"}
    assert [s.id for s in (await store.resolve_chain(rid)).sessions] == ids + ["ext-x", rid]


async def reads_of(backend, store, rid: str) -> tuple[list[str], int, dict[str, int]]:
    """A resolve of ``rid``: the chain's ids, the round trips, and the reads the servers ran."""
    nodes = nodes_of(backend)
    try:
        before = {name: await calls_of(nodes, name) for name in ("hstrlen", "hget", "hmget", "evalsha")}
        trips = store.round_trips
        snap = await store.resolve_chain(rid)
        return ([s.id for s in snap.sessions], store.round_trips - trips,
                {name: await calls_of(nodes, name) - n for name, n in before.items()})
    finally:
        for node in nodes:
            await node.aclose()


async def test_a_tip_minted_under_a_deep_chain_is_resolved_by_two_hmgets_and_no_script(real_backend):
    """64 records: the tip's id, minted by the worker that had just resolved its parent,
    says it keeps a list (ids.marks_names): a plain HMGET reads m, w and the list, and one
    more the records. No script, no pointer read, no record sized."""
    store = make_store(real_backend, max_depth=200)
    ids = await turns(store, 64)
    assert [marks_names(rid, thread_tag(rid)) for rid in ids] == [False] * (NAMES_MIN - 1) + [True] * (
        64 - NAMES_MIN + 1)
    got, trips, reads = await reads_of(real_backend, make_store(real_backend, max_depth=200), ids[-1])
    assert got == ids and trips == 2 and reads == {"hstrlen": 0, "hget": 0, "hmget": 2, "evalsha": 0}


async def test_a_chain_of_big_records_keeps_a_list_from_its_third_record(backend):
    """Records of 5 KB do not come back inline past one: a reader needs a second round
    trip at any depth, so the chain keeps a list (the root and its first child have no
    ancestors to remember: the resolve of a two-record chain starts one) and the tips are
    marked, read by two HMGETs."""
    store = make_store(backend, max_depth=200)
    ids = await turns(store, 5, payload="y" * 5000)
    assert [marks_names(rid, thread_tag(rid)) for rid in ids] == [False, False, True, True, True]
    assert lists(await fields_of(backend, store, ids[0])) == {ids[-1]: packed(ids[-2::-1])}
    assert [s.id for s in (await store.resolve_chain(ids[-1])).sessions] == ids
    if backend.name != "fakeredis":
        got, trips, reads = await reads_of(backend, store, ids[-1])
        assert got == ids and trips == 2 and reads == {"hstrlen": 0, "hget": 0, "hmget": 2, "evalsha": 0}


async def test_a_deep_chain_of_tiny_records_keeps_a_list_but_comes_back_inline(real_backend):
    """Fifteen records of 0.2 KB fit in the walk's reply: the tip keeps its list (the walk
    would hand it over once the chain outgrows the budget) but is not marked, and its
    resolve is the walk's one round trip, the records inline."""
    store = make_store(real_backend, max_depth=200)
    ids = await turns(store, 15, payload="")
    assert not any(marks_names(rid, thread_tag(rid)) for rid in ids)
    assert set(lists(await fields_of(real_backend, store, ids[0]))) == {ids[-1]}
    got, trips, reads = await reads_of(real_backend, store, ids[-1])
    assert got == ids and trips == 1 and reads["evalsha"] == 1


async def test_an_unmarked_tip_gets_its_list_from_the_walk(real_backend):
    """A tip saved by a worker that had not resolved the chain keeps the list it carried
    on, but its id does not say so: the walk reads m, w and the list (its one HMGET) and
    replies with it; the records come in a second trip."""
    store = make_store(real_backend, max_depth=200)
    ids = await turns(store, 63)
    other = make_store(real_backend, max_depth=200)
    rid = await other.new_response_id(ids[-1])
    await other.save(record(rid, ids[-1], "unmarked", payload=PAYLOAD))
    assert not marks_names(rid, thread_tag(rid))
    got, trips, reads = await reads_of(real_backend, other, rid)
    assert got == ids + [rid] and trips == 2 and reads == {"hstrlen": 0, "hget": 0, "hmget": 2, "evalsha": 1}


async def test_a_marked_id_whose_list_moved_on_is_walked_one_trip_later(real_backend):
    """A regeneration of turn 40: its id's list moved on to turn 41 when that was saved.
    The plain HMGET finds none, and the walk follows (by the pointers: 41 records of 0.65 KB
    pass the inline budget, so their ids, then the records)."""
    store = make_store(real_backend, max_depth=200)
    ids = await turns(store, 64)
    assert marks_names(ids[40], thread_tag(ids[40]))
    got, trips, reads = await reads_of(real_backend, store, ids[40])
    assert got == ids[:41] and trips == 3 and reads["evalsha"] == 1


async def test_a_mark_without_a_list_costs_a_walk_never_a_wrong_chain(backend):
    """A mark is a hint: an id minted as marked (or marked by chance, once in 2**32) over
    a chain that keeps no list resolves as its pointers say, as do shallow and root ones."""
    store = make_store(backend, max_depth=200)
    ids = await turns(store, 3)
    rid = mint_named_id(thread_tag(ids[0]))
    await store.save(record(rid, ids[-1], "marked, no list", payload=PAYLOAD))
    assert marks_names(rid, thread_tag(rid)) and lists(await fields_of(backend, store, ids[0])) == {}
    assert [s.id for s in (await store.resolve_chain(rid)).sessions] == ids + [rid]
    with pytest.raises(SessionError) as err:
        await store.resolve_chain(mint_named_id(thread_tag(ids[0])))  # no record at all
    assert err.value.code.value == "session.chain.not_found"


async def test_a_sliding_read_of_a_marked_tip_goes_by_the_walk_which_slides(real_backend):
    """Only the walk gives the records their TTL again: a store with sliding_ttl does not
    take the plain HMGET, marked or not."""
    store = make_store(real_backend, max_depth=200, sliding_ttl=True, ttl_seconds=600)
    ids = await turns(store, 20)
    key = store.keys.thread(thread_tag(ids[0]))
    client = real_backend.client
    await client.pexpire(key, 60_000)
    got, trips, reads = await reads_of(real_backend, store, ids[-1])
    assert got == ids and reads["evalsha"] == 1 and await client.pttl(key) > 60_000


@pytest.mark.parametrize("edit", ["stale_m", "wrong_type"])
async def test_a_marked_read_that_cannot_use_the_list_answers_as_the_walk_does(redis_backend, edit):
    """m no longer current (another write's stamp in w): the list is not taken without
    the records' size, the walk goes on. A key of another type: the walk's own error."""
    store = make_store(redis_backend, max_depth=200)
    ids = await turns(store, 20)
    assert marks_names(ids[-1], thread_tag(ids[-1]))
    key = store.keys.thread(thread_tag(ids[0]))
    client = redis_backend.client
    if edit == "stale_m":
        await client.hset(key, "w", b"1")
        assert [s.id for s in (await store.resolve_chain(ids[-1])).sessions] == ids
        return
    await client.delete(key)
    await client.set(key, b"not a hash")
    for rid in (ids[-1], ids[5]):  # marked, and not
        with pytest.raises(SessionError) as err:
            await store.resolve_chain(rid)
        assert err.value.code.value == "session.record.corrupt" and "holds a Redis string" in err.value.message


def test_a_marked_id_is_an_id_minted_for_its_thread():
    thread = "0123456789abcdef"
    rid = mint_named_id(thread)
    assert thread_of(rid) == thread and marks_names(rid, thread) and not roots_thread(rid, thread)
    assert pack([rid], thread) is not None and len({mint_named_id(thread) for _ in range(100)}) == 100
    # the mark is the tag's second half where the random part starts, nothing else
    assert marks_names(f"resp_{thread}_{thread[8:]}{'0' * 24}", thread)
    assert not marks_names(f"resp_{thread}_{'0' * 24}{thread[8:]}", thread)
    assert not marks_names(f"resp_{thread}_{thread}{'0' * 16}", thread)  # a root of the thread
    assert not marks_names(mint_root_id(), thread)


async def test_a_list_left_stale_by_an_overwrite_costs_a_walk_never_a_wrong_chain(backend):
    """An overwrite moves turn 5 below a record of another branch: the tip's list still
    names turn 5's old ancestors. The reader finds that the records do not link up and
    walks the pointers; the next turn's save, after that resolve, mends the list."""
    store = make_store(backend, max_depth=200)
    ids = await turns(store, 30)
    side = await turns(store, 2, ids[1])
    await store.save(record(ids[5], side[-1], "turn 5", payload=PAYLOAD), overwrite=True)
    moved = ids[:2] + side + ids[5:]
    assert [s.id for s in (await store.resolve_chain(ids[-1])).sessions] == moved
    nxt = await turns(store, 1, ids[-1])
    assert lists(await fields_of(backend, store, ids[0]))[nxt[0]] == packed(moved[::-1])
    assert [s.id for s in (await store.resolve_chain(nxt[0])).sessions] == moved + nxt


@pytest.mark.parametrize("edit", ["cut", "garbage", "names_a_gone_record"])
async def test_a_hand_edited_list_is_read_past(redis_backend, edit):
    """Lists are hints: one cut short, one not made of whole names, one naming a record
    that is gone: the chain resolves as its pointers say (the last: missing there)."""
    store = make_store(redis_backend, max_depth=200)
    ids = await turns(store, 20)
    key = store.keys.thread(thread_tag(ids[0]))
    client = redis_backend.client
    if edit == "cut":
        await client.hset(key, f"n:{ids[-1]}", packed(ids[-2:5:-1]))
    elif edit == "garbage":
        await client.hset(key, f"n:{ids[-1]}", b"\x00" * 33)
    else:
        await client.hdel(key, f"d:{ids[7]}")
    if edit == "names_a_gone_record":
        with pytest.raises(SessionError) as err:
            await store.resolve_chain(ids[-1])
        assert err.value.code.value == "session.chain.not_found" and ids[7] in err.value.message
    else:
        assert [s.id for s in (await store.resolve_chain(ids[-1])).sessions] == ids


async def test_a_list_longer_than_max_depth_is_too_deep_as_the_chain_is(backend):
    store = make_store(backend, max_depth=200)
    ids = await turns(store, 30)
    with pytest.raises(SessionError) as err:
        await store.resolve_chain(ids[-1], max_depth=29)
    assert err.value.code.value == "session.chain.depth_exceeded"
    assert len((await store.resolve_chain(ids[-1], max_depth=30)).sessions) == 30


def test_the_memo_is_bounded_by_its_bytes_too():
    memo = Memo(entries=100, size=64)
    for i in range(10):
        memo.remember(f"r{i}", bytes(16), 10_000)  # records past the inline budget: every chain keeps a list
    assert memo.held == 64 and [memo.above(f"r{i}") != b"" for i in range(10)] == [False] * 6 + [True] * 4
    memo.remember("r9", bytes(32), 10_000)  # the same chain again, longer: counted once
    assert memo.held == 64 and memo.above("r6") == b""
