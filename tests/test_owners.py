"""Owner-bound ids (docs/guarantees.md#owners): a response, a thread and a conversation
saved with an owner are, to any other owner, an unknown id, on every store method; the
check is made by the script that reads or writes, so nothing of theirs is touched.

Every test runs on fakeredis, a real redis-server and a real cluster, on both APIs."""

from __future__ import annotations

from typing import Any

import pytest

from chains import all_keys, linear, make_store, record
from redis_sessions import SessionError
from redis_sessions.errors import ErrorCode
from redis_sessions.ids import thread_of
from test_conversations import make_store as make_conversations
from test_conversations import msg

A, B = "project-a", "key:9f86d081884c7d65"


async def outcome(call: Any) -> Any:
    """What a call answers, as a value to compare: its result, or its error's code and status."""
    try:
        return ("ok", await call)
    except SessionError as exc:
        return ("error", exc.code, exc.http_status)


async def chain_of(store: Any, owner: str | None, n: int = 3) -> list[str]:
    """``n`` responses with minted ids, each the child of the one before, saved by ``owner``."""
    ids: list[str] = []
    parent = None
    for i in range(n):
        rid = await store.new_response_id(parent, owner=owner)
        await store.save(record(rid, parent, f"turn {i}"), owner=owner)
        ids.append(rid)
        parent = rid
    return ids


async def test_another_owners_responses_are_unknown_ids_to_every_method(backend):
    store = make_store(backend)
    mine = await chain_of(store, A)
    foreign = await linear(store, 3, prefix="ext")  # ids minted elsewhere, without an owner
    await store.save(record("own-0", None, "x"), owner=A)
    await store.save(record("own-1", "own-0", "y"), owner=A)
    unknown_minted = await store.new_response_id(None)
    before = await all_keys(backend, store, deadlines=True)
    for theirs, unknown in ((mine[-1], unknown_minted), ("own-1", "never-saved")):
        calls = {
            "get": lambda rid: store.get(rid, owner=B),
            "resolve_chain": lambda rid: store.resolve_chain(rid, owner=B),
            "delete": lambda rid: store.delete(rid, owner=B),
            "delete_thread": lambda rid: store.delete_thread(rid, owner=B),
            "child": lambda rid: store.save(record(f"child-of-{rid}", rid, "mine"), owner=B),
        }
        for name, call in calls.items():
            got, expected = await outcome(call(theirs)), await outcome(call(unknown))
            assert got == expected, (name, theirs)
    # a continuation id from a parent minted elsewhere: not found, as for an unknown one
    assert await outcome(store.new_response_id("own-1", owner=B)) == await outcome(
        store.new_response_id("never-saved", owner=B))
    assert (await outcome(store.new_response_id("own-1", owner=B)))[1] == ErrorCode.CHAIN_NOT_FOUND
    # a root saved into a thread of another owner (an id it did not mint) is refused
    intruder = f"resp_{thread_of(mine[0])}_{'0' * 32}"
    assert await outcome(store.save(record(intruder, None, "root"), owner=B)) == ("error", ErrorCode.STORE_CONFLICT, 409)
    assert await all_keys(backend, store, deadlines=True) == before  # nothing of A's was touched
    # the owner sees all of it, and a call without an owner sees everything, as before owners
    assert [s.id for s in (await store.resolve_chain(mine[-1], owner=A)).sessions] == mine
    assert [s.id for s in (await store.resolve_chain("own-1", owner=A)).sessions] == ["own-0", "own-1"]
    assert (await store.get(mine[1])).id == mine[1]
    assert [s.id for s in (await store.resolve_chain(foreign[-1])).sessions] == foreign
    # and an owner does not see what was saved without one
    assert await store.get(foreign[0], owner=A) is None


async def test_the_owner_continues_reads_and_deletes_its_own(backend):
    store = make_store(backend)
    ids = await chain_of(store, A, 4)
    child = await store.new_response_id(ids[-1], owner=A)
    await store.save(record(child, ids[-1], "more"), owner=A)
    assert [s.id for s in (await store.resolve_chain(child, owner=A)).sessions] == [*ids, child]
    assert await store.delete(child, owner=A) is True
    assert await store.get(child, owner=A) is None
    assert await store.delete_thread(ids[0], owner=A) == 4
    assert await store.get(ids[0]) is None


async def test_a_save_without_an_owner_joins_the_owners_thread(backend):
    """An operator's call (no owner) sees and continues every thread: what it adds to an
    owner's thread is that owner's, since the thread is the unit of ownership."""
    store = make_store(backend)
    ids = await chain_of(store, A, 2)
    child = await store.new_response_id(ids[-1])
    await store.save(record(child, ids[-1], "operator"))
    assert [s.id for s in (await store.resolve_chain(child, owner=A)).sessions] == [*ids, child]
    assert await store.get(child, owner=B) is None


async def test_an_owned_thread_is_in_data_format_2_and_names_its_owner(backend):
    store = make_store(backend)
    owned, plain = (await chain_of(store, A, 1))[0], (await chain_of(store, None, 1))[0]
    heads = [await backend.client.hget(store.keys.thread(thread_of(rid)), "h") for rid in (owned, plain)]
    assert heads[0].startswith(b"2 ") and heads[0].endswith(b" " + A.encode())
    assert heads[1].startswith(b"1 ") and len(heads[1].split()) == 5


