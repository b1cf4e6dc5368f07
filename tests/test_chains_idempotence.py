"""Exactly-once writes and refusals that write nothing, on every backend.

redis-py re-sends a script whose reply was lost after the server ran it. The
``Resending`` edge does the same on purpose: each chosen call runs, then
(optionally) someone else's calls run, then the same call with the same
arguments, operation token included, runs again and its answer is returned.
The re-sent copy must change nothing and answer what the first one did.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from chains import all_keys, build_chain, make_store, readable, record, resending
from redis_sessions import UNSET, ErrorCode, SessionError, new_response_id
from redis_sessions.ids import thread_of
from redis_sessions import tokens
from redis_sessions.edge import Refusal
from redis_sessions.responses.store import _SAVE, foreign_root_thread

OPS_FIELD = "ops"


async def send_save(store: Any, thread: str, args: list[Any]) -> Any:
    """One save script sent as the store sends it: its reply, or its refusal's word."""
    key = store.keys.thread(thread)
    try:
        return await store.edge.run(_SAVE, [key], args, where=key, write=True, own=("RSEXISTS",))
    except Refusal as refusal:
        return refusal.word

KINDS = pytest.mark.parametrize("kind", ["minted", "foreign"])


async def code_of(call: Any) -> ErrorCode:
    with pytest.raises(SessionError) as err:
        await call
    return err.value.code


def ids_for(kind: str, parent: str | None = None, n: int = 0) -> str:
    if kind == "minted":
        return new_response_id(parent) if parent and thread_of(parent) else new_response_id()
    return f"ext-{n}-{new_response_id()[-8:]}"


def thread_for(store: Any, rid: str, parent_thread: str | None = None) -> str:
    return thread_of(rid) or parent_thread or foreign_root_thread(rid)


async def set_deadline(backend: Any, store: Any, thread: str, ms: int) -> None:
    """Give a thread ``ms`` to live, behind the store's back (a re-sent save must not
    extend it: that would be a second write)."""
    await backend.client.pexpire(store.keys.thread(thread), ms)


# -- save -------------------------------------------------------------------------------
@KINDS
async def test_a_resent_save_succeeds_and_writes_once(backend, kind):
    store = make_store(backend)
    root = ids_for(kind)
    await store.save(record(root))
    rid = ids_for(kind, root, 1)
    thread = thread_for(store, root)

    async def shorten(name: str) -> None:
        if name == "chain_save":  # a second write would extend the thread's TTL again
            await set_deadline(backend, store, thread, 50_000)

    async def probe() -> dict[Any, Any]:
        # The parent's locator gets its new TTL concurrently with the point: leave it out.
        state = await all_keys(backend, store, deadlines=True)
        return {k: v for k, v in state.items() if k not in (("loc", root), store.keys.locator(root).encode())}

    wrapper = resending(store, {"chain_save", "SET"}, shorten, probe)
    await store.save(record(rid, root), expected_previous_response_id=root)
    assert wrapper.first["chain_save"] == [b"ok"]
    assert wrapper.changed["chain_save"] == [False]
    assert wrapper.changed.get("SET", []) == ([False] if kind == "foreign" else [])
    assert (await store.get(rid)) == record(rid, root)
    assert [s.id for s in (await store.resolve_chain(rid)).sessions] == [root, rid]


@KINDS
async def test_a_resent_save_has_no_second_effect_after_a_delete_or_an_overwrite(backend, kind):
    store, other = make_store(backend), make_store(backend)
    root = ids_for(kind)
    await store.save(record(root))
    rid = ids_for(kind, root, 1)

    async def delete_it(name: str) -> None:
        if name == "chain_save":  # by the script: a foreign id has no locator before its save returns
            assert await other._delete(thread_for(other, root), rid) == 1

    resending(store, {"chain_save"}, delete_it)
    await store.save(record(rid, root))  # the copy finds its token: done, nothing written
    assert await store.get(rid) is None and await other.get(rid) is None

    rid2 = ids_for(kind, root, 2)
    theirs = record(rid2, root, text="theirs")

    async def overwrite_it(name: str) -> None:
        if name == "chain_save":
            await other.save(theirs, overwrite=True)

    store2 = make_store(backend)
    resending(store2, {"chain_save"}, overwrite_it)
    await store2.save(record(rid2, root, text="mine"))
    assert await other.get(rid2) == theirs


