"""The response-chain store, one suite over memory, fakeredis, redis-server and a cluster."""

from __future__ import annotations

import asyncio

import fakeredis
import msgspec
import pytest

from chains import all_keys, build_chain, make_store, plant, record, stored
from redis_sessions import (
    ErrorCode,
    MemoryResponseSessionStore,
    RedisResponseSessionStore,
    ResponseSessionStore,
    SessionError,
    StoredResponseRequestSnapshot,
    new_response_id,
)
from redis_sessions.ids import thread_of
from redis_sessions.responses import request_input_items


async def test_save_then_get_returns_an_equal_record(backend):
    store = make_store(backend)
    rid = new_response_id()
    saved = record(rid, text="hi", instructions="be brief")
    await store.save(saved)
    assert await store.get(rid) == saved
    assert await store.get(new_response_id()) is None
    assert isinstance(store, ResponseSessionStore)


async def test_a_second_save_of_the_same_id_is_a_conflict_and_changes_nothing(backend):
    store = make_store(backend)
    rid = new_response_id()
    await store.save(record(rid, text="first"))
    before = await all_keys(backend, store)
    with pytest.raises(SessionError) as err:
        await store.save(record(rid, text="second"))
    assert err.value.code is ErrorCode.STORE_CONFLICT and err.value.http_status == 409
    assert await all_keys(backend, store) == before
    assert (await store.get(rid)).request.input == "first"


async def test_overwrite_replaces_the_record(backend):
    store = make_store(backend)
    rid = new_response_id()
    await store.save(record(rid, text="first", status="in_progress"))
    await store.save(record(rid, text="second"), overwrite=True)
    got = await store.get(rid)
    assert got.request.input == "second" and got.status == "completed"


async def test_a_missing_parent_refuses_the_save_and_writes_nothing(backend):
    store = make_store(backend)
    parent = new_response_id()
    child = new_response_id(parent)
    with pytest.raises(SessionError) as err:
        await store.save(record(child, parent))
    assert err.value.code is ErrorCode.CHAIN_NOT_FOUND and err.value.http_status == 404
    assert await all_keys(backend, store) == {}
    with pytest.raises(SessionError) as err:
        await store.save(record("foreign-child", "foreign-parent"))
    assert err.value.code is ErrorCode.CHAIN_NOT_FOUND
    assert await all_keys(backend, store) == {}


async def test_expected_previous_response_id_is_checked_atomically(backend):
    store = make_store(backend)
    root = new_response_id()
    await store.save(record(root), expected_previous_response_id=None)
    child = new_response_id(root)
    before = await all_keys(backend, store)
    # the caller expected a root, but the record continues `root`
    with pytest.raises(SessionError) as err:
        await store.save(record(child, root), expected_previous_response_id=None)
    assert err.value.code is ErrorCode.STORE_CONFLICT
    other = new_response_id(root)
    await store.save(record(other, root))
    with pytest.raises(SessionError) as err:
        await store.save(record(child, root), expected_previous_response_id=other)
    assert err.value.code is ErrorCode.STORE_CONFLICT
    assert await store.get(child) is None
    await store.save(record(child, root), expected_previous_response_id=root)
    assert (await store.get(child)).previous_response_id == root
    assert before != await all_keys(backend, store)


async def test_overwrite_with_an_expectation_compares_the_stored_parent(backend):
    store = make_store(backend)
    a, = await build_chain(store, 1)
    b = new_response_id(a)
    await store.save(record(b, a))
    c = new_response_id(a)
    await store.save(record(c, a))
    # re-parent b under c, expecting (wrongly) that b was a root
    with pytest.raises(SessionError) as err:
        await store.save(record(b, c), expected_previous_response_id=c, overwrite=True)
    assert err.value.code is ErrorCode.STORE_CONFLICT
    assert (await store.get(b)).previous_response_id == a


async def test_an_overwrite_that_would_make_a_cycle_is_refused(backend):
    store = make_store(backend)
    a, b, c = await build_chain(store, 3)
    with pytest.raises(SessionError) as err:
        await store.save(record(a, c), overwrite=True)
    assert err.value.code is ErrorCode.CHAIN_CYCLE_DETECTED
    assert (await store.get(a)).previous_response_id is None