async def test_long_chains_and_sliding_reads_check_the_owner_too(backend):
    """Past the walk's inline budget the records come back by HMGET, and past 256
    pointers the walk goes on in another call; with a sliding TTL a get is a walk."""
    store = make_store(backend, sliding_ttl=True, max_depth=400)
    ids = await linear(store, 300, prefix="long", payloads=["p" * (40 if i % 2 else 400) for i in range(300)])
    owned = await linear(store, 20, "z" * 600, prefix="big")
    for rid in (ids[-1], owned[-1]):
        assert len((await store.resolve_chain(rid)).sessions) in (300, 20)
    mine = []
    parent = None
    for i in range(300):
        rid = f"mine-{i}"
        await store.save(record(rid, parent, "t", payload="q" * 60), owner=A)
        mine.append(rid)
        parent = rid
    assert [s.id for s in (await store.resolve_chain(mine[-1], owner=A)).sessions] == mine
    assert (await outcome(store.resolve_chain(mine[-1], owner=B)))[1] == ErrorCode.CHAIN_NOT_FOUND
    assert (await store.get(mine[-1], owner=A)).id == mine[-1]
    assert await store.get(mine[-1], owner=B) is None


async def test_a_thread_replaced_by_another_owner_between_walk_and_read_is_not_read(redis_backend):
    """The walk saw the owner's thread; before its records are read, the thread is deleted
    and another owner saves records under the same ids (a foreign root's thread is derived
    from its id). The read checks the owner again: the caller gets not-found, never the
    other owner's records."""
    store = make_store(redis_backend, max_depth=100)
    big = "b" * 3000
    ids = [f"swap-{i}" for i in range(4)]
    for i, rid in enumerate(ids):
        await store.save(record(rid, ids[i - 1] if i else None, f"a{i}", payload=big), owner=A)
    read, swapped = store._read, []

    async def swap(key: str, rids: list[str], size: int, who: str) -> list[Any]:
        if not swapped:
            swapped.append(True)
            assert await store.delete_thread(ids[0], owner=A) == 4
            for i, rid in enumerate(ids):
                await store.save(record(rid, ids[i - 1] if i else None, f"b{i}", payload=big), owner=B)
        return await read(key, rids, size, who)

    store._read = swap
    assert (await outcome(store.resolve_chain(ids[-1], owner=A)))[1] == ErrorCode.CHAIN_NOT_FOUND
    assert swapped and (await store.get(ids[-1], owner=B)).request.input == "b3"


@pytest.mark.parametrize("owner", ["", "two words", "x" * 129, "é", 7, b"bytes"])
async def test_a_bad_owner_is_input_invalid_and_never_echoed(backend, owner):
    store = make_store(backend)
    before = await all_keys(backend, store)
    rid = await store.new_response_id(None)
    for call in (store.get(rid, owner=owner), store.save(record(rid), owner=owner),
                 store.resolve_chain(rid, owner=owner), store.delete(rid, owner=owner)):
        with pytest.raises(SessionError) as err:
            await call
        assert err.value.code == ErrorCode.INPUT_INVALID and err.value.http_status == 400
        assert not owner or str(owner) not in err.value.message
    assert await all_keys(backend, store) == before


async def test_another_owners_conversation_is_not_found_by_every_method(backend):
    conversations = make_conversations(backend)
    conv = await conversations.create([msg("hello", id="msg_1")], {"topic": "t"}, owner=A)
    key = conversations.keys.conversation(conv.id)
    before = await backend.client.hgetall(key)
    calls = {
        "get": lambda cid: conversations.get(cid, owner=B),
        "update": lambda cid: conversations.update(cid, {"k": "v"}, owner=B),
        "add_items": lambda cid: conversations.add_items(cid, [msg("more")], owner=B),
        "list_items": lambda cid: conversations.list_items(cid, owner=B),
        "history": lambda cid: conversations.history(cid, owner=B),
        "get_item": lambda cid: conversations.get_item(cid, "msg_1", owner=B),
        "delete_item": lambda cid: conversations.delete_item(cid, "msg_1", owner=B),
        "delete": lambda cid: conversations.delete(cid, owner=B),
    }
    unknown = "conv_" + "0" * 48
    for name, call in calls.items():
        got = await outcome(call(conv.id))
        assert got == await outcome(call(unknown)) == ("error", ErrorCode.CONVERSATION_NOT_FOUND, 404), name
    assert await backend.client.hgetall(key) == before
    assert [i["id"] for i in (await conversations.list_items(conv.id, owner=A)).data] == ["msg_1"]
    assert (await conversations.get(conv.id)).metadata == {"topic": "t"}  # no owner: today's behaviour
    assert (await backend.client.hget(key, "h")).endswith(b" " + A.encode())


async def test_a_response_cannot_join_another_owners_conversation(backend):
    conversations = make_conversations(backend)
    store = make_store(backend, conversations=conversations, compression=False)
    conv = await conversations.create([msg("hello")], owner=A)
    rid = await store.new_response_id(conversation_id=conv.id, owner=B)
    session = record(rid, None, "intrude")
    session = type(session)(**{**{f: getattr(session, f) for f in session.__struct_fields__}, "conversation_id": conv.id})
    before = await all_keys(backend, store, deadlines=True)
    assert await outcome(store.save(session, owner=B)) == ("error", ErrorCode.CONVERSATION_NOT_FOUND, 404)
    assert await all_keys(backend, store, deadlines=True) == before
    await store.save(session, owner=A)
    assert [s.id for s in (await store.resolve_chain(rid, owner=A)).sessions] == [rid]
    assert await store.get(rid, owner=B) is None
    assert len((await conversations.list_items(conv.id, owner=A)).data) == 3  # hello, then the turn's two
