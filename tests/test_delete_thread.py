"""delete_thread: a whole conversation at once, on every backend."""

from __future__ import annotations

import pytest

from chains import all_keys, build_chain, make_store, record
from redis_sessions import ErrorCode, SessionError


async def tree(store):
    """A conversation with a foreign root, minted and foreign descendants, a regenerated
    branch: 7 responses in one thread. Returns (every id, one id from the middle)."""
    await store.save(record("ext-root"))
    main = await build_chain(store, 3, first_parent="ext-root")
    await store.save(record("ext-branch", main[0]))
    await store.save(record("ext-leaf", main[-1]))
    regen = await store.new_response_id(main[1])
    await store.save(record(regen, main[1]))
    return ["ext-root", *main, "ext-branch", "ext-leaf", regen], main[1]


async def test_delete_thread_removes_every_response_of_the_conversation_and_nothing_else(backend):
    store = make_store(backend)
    other = await build_chain(store, 2)
    await store.save(record("ext-other", other[-1]))
    before = await all_keys(backend, store)
    ids, middle = await tree(store)
    assert await store.delete_thread(middle) == len(ids)
    for rid in ids:
        assert await store.get(rid) is None
        with pytest.raises(SessionError) as err:
            await store.resolve_chain(rid)
        assert err.value.code == ErrorCode.CHAIN_NOT_FOUND
    # the other conversation, and only it, is left: no locator of the deleted one survives
    assert await all_keys(backend, store) == before
    assert [s.id for s in (await store.resolve_chain("ext-other")).sessions] == [*other, "ext-other"]


async def test_delete_thread_of_an_unknown_or_deleted_conversation_is_zero(backend):
    store = make_store(backend)
    assert await store.delete_thread("ext-nothing") == 0
    ids, middle = await tree(store)
    assert await store.delete_thread(ids[-1]) == len(ids)
    assert await store.delete_thread(middle) == 0  # a retry finds nothing left
    with pytest.raises(SessionError) as err:
        await store.save(record("ext-late", middle))  # a save under a deleted parent is refused
    assert err.value.code == ErrorCode.CHAIN_NOT_FOUND
    assert await store.get("ext-late") is None


async def test_delete_thread_pages_through_a_long_conversation(backend):
    store = make_store(backend, max_depth=1000)
    await store.save(record("ext-0"))
    ids = ["ext-0"] + await build_chain(store, 150, first_parent="ext-0")
    for i in range(1, 60):  # foreign ids too, so that their 60 locators must go
        await store.save(record(f"ext-{i}", ids[-1]))
        ids.append(f"ext-{i}")
    before = store.round_trips
    assert await store.delete_thread("ext-0") == len(ids)
    assert store.round_trips - before > 3  # several HSCAN pages, each one bounded
    assert await all_keys(backend, store) == {}


async def test_delete_thread_refuses_a_bad_id(backend):
    store = make_store(backend)
    with pytest.raises(SessionError) as err:
        await store.delete_thread("bad id")
    assert err.value.code == ErrorCode.ID_INVALID