async def test_an_overwrite_checks_a_bounded_number_of_parents(backend, monkeypatch):
    """The cycle check of an overwrite read up to 100,000 parent pointers in one script.
    It reads CYCLE_WALK_LIMIT at most now, and refuses a new parent deeper than
    that (it let such a move through unchecked), writing nothing."""
    from redis_sessions.responses import store as store_module

    monkeypatch.setattr(store_module, "CYCLE_WALK_LIMIT", 5)
    store = make_store(backend)
    ids = await build_chain(store, 8)
    loose = new_response_id(ids[0])
    await store.save(record(loose, ids[0]))
    before = await all_keys(backend, store)
    with pytest.raises(SessionError) as err:
        await store.save(record(loose, ids[-1]), overwrite=True)  # 8 deep: past the 5 reads
    assert err.value.code is ErrorCode.CHAIN_DEPTH_EXCEEDED and err.value.http_status == 422
    assert await all_keys(backend, store) == before
    with pytest.raises(SessionError) as err:
        await store.save(record(ids[0], ids[-1]), overwrite=True)
    assert err.value.code is ErrorCode.CHAIN_DEPTH_EXCEEDED


async def test_resolve_chain_rebuilds_the_input_items_oldest_first(backend):
    store = make_store(backend)
    a = new_response_id()
    await store.save(record(a, text="one", instructions="sys one"))
    b = new_response_id(a)
    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "two"}]},
             {"type": "function_call_output", "call_id": "c1", "output": "42"}]
    await store.save(record(b, a, input_items=items, instructions="sys two"))
    snap = await store.resolve_chain(b)
    assert snap.previous_response_id == b
    assert [s.id for s in snap.sessions] == [a, b]
    assert snap.input_items == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "one"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "re: one"}]},
        *items,
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "re: hello"}]},
    ]
    empty = await store.resolve_chain(None)
    assert empty.sessions == [] and empty.input_items == []


async def test_rebuilt_items_take_openai_input_items_shape_and_the_record_keeps_what_was_saved(backend):
    """Easy messages become message items whose content is a list of text parts (as
    OpenAI's input_items lists them); typed items pass through; the stored record
    keeps exactly what the caller saved."""
    store = make_store(backend)
    a = new_response_id()
    easy = [{"role": "user", "content": "plain"}, {"type": "message", "role": "developer", "content": "dev"},
            {"role": "assistant", "content": "said", "phase": "final_answer"},
            {"role": "user", "content": [{"type": "input_image", "image_url": "https://x/y.png"}]},
            {"role": "tool", "content": "unknown role: as is"}, {"type": "reasoning", "summary": []},
            {"type": "message", "role": "user", "content": ""}]
    saved = record(a, input_items=easy)
    await store.save(saved)
    assert (await store.get(a)) == saved
    assert (await store.resolve_chain(a)).input_items[:7] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "plain"}]},
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "dev"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "said"}],
         "phase": "final_answer"},
        {"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": "https://x/y.png"}]},
        {"role": "tool", "content": "unknown role: as is"}, {"type": "reasoning", "summary": []},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ""}]},
    ]
    assert request_input_items(easy) == (await store.resolve_chain(a)).input_items[:7]
    assert request_input_items("new turn") == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "new turn"}]}]
    assert request_input_items("") == [] and request_input_items([]) == []


async def test_records_saved_before_the_item_shape_changed_rebuild_in_it(backend):
    """The shape is made at rebuild time and never stored: records holding items in the
    shapes their callers saved resolve to the one shape."""
    store = make_store(backend, replay_instructions=True)
    thread = "0123456789abcdef"
    a, b = f"resp_{thread}_{'0' * 32}", f"resp_{thread}_{'0' * 31}1"
    await plant(backend, store, thread, {a: ("", stored(bytes.fromhex(OLD_RECORD_A))),
                                         b: (a, stored(bytes.fromhex(OLD_RECORD_B)))})
    assert [s.request.input for s in (await store.resolve_chain(b)).sessions] == [
        "one", [{"role": "user", "content": "two"}]]
    assert (await store.resolve_chain(b)).input_items == [
        {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "sys one"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "one"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "re: one"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "two"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "re: two"}]},
    ]