@KINDS
async def test_saving_the_same_record_again_succeeds_and_writes_nothing(backend, kind):
    """A caller's own retry (a new call, a new token) after a timeout: the same
    bytes under the same parent are already there."""
    store = make_store(backend)
    root = ids_for(kind)
    await store.save(record(root))
    rid = ids_for(kind, root, 1)
    await store.save(record(rid, root))
    before = await all_keys(backend, store)
    await store.save(record(rid, root))
    await store.save(record(rid, root), expected_previous_response_id=root)
    await store.save(record(rid, root), overwrite=True)
    assert await all_keys(backend, store) == before
    # a wrong expectation is still refused, even for the same record
    assert await code_of(store.save(record(rid, root), expected_previous_response_id=None)) is ErrorCode.STORE_CONFLICT
    assert await code_of(store.save(record(root), expected_previous_response_id=root)) is ErrorCode.STORE_CONFLICT
    assert await all_keys(backend, store) == before


@KINDS
async def test_a_resent_save_after_someone_elses_record_is_a_conflict(backend, kind):
    store, other = make_store(backend), make_store(backend)
    root = ids_for(kind)
    await store.save(record(root))
    rid = ids_for(kind, root, 1)
    theirs = record(rid, root, text="theirs")
    await other.save(theirs)
    before = await all_keys(backend, store)
    wrapper = resending(store, {"chain_save"})
    assert await code_of(store.save(record(rid, root, text="mine"))) is ErrorCode.STORE_CONFLICT
    assert [refusal.word for refusal in wrapper.first["chain_save"]] == ["RSEXISTS"]
    assert await all_keys(backend, store) == before
    assert await store.get(rid) == theirs
    # the same script: one call, its arguments sent twice
    thread = thread_for(store, root)
    args = store._save_args(rid, root, None, False, store._check_save(record(rid, root, text="mine"), UNSET, False)[3], "")
    assert await send_save(store, thread, args) == "RSEXISTS"
    assert await send_save(store, thread, args) == "RSEXISTS"
    assert await all_keys(backend, store) == before


async def test_the_script_answers_a_resent_save_from_its_ring(backend):
    """The save script itself: one call's arguments (its token among them) sent twice
    write once, even after the record went, and another call (a new token) saves again."""
    store = make_store(backend)
    rid = new_response_id()
    thread = thread_of(rid)
    blob = store._check_save(record(rid), UNSET, False)[3]
    args = store._save_args(rid, None, None, False, blob, "")
    assert await send_save(store, thread, args) == b"ok"
    first = await all_keys(backend, store, deadlines=True)
    assert await send_save(store, thread, args) == b"ok"
    assert await all_keys(backend, store, deadlines=True) == first
    # and after the record is gone, the same arguments still write nothing
    assert await store.delete(rid) is True
    gone = await all_keys(backend, store)
    assert await send_save(store, thread, args) == b"ok"
    assert await all_keys(backend, store) == gone and await store.get(rid) is None
    # a new call (a new token) saves it again
    assert await send_save(store, thread, store._save_args(rid, None, None, False, blob, "")) == b"ok"
    assert await store.get(rid) == record(rid)


# -- delete -----------------------------------------------------------------------------
@KINDS
async def test_a_resent_delete_answers_true_and_deletes_nothing_more(backend, kind):
    store = make_store(backend)
    root = ids_for(kind)
    await store.save(record(root))
    rid = ids_for(kind, root, 1)
    await store.save(record(rid, root))
    wrapper = resending(store, {"chain_delete", "DEL"}, probe=lambda: all_keys(backend, store))
    assert await store.delete(rid) is True
    assert wrapper.first["chain_delete"] == [1]
    assert wrapper.changed["chain_delete"] == [False]
    assert wrapper.changed.get("DEL", []) == ([False] if kind == "foreign" else [])
    assert await store.get(rid) is None and (await store.get(root)) == record(root)
    assert await store.delete(rid) is False


@KINDS
async def test_a_resent_delete_spares_a_record_saved_in_between(backend, kind):
    store, other = make_store(backend), make_store(backend)
    root = ids_for(kind)
    await store.save(record(root))
    rid = ids_for(kind, root, 1)
    await store.save(record(rid, root))
    again = record(rid, root, text="saved again")

    async def save_again(name: str) -> None:
        if name == "chain_delete":
            await other.save(again)

    resending(store, {"chain_delete"}, save_again)
    assert await store.delete(rid) is True
    assert await other.get(rid) == again  # readable by id: the locator is in place too
    assert [s.id for s in (await other.resolve_chain(rid)).sessions] == [root, rid]

    # a delete that found nothing answers False twice, and spares what came in between
    missing = ids_for(kind, root, 2)
    late = record(missing, root, text="late")

    async def save_late(name: str) -> None:
        if name == "chain_delete":
            await other.save(late)

    if kind == "foreign":  # a foreign id with no locator is not found before any script runs
        await other.save(late)
        await other.delete(missing)
    store2 = make_store(backend)
    wrapper = resending(store2, {"chain_delete"}, save_late)
    if kind == "foreign":
        assert await store2.delete(missing) is False
        assert "chain_delete" not in wrapper.first
        return
    assert await store2.delete(missing) is False
    assert wrapper.first["chain_delete"] == [0]
    assert await other.get(missing) == late