# Two records as the version before the rebuilt item shape (26e0a20) encoded them: a root
# with a string input and instructions, and a child with an easy-message input and output.
OLD_RECORD_A = (
    "89a26964d936726573705f303132333435363738396162636465665f303030303030303030303030303030303030303030303030"
    "3030303030303030b470726576696f75735f726573706f6e73655f6964c0af636f6e766572736174696f6e5f6964c0aa6372656174"
    "65645f6174ce6553f100ac636f6d706c657465645f6174c0a6737461747573a9636f6d706c65746564a77265717565737489a569"
    "6e707574a36f6e65ac696e737472756374696f6e73a7737973206f6e65a56d6f64656cc0a5746f6f6c73c0ab746f6f6c5f63686f"
    "696365c0b3706172616c6c656c5f746f6f6c5f63616c6c73c0a9726561736f6e696e67c0a474657874c0aa7472756e636174696f"
    "6ec0a8726573706f6e736586a26964a178a66f75747075749183a474797065a76d657373616765a4726f6c65a9617373697374616e"
    "74a7636f6e74656e749182a474797065ab6f75747075745f74657874a474657874a772653a206f6e65ab6f75747075745f746578"
    "74c0a57573616765c0a56572726f72c0b2696e636f6d706c6574655f64657461696c73c0a86d65746164617461c0"
)
OLD_RECORD_B = (
    "89a26964d936726573705f303132333435363738396162636465665f303030303030303030303030303030303030303030303030"
    "3030303030303031b470726576696f75735f726573706f6e73655f6964d936726573705f30313233343536373839616263646566"
    "5f3030303030303030303030303030303030303030303030303030303030303030af636f6e766572736174696f6e5f6964c0aa63"
    "7265617465645f6174ce6553f101ac636f6d706c657465645f6174c0a6737461747573a9636f6d706c65746564a7726571756573"
    "7489a5696e7075749182a4726f6c65a475736572a7636f6e74656e74a374776fac696e737472756374696f6e73c0a56d6f64656c"
    "c0a5746f6f6c73c0ab746f6f6c5f63686f696365c0b3706172616c6c656c5f746f6f6c5f63616c6c73c0a9726561736f6e696e67"
    "c0a474657874c0aa7472756e636174696f6ec0a8726573706f6e736586a26964a179a66f75747075749182a4726f6c65a96173"
    "73697374616e74a7636f6e74656e74a772653a2074776fab6f75747075745f74657874c0a57573616765c0a56572726f72c0b269"
    "6e636f6d706c6574655f64657461696c73c0a86d65746164617461c0"
)


async def test_replay_instructions_inserts_each_turns_instructions(backend):
    store = make_store(backend, replay_instructions=True)
    a = new_response_id()
    await store.save(record(a, text="one", instructions="sys one"))
    b = new_response_id(a)
    await store.save(record(b, a, text="two", instructions="sys two"))
    roles = [(i["role"], i["content"]) for i in (await store.resolve_chain(b)).input_items if i["role"] != "assistant"]
    assert roles == [("system", [{"type": "input_text", "text": "sys one"}]), ("user", [{"type": "input_text", "text": "one"}]),
                     ("system", [{"type": "input_text", "text": "sys two"}]), ("user", [{"type": "input_text", "text": "two"}])]


async def test_a_missing_ancestor_is_an_error_never_a_shorter_history(backend):
    store = make_store(backend)
    ids = await build_chain(store, 5)
    assert await store.delete(ids[2]) is True
    assert await store.delete(ids[2]) is False
    with pytest.raises(SessionError) as err:
        await store.resolve_chain(ids[4])
    assert err.value.code is ErrorCode.CHAIN_NOT_FOUND and ids[2] in err.value.message
    with pytest.raises(SessionError) as err:
        await store.resolve_chain(new_response_id())
    assert err.value.code is ErrorCode.CHAIN_NOT_FOUND
    with pytest.raises(SessionError) as err:
        await store.resolve_chain("never-saved-anywhere")
    assert err.value.code is ErrorCode.CHAIN_NOT_FOUND
    assert len((await store.resolve_chain(ids[1])).sessions) == 2


async def test_depth_limit_is_an_error(backend):
    store = make_store(backend, max_depth=4)
    ids = await build_chain(store, 6)
    assert len((await store.resolve_chain(ids[3])).sessions) == 4
    with pytest.raises(SessionError) as err:
        await store.resolve_chain(ids[4])
    assert err.value.code is ErrorCode.CHAIN_DEPTH_EXCEEDED
    assert len((await store.resolve_chain(ids[5], max_depth=6)).sessions) == 6
    before = await all_keys(backend, store, deadlines=True)
    with pytest.raises(SessionError) as err:
        await store.resolve_chain(ids[5], max_depth=0)  # GodeX: only the empty chain fits in 0
    assert err.value.code is ErrorCode.CHAIN_DEPTH_EXCEEDED and "max_depth=0" in err.value.message
    with pytest.raises(SessionError) as err:
        await store.resolve_chain(ids[0], max_depth=0)
    assert err.value.code is ErrorCode.CHAIN_DEPTH_EXCEEDED
    with pytest.raises(SessionError) as err:
        await store.resolve_chain(new_response_id(ids[0]), max_depth=0)  # missing: not found, as at any depth
    assert err.value.code is ErrorCode.CHAIN_NOT_FOUND
    with pytest.raises(SessionError) as err:
        await store.resolve_chain("never-saved", max_depth=0)
    assert err.value.code is ErrorCode.CHAIN_NOT_FOUND
    assert (await store.resolve_chain(None, max_depth=0)).sessions == []
    assert await all_keys(backend, store, deadlines=True) == before


async def test_a_turn_that_is_not_completed_is_unavailable_unless_asked_for(backend):
    store = make_store(backend)
    a = new_response_id()
    await store.save(record(a, status="incomplete"))
    b = new_response_id(a)
    await store.save(record(b, a))
    with pytest.raises(SessionError) as err:
        await store.resolve_chain(b)
    assert err.value.code is ErrorCode.CHAIN_UNAVAILABLE
    snap = await store.resolve_chain(b, include_incomplete=True)
    assert [s.status for s in snap.sessions] == ["incomplete", "completed"]


async def test_foreign_ids_work_through_a_locator(backend):
    store = make_store(backend)
    await store.save(record("ext-root", text="one"))
    await store.save(record("ext-child", "ext-root", text="two"))
    minted = await store.new_response_id("ext-child")
    assert thread_of(minted) is not None
    await store.save(record(minted, "ext-child", text="three"))
    await store.save(record("ext-leaf", minted, text="four"))
    snap = await store.resolve_chain("ext-leaf")
    assert [s.request.input for s in snap.sessions] == ["one", "two", "three", "four"]
    assert (await store.get("ext-child")).request.input == "two"
    assert await store.delete("ext-leaf") is True
    assert await store.get("ext-leaf") is None
    with pytest.raises(SessionError) as err:
        await store.save(record("ext-child", "ext-root"))
    assert err.value.code is ErrorCode.STORE_CONFLICT


async def test_an_id_minted_for_another_thread_is_refused(backend):
    store = make_store(backend)
    a, = await build_chain(store, 1)
    wrong = new_response_id()  # a fresh thread, not a's
    with pytest.raises(SessionError) as err:
        await store.save(record(wrong, a))
    assert err.value.code is ErrorCode.ID_INVALID
    await store.save(record("ext-p"))
    with pytest.raises(SessionError) as err:
        await store.save(record(new_response_id(), "ext-p"))
    assert err.value.code is ErrorCode.ID_INVALID
    assert await store.get(wrong) is None


async def test_round_trips_do_not_grow_with_depth(backend):
    store = make_store(backend, max_depth=200)
    ids = await build_chain(store, 150)
    for depth in (1, 10, 150):
        before = store.round_trips
        snap = await store.resolve_chain(ids[depth - 1])
        assert len(snap.sessions) == depth
        assert store.round_trips - before <= 2
    await store.save(record("ext-tail", ids[-1]))
    before = store.round_trips
    assert len((await store.resolve_chain("ext-tail")).sessions) == 151
    assert store.round_trips - before <= 3


async def test_a_root_minted_here_is_resolved_in_one_round_trip_and_its_record_decides(backend):
    """An id minted here names its thread, so a resolve of a root is one call; what its
    record says decides: an id saved under a parent has its whole chain returned."""
    store = make_store(backend)
    root = await store.new_response_id()
    child = await store.new_response_id(root)
    tag = thread_of(root)
    assert tag == thread_of(child) and len(root) == len(child) == 54
    with pytest.raises(SessionError) as err:
        await store.resolve_chain(root)
    assert err.value.code is ErrorCode.CHAIN_NOT_FOUND
    await store.save(record(root, text="first"))
    before = store.round_trips
    snap = await store.resolve_chain(root)
    assert store.round_trips - before == 1
    assert [s.id for s in snap.sessions] == [root]
    assert snap.input_items == (await store.resolve_chain(root, max_depth=1)).input_items
    assert snap.input_items[0]["content"][0]["text"] == "first"
    with pytest.raises(SessionError) as err:
        await store.resolve_chain(root, max_depth=0)
    assert err.value.code is ErrorCode.CHAIN_DEPTH_EXCEEDED
    # An id of this thread saved under the root: the record says it has a parent.
    lookalike = f"resp_{tag}_{tag}{'0' * 16}"
    await store.save(record(lookalike, root, "second"))
    assert [s.id for s in (await store.resolve_chain(lookalike)).sessions] == [root, lookalike]
    # An unfinished root is refused on the short path as on the walk.
    other = await store.new_response_id()
    await store.save(record(other, status="in_progress"))
    with pytest.raises(SessionError) as err:
        await store.resolve_chain(other)
    assert err.value.code is ErrorCode.CHAIN_UNAVAILABLE
    assert len((await store.resolve_chain(other, include_incomplete=True)).sessions) == 1