@KINDS
async def test_a_resent_delete_of_a_threads_last_record_still_answers_true(backend, kind):
    store = make_store(backend, ttl_seconds=None)
    rid = ids_for(kind)
    await store.save(record(rid))
    wrapper = resending(store, {"chain_delete"})
    assert await store.delete(rid) is True
    assert wrapper.first["chain_delete"] == [1]
    assert await store.get(rid) is None
    # only the header and the ring are left, and they expire soon even though the store's TTL is None
    left = await all_keys(backend, store, deadlines=True)
    [(fields, deadline)] = [v for v in left.values() if isinstance(v[0], dict)]
    assert set(fields) in ({OPS_FIELD, "h"}, {OPS_FIELD.encode(), b"h"}) and deadline is not None
    # a later save of that id works, and takes the store's TTL (None) again
    await store.save(record(rid, text="again"))
    assert (await store.get(rid)).request.input == "again"
    [(fields, deadline)] = [v for v in (await all_keys(backend, store, deadlines=True)).values() if isinstance(v[0], dict)]
    assert deadline is None


async def test_the_ring_is_bounded(backend):
    """The shared ring (lua/tokens.lua): at most tokens.MAX_BYTES, however fast the thread
    is written; past it the oldest go, and the newest writes are always there."""
    store = make_store(backend)
    ids = await build_chain(store, 80)
    for rid in ids[1::2]:
        assert await store.delete(rid) is True
    state = await all_keys(backend, store)
    [fields] = [v for v in state.values() if isinstance(v, dict)]
    ring = fields.get(OPS_FIELD, fields.get(OPS_FIELD.encode()))
    assert 0 < len(ring) <= tokens.MAX_BYTES
    entries = ring.split(b"\n")[:-1]
    assert len(entries) >= tokens.MAX_BYTES * 3 // 4 // 29 - 1 and all(e[26:] in (b" S", b" D") for e in entries)
    assert entries[-1].endswith(b" D")  # the newest: the last delete


# -- refusals write nothing ---------------------------------------------------------------
def deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"k": value}
    return value


NESTED_FIELDS = {
    "metadata": lambda r, v: msgspec.structs.replace(r, metadata=v),
    "request.input": lambda r, v: msgspec.structs.replace(r, request=msgspec.structs.replace(r.request, input=[v])),
    "request.tools": lambda r, v: msgspec.structs.replace(r, request=msgspec.structs.replace(r.request, tools=[v])),
    "request.tool_choice": lambda r, v: msgspec.structs.replace(r, request=msgspec.structs.replace(r.request, tool_choice=v)),
    "request.reasoning": lambda r, v: msgspec.structs.replace(r, request=msgspec.structs.replace(r.request, reasoning=v)),
    "request.text": lambda r, v: msgspec.structs.replace(r, request=msgspec.structs.replace(r.request, text=v)),
    "response.output": lambda r, v: msgspec.structs.replace(r, response=msgspec.structs.replace(r.response, output=[v])),
    "response.usage": lambda r, v: msgspec.structs.replace(r, response=msgspec.structs.replace(r.response, usage=v)),
    "response.error": lambda r, v: msgspec.structs.replace(r, response=msgspec.structs.replace(r.response, error=v)),
    "response.incomplete_details": lambda r, v: msgspec.structs.replace(
        r, response=msgspec.structs.replace(r.response, incomplete_details=v)),
}


@pytest.mark.parametrize("where", list(NESTED_FIELDS))
async def test_a_record_nested_too_deeply_is_refused_and_writes_nothing(backend, where):
    store = make_store(backend, ttl_seconds=100)
    await store.save(record("ext-parent"))
    before = await all_keys(backend, store, deadlines=True)
    for levels, rid, parent in ((2_000, new_response_id(), None), (101, new_response_id(), None),
                                (2_000, "ext-child", "ext-parent"), (150, "ext-child", "ext-parent")):
        bad = NESTED_FIELDS[where](record(rid, parent), deep(levels))
        with pytest.raises(SessionError) as err:
            await store.save(bad)
        assert err.value.code is ErrorCode.INPUT_INVALID and where in err.value.message
    assert await all_keys(backend, store, deadlines=True) == before
    await store.save(NESTED_FIELDS[where](record(new_response_id()), deep(99)))  # at the limit: fine