BAD_IDS = ["", "x" * 257, " lead", "in side", "tab\t", "new\nline", "nul\x00", "bell\x07", "br{ace", "br}ace", 42]


@pytest.mark.parametrize("bad", BAD_IDS, ids=lambda v: repr(v)[:12])
async def test_invalid_ids_are_refused_and_nothing_is_written(backend, bad):
    store = make_store(backend)
    good = new_response_id()
    await store.save(record(good))
    before = await all_keys(backend, store)
    calls = [
        store.get(bad),
        store.delete(bad),
        store.resolve_chain(bad),
        store.save(record(bad)),
        store.save(record(new_response_id(good), bad)),
        store.save(record(new_response_id(good), good), expected_previous_response_id=bad),
    ]
    for call in calls:
        with pytest.raises(SessionError) as err:
            await call
        assert err.value.code is ErrorCode.ID_INVALID and err.value.http_status == 400
    assert await all_keys(backend, store) == before
    assert len("x" * 256) == 256 and await store.get("x" * 256) is None


async def test_records_over_the_size_limit_are_refused(backend):
    store = make_store(backend, max_record_bytes=4096)
    rid = new_response_id()
    with pytest.raises(SessionError) as err:
        await store.save(record(rid, payload="x" * 5000))
    assert err.value.code is ErrorCode.RECORD_TOO_LARGE and err.value.http_status == 413
    assert await all_keys(backend, store) == {}
    await store.save(record(rid, payload="x" * 1000))


async def test_save_refuses_what_is_not_a_record(backend):
    store = make_store(backend)
    with pytest.raises(SessionError) as err:
        await store.save({"id": "x"})  # type: ignore[arg-type]
    assert err.value.code is ErrorCode.INPUT_INVALID
    rid = new_response_id()
    bad = record(rid, input_items=[{"type": "message", "content": object()}])
    with pytest.raises(SessionError) as err:
        await store.save(bad)
    assert err.value.code is ErrorCode.INPUT_INVALID
    assert await all_keys(backend, store) == {}


async def test_callers_cannot_mutate_stored_state(backend):
    store = make_store(backend)
    a = new_response_id()
    items = [{"type": "message", "role": "user", "content": "original"}]
    saved = record(a, input_items=items)
    await store.save(saved)
    items[0]["content"] = "changed after save"
    got = await store.get(a)
    assert got.request.input[0]["content"] == "original"
    got.request.input[0]["content"] = "changed after get"
    snap = await store.resolve_chain(a)
    snap.input_items[0]["content"] = "changed after resolve"
    assert (await store.get(a)).request.input[0]["content"] == "original"


async def test_unknown_fields_in_stored_data_are_ignored(backend):
    """A newer writer (rolling deploy) may add fields; this reader must still read."""
    store = make_store(backend)
    rid = new_response_id()
    newer = msgspec.to_builtins(record(rid))
    newer["a_field_from_the_future"] = {"x": 1}
    newer["request"]["another_new_one"] = [1, 2]
    await plant(backend, store, thread_of(rid), {rid: ("", stored(newer))})
    got = await store.get(rid)
    assert got == record(rid)
    assert StoredResponseRequestSnapshot.__struct_config__.forbid_unknown_fields is False


async def test_ttl_default_and_none(backend):
    default = make_store(backend)
    assert default.ttl_seconds == 30 * 24 * 3600
    forever = make_store(backend, ttl_seconds=None)
    rid = new_response_id()
    await forever.save(record(rid))
    assert await backend.client.pttl(forever.keys.thread(thread_of(rid))) == -1
    with pytest.raises(SessionError):
        make_store(backend, ttl_seconds=0)


async def test_a_record_with_wrong_field_types_is_refused_before_it_is_stored(backend):
    """msgspec does not check types when a Struct is built; the store must, or the
    record would be written and then fail to read back."""
    store = make_store(backend)
    rid = new_response_id()
    bad = msgspec.structs.replace(record(rid), created_at=1.5, status=None)
    with pytest.raises(SessionError) as err:
        await store.save(bad)
    assert err.value.code is ErrorCode.INPUT_INVALID and "created_at" in err.value.message
    assert await all_keys(backend, store) == {}


# -- the memory store's constructor sessions and clear() (GodeX's MemoryResponseSessionStore) --
def test_constructor_sessions_are_saved_parents_first_whatever_the_order_given():
    a = new_response_id()
    b, c = new_response_id(a), new_response_id(a)
    d = new_response_id(b)
    given = [record(d, b), record("ext-child", "ext-root"), record(c, a), record(b, a), record(a),
             record("ext-root"), record("ext-grandchild", "ext-child")]
    store = MemoryResponseSessionStore(given, replay_instructions=True)
    assert {s.id: asyncio.run(store.get(s.id)) for s in given} == {s.id: s for s in given}
    assert [s.id for s in asyncio.run(store.resolve_chain(d)).sessions] == [a, b, d]
    assert [s.id for s in asyncio.run(store.resolve_chain("ext-grandchild")).sessions] == [
        "ext-root", "ext-child", "ext-grandchild"]
    assert MemoryResponseSessionStore().round_trips == 0 and MemoryResponseSessionStore([]).round_trips == 0


@pytest.mark.parametrize("given, code", [
    ([record("ext-a", "ext-b"), record("ext-b", "ext-a")], ErrorCode.CHAIN_CYCLE_DETECTED),
    ([record("ext-a", "ext-a")], ErrorCode.CHAIN_CYCLE_DETECTED),
    ([record("ext-a"), record("ext-b", "ext-missing")], ErrorCode.CHAIN_NOT_FOUND),
    ([record("ext-a", text="one"), record("ext-a", text="two")], ErrorCode.STORE_CONFLICT),
    ([record("br{ace")], ErrorCode.ID_INVALID),
    ([record("ext-a", "")], ErrorCode.ID_INVALID),
    ([record("ext-a"), {"id": "ext-b"}], ErrorCode.INPUT_INVALID),
    ([record("ext-a", payload="x" * 2_000_000)], ErrorCode.RECORD_TOO_LARGE),
    (record("ext-a"), ErrorCode.INPUT_INVALID),
    ("ext-a", ErrorCode.INPUT_INVALID),
    ({"ext-a": record("ext-a")}, ErrorCode.INPUT_INVALID),
    (42, ErrorCode.INPUT_INVALID),
], ids=["loop", "own-parent", "parent-not-given", "two-records-one-id", "bad-id", "bad-parent", "not-a-record",
        "too-large", "one-record", "a-string", "a-mapping", "not-iterable"])
def test_constructor_sessions_are_refused_as_save_refuses_them(given, code):
    with pytest.raises(SessionError) as err:
        MemoryResponseSessionStore(given)
    assert err.value.code is code


def test_constructor_sessions_the_same_record_twice_is_one_save():
    store = MemoryResponseSessionStore([record("ext-a"), record("ext-b", "ext-a"), record("ext-a")])
    assert asyncio.run(store.get("ext-a")) == record("ext-a")


async def test_constructor_sessions_inside_a_running_loop_and_on_the_clock(clocked):
    """A constructor called from async code (a running loop) saves without awaiting;
    the records get the store's TTL from the server's clock, as save gives them."""
    store = MemoryResponseSessionStore((s for s in [record("ext-b", "ext-a"), record("ext-a")]), ttl_seconds=10,
                                       server=clocked.server)
    assert len((await store.resolve_chain("ext-b")).sessions) == 2
    clocked.clock.advance(10.001)
    assert await store.get("ext-a") is None and await store.get("ext-b") is None


async def test_clear_forgets_everything_and_the_store_goes_on():
    a = new_response_id()
    store = MemoryResponseSessionStore([record(a), record("ext-a")])
    await store.save(record(new_response_id(a), a))
    assert store.clear() is None
    assert fakeredis.FakeRedis(server=store.server).dbsize() == 0
    assert await store.get(a) is None and await store.get("ext-a") is None
    with pytest.raises(SessionError) as err:
        await store.resolve_chain(a)
    assert err.value.code is ErrorCode.CHAIN_NOT_FOUND
    store.clear()  # idempotent
    await store.save(record(a))
    assert await store.get(a) == record(a)
    assert not hasattr(RedisResponseSessionStore, "clear")  # memory only: on Redis, `redis-sessions purge`