BAD_SETTINGS = [
    {"max_depth": "5"}, {"max_depth": True}, {"max_depth": 0}, {"max_depth": 10**17}, {"max_depth": 2.5},
    {"ttl_seconds": "60"}, {"ttl_seconds": True}, {"ttl_seconds": float("inf")}, {"ttl_seconds": float("nan")},
    {"ttl_seconds": 10**17}, {"ttl_seconds": 0}, {"ttl_seconds": -1},
    {"max_record_bytes": "big"}, {"max_record_bytes": 10**17}, {"sliding_ttl": 1}, {"replay_instructions": "yes"},
]


@pytest.mark.parametrize("bad", BAD_SETTINGS, ids=repr)
async def test_a_bad_setting_is_refused_and_nothing_is_written(backend, bad):
    store = make_store(backend)
    await build_chain(store, 2)
    before = await all_keys(backend, store, deadlines=True)
    with pytest.raises(SessionError) as err:
        make_store(backend, **bad)
    assert err.value.code is ErrorCode.INPUT_INVALID
    assert await all_keys(backend, store, deadlines=True) == before


async def test_every_bad_argument_is_refused_before_the_first_command(backend):
    store = make_store(backend, ttl_seconds=100)
    await store.save(record("ext-a"))
    a = new_response_id()
    await store.save(record(a))
    child = new_response_id(a)
    before = await all_keys(backend, store, deadlines=True)
    trips = store.round_trips
    calls = [
        (store.save(record(child, a), overwrite="yes"), ErrorCode.INPUT_INVALID),  # type: ignore[arg-type]
        (store.save(record(child, a), overwrite=1), ErrorCode.INPUT_INVALID),  # type: ignore[arg-type]
        (store.save(record(child, a), expected_previous_response_id="br{ace"), ErrorCode.ID_INVALID),
        (store.save(record(child, a), expected_previous_response_id=None), ErrorCode.STORE_CONFLICT),
        (store.save(record("ext-b", "ext-a"), expected_previous_response_id="ext-x"), ErrorCode.STORE_CONFLICT),
        (store.save(msgspec.structs.replace(record(child, a), created_at="soon")), ErrorCode.INPUT_INVALID),
        (store.resolve_chain(a, max_depth="5"), ErrorCode.INPUT_INVALID),  # type: ignore[arg-type]
        (store.resolve_chain(a, max_depth=True), ErrorCode.INPUT_INVALID),  # type: ignore[arg-type]
        (store.resolve_chain("ext-a", include_incomplete="no"), ErrorCode.INPUT_INVALID),  # type: ignore[arg-type]
        (store.new_response_id(""), ErrorCode.ID_INVALID),
    ]
    for call, code in calls:
        assert await code_of(call) is code
    assert store.round_trips == trips
    assert await all_keys(backend, store, deadlines=True) == before


async def test_a_refused_save_under_a_foreign_parent_leaves_its_locator_alone(backend):
    """The parent's locator gets a new TTL only once the save has succeeded."""
    store = make_store(backend, ttl_seconds=100)
    await store.save(record("ext-p"))
    await store.save(record("ext-c", "ext-p"))
    backend.clock.advance(10)
    await backend.client.pexpire(store.keys.locator("ext-p"), 50_000)
    before = await all_keys(backend, store, deadlines=True)
    for bad in (record("ext-c", "ext-p", text="other"), record("ext-d", "ext-p", status=None)):  # type: ignore[arg-type]
        with pytest.raises(SessionError):
            await store.save(bad)
    assert await all_keys(backend, store, deadlines=True) == before
    await store.save(record("ext-d", "ext-p"))
    assert await all_keys(backend, store, deadlines=True) != before
    assert await readable(store, ["ext-p", "ext-c", "ext-d"]) == {
        "ext-p": record("ext-p"), "ext-c": record("ext-c", "ext-p"), "ext-d": record("ext-d", "ext-p")}


async def test_a_foreign_id_saved_into_another_thread_is_refused_before_any_write(backend):
    """Its locator is read first: the refusal writes nothing, not even a ring entry."""
    store = make_store(backend, ttl_seconds=100)
    a = new_response_id()
    await store.save(record(a))
    await store.save(record("ext-p"))
    await store.save(record("ext-x"))  # a foreign root, in its own thread
    await store.save(record("ext-y", "ext-p"))  # a foreign child, in its parent's
    before = await all_keys(backend, store, deadlines=True)
    for parent in (a, "ext-p"):  # under a minted parent, and under a foreign one
        assert await code_of(store.save(record("ext-x", parent))) is ErrorCode.STORE_CONFLICT
    assert await code_of(store.save(record("ext-y"))) is ErrorCode.STORE_CONFLICT  # as a root
    assert await all_keys(backend, store, deadlines=True) == before
    assert await store.get("ext-x") == record("ext-x")
