"""Threads stop growing (#9): each response expires on its own once no live response
descends from it; every ancestor of a live response stays. On the fake clock (memory
mode, fakeredis); on real servers, with the server's TIME, in tests/test_real_expiry.py."""

from __future__ import annotations

from pathlib import Path

from typing import Any

import pytest

from chains import all_keys, make_store, record
from redis_sessions import ErrorCode, SessionError
from redis_sessions.ids import thread_of
from redis_sessions.responses import books

TTL = 30


async def save(store: Any, name: str, parent: str | None) -> str:
    """Save a new response under ``parent`` with an id minted here (no locator: readable
    by id for as long as it is in its thread); ``name`` is its text."""
    rid = await store.new_response_id(parent)
    await store.save(record(rid, parent, name))
    return rid


async def fields_of(backend: Any, store: Any, rid: str) -> dict[str, Any]:
    """The thread hash holding ``rid``, fields as str."""
    for key, value in (await all_keys(backend, store)).items():
        if isinstance(value, dict) and any(f in (f"d:{rid}", f"d:{rid}".encode()) for f in value):
            return {(k.decode() if isinstance(k, bytes) else k): v for k, v in value.items()}
    return {}


async def resolvable_whenever_readable(store: Any, ids: list[str]) -> None:
    """The promise: a response that reads by id resolves, its whole chain."""
    for rid in ids:
        if await store.get(rid) is not None:
            chain = (await store.resolve_chain(rid, max_depth=1000, include_incomplete=True)).sessions
            assert chain[-1].id == rid and chain[0].previous_response_id is None


async def test_an_abandoned_regeneration_goes_and_the_conversation_stays(clocked: Any) -> None:
    store = make_store(clocked, ttl_seconds=TTL)
    root = await save(store, "ext-root", None)
    regen = await save(store, "ext-regen", root)
    turn = await save(store, "ext-turn", root)
    clocked.clock.advance(TTL * 0.6)
    later = await save(store, "ext-later", turn)
    clocked.clock.advance(TTL * 0.6)  # the regeneration is past its deadline; the conversation lives on
    assert await store.get(regen) is not None  # nothing removes it until a save of its thread
    last = await save(store, "ext-last", later)
    assert await store.get(regen) is None
    chain = (await store.resolve_chain(last)).sessions
    assert [s.id for s in chain] == [root, turn, later, last]
    await resolvable_whenever_readable(store, [root, regen, turn, later, last])


async def test_a_long_conversation_keeps_every_ancestor(clocked: Any) -> None:
    """A year of one turn and one regeneration a day, TTL 30 days: the regenerations go
    once 30 days have passed; the turns, all ancestors of the newest, stay."""
    store = make_store(clocked, ttl_seconds=30 * 86400, max_depth=1000)
    parent, turns, regens_saved = None, [], []
    for day in range(120):
        regens_saved.append(await save(store, f"regen {day}", parent))
        parent = await save(store, f"turn {day}", parent)
        turns.append(parent)
        clocked.clock.advance(86400)
    fields = await fields_of(clocked, store, parent)
    kept = sorted(f[2:] for f in fields if f.startswith("d:"))
    assert sorted(k for k in kept if k in turns) == sorted(turns)
    regens = [k for k in kept if k in regens_saved]
    assert 29 <= len(regens) <= 31 + books.PRUNE  # the last 30 days' worth, give or take a day
    assert books.number(fields["c"]) == len(kept)
    assert len((await store.resolve_chain(parent, max_depth=1000)).sessions) == 120


async def test_a_sliding_read_keeps_what_it_read(clocked: Any) -> None:
    store = make_store(clocked, ttl_seconds=TTL, sliding_ttl=True)
    root = await save(store, "ext-root", None)
    kept_leaf = await save(store, "ext-read", root)
    interior = await save(store, "ext-mid", root)
    child = await save(store, "ext-child", interior)
    clocked.clock.advance(TTL * 0.8)
    await store.resolve_chain(kept_leaf)  # a leaf read through: its own deadline moves
    await store.resolve_chain(interior)  # a record with a child: kept for when the child goes
    clocked.clock.advance(TTL * 0.8)
    other = await save(store, "ext-other", root)  # the child is past its deadline now
    looks = make_store(clocked, ttl_seconds=TTL)  # reads that slide nothing
    assert await looks.get(child) is None
    assert await looks.get(kept_leaf) is not None and await looks.get(interior) is not None
    clocked.clock.advance(TTL * 0.8)
    await save(store, "ext-other2", other)  # and past the read's deadline, both go
    assert await looks.get(kept_leaf) is None and await looks.get(interior) is None
    await resolvable_whenever_readable(looks, [root, kept_leaf, interior, child, other])


async def test_deleting_a_leaf_leaves_its_parent_needed_from_now(clocked: Any) -> None:
    store = make_store(clocked, ttl_seconds=TTL)
    root = await save(store, "ext-root", None)
    turn = await save(store, "ext-turn", root)
    clocked.clock.advance(TTL * 0.9)
    answer = await save(store, "ext-answer", turn)
    assert await store.delete(answer) is True  # the user deletes the last answer to regenerate it later
    clocked.clock.advance(TTL * 0.5)
    await save(store, "ext-side", root)  # another save of the thread: removes what is due
    assert await store.get(turn) is not None  # needed until TTL after its child went
    await resolvable_whenever_readable(store, [root, turn, answer])


async def test_removal_is_bounded_per_save(clocked: Any) -> None:
    store = make_store(clocked, ttl_seconds=TTL)
    root = await save(store, "root", None)
    leaves = [await save(store, f"leaf {i}", root) for i in range(3 * books.PRUNE)]
    clocked.clock.advance(TTL * 0.6)
    keeper = await save(store, "keeper", root)  # keeps the thread alive
    clocked.clock.advance(TTL * 0.6)  # every leaf is past its deadline now
    last = await save(store, "k0", keeper)
    gone = [rid for rid in leaves if await store.get(rid) is None]
    assert len(gone) == books.PRUNE
    for i in range(2):
        last = await save(store, f"k{i + 1}", last)
    assert all([await store.get(rid) is None for rid in leaves])
    assert await store.get(root) is not None
    assert [s.request.input for s in (await store.resolve_chain(last)).sessions] == ["root", "keeper", "k0", "k1", "k2"]


async def test_leaves_past_the_index_are_queued_and_go_too(clocked: Any) -> None:
    """The index L holds LEAVES_MAX leaves at most (short ids would fit far more in its
    bytes); the others queue, and go once past their deadline all the same, the one a
    sliding read needed again excepted."""
    store = make_store(clocked, ttl_seconds=TTL)
    sliding = make_store(clocked, ttl_seconds=TTL, sliding_ttl=True)
    root = await save(store, "root", None)
    leaves = []
    for i in range(books.LEAVES_MAX + 44):
        await store.save(record(f"x{i}", root, "leaf"))
        leaves.append(f"x{i}")
    fields = await fields_of(clocked, store, root)
    assert fields["L"].count(b"\n") == books.LEAVES_MAX
    queued = [rid for rid in leaves if f"o:{rid}" in fields]
    assert len(queued) == 44
    clocked.clock.advance(TTL * 0.6)
    keeper = await save(store, "keeper", root)
    assert await sliding.get(queued[5]) is not None  # needed again: another TTL from now
    clocked.clock.advance(TTL * 0.6)
    last = keeper
    for i in range(len(leaves) // books.PRUNE + 4):
        last = await save(store, f"k{i}", last)
    kept = [rid for rid in leaves if await store.get(rid) is not None]
    assert kept == [queued[5]]
    clocked.clock.advance(TTL * 0.6)
    await save(store, "end", last)
    assert await store.get(queued[5]) is None
    fields = await fields_of(clocked, store, root)
    assert not [f for f in fields if f.startswith("o:")] and "O" not in fields
    await resolvable_whenever_readable(store, [root, keeper, last])


async def test_a_store_without_response_expiry_keeps_the_thread_whole(clocked: Any) -> None:
    """response_expiry=False (and versions before it): nothing is removed but by the
    thread's TTL. A thread written by such a store stops being trimmed for good, even by
    stores that trim: its books no longer match what is in it."""
    trims, keeps = make_store(clocked, ttl_seconds=TTL), make_store(clocked, ttl_seconds=TTL, response_expiry=False)
    root = await save(trims, "ext-root", None)
    regen = await save(trims, "ext-regen", root)
    turn = await save(keeps, "ext-turn", root)  # written past the books
    clocked.clock.advance(TTL * 0.7)
    t2 = await save(trims, "ext-t2", turn)
    clocked.clock.advance(TTL * 0.7)
    t3 = await save(trims, "ext-t3", t2)
    assert await store_has(trims, regen)
    fields = await fields_of(clocked, trims, regen)
    assert "r" not in fields and "L" not in fields
    await resolvable_whenever_readable(trims, [root, regen, turn, t2, t3])


async def store_has(store: Any, rid: str) -> bool:
    return await store.get(rid) is not None


async def test_a_thread_emptied_by_deletes_trims_again_once_reused(clocked: Any) -> None:
    store = make_store(clocked, ttl_seconds=TTL)
    root = await save(store, "ext-root", None)
    assert await store.delete(root) is True
    root = await save(store, "ext-root", None)
    regen = await save(store, "ext-regen", root)
    turn = await save(store, "ext-turn", root)
    clocked.clock.advance(TTL * 0.7)
    mid = await save(store, "ext-mid", turn)
    clocked.clock.advance(TTL * 0.7)
    await save(store, "ext-end", mid)
    assert await store.get(regen) is None


async def test_the_flag_is_checked(backend: Any) -> None:
    with pytest.raises(SessionError) as err:
        make_store(backend, response_expiry="yes")
    assert err.value.code == ErrorCode.INPUT_INVALID


async def test_a_new_leaf_counts_the_fields_its_save_really_added(redis_backend: Any) -> None:
    """The common save writes the books with the record and predicts the field count from
    which fields are new; a field already there that the prediction took for new (a
    stale e: of the id, left by a hand edit the books still agree with) must not leave the
    count one off, which would stop the thread's books for good."""
    store = make_store(redis_backend, ttl_seconds=TTL)
    root = await save(store, "ext-root", None)
    rid = await store.new_response_id(root)
    key = store.keys.thread(str(thread_of(root)))
    await redis_backend.client.hset(key, f"e:{rid}", "1")
    await redis_backend.client.hincrby(key, "r", 1)  # the books still agree with the hash
    await store.save(record(rid, root, "ext-child"))
    fields = await fields_of(redis_backend, store, rid)
    assert books.number(fields["r"]) == len(fields) - 1
    assert books.number(fields["c"]) == 2


def test_the_books_bounds_python_states_are_the_scripts() -> None:
    lib = (Path(__file__).resolve().parent.parent / "lua" / "chain_lib.lua").read_text()
    line = "local PRUNE, PRUNE_VISITS, LEAVES_MAX, LEAVES_BYTES = "
    assert f"{line}{books.PRUNE}, {books.PRUNE_VISITS}, {books.LEAVES_MAX}, {books.LEAVES_BYTES}\n" in lib
    jumps_lua = (Path(__file__).resolve().parent.parent / "lua" / "chain_jumps.lua").read_text()
    from redis_sessions.responses import jumps

    assert f"local JUMP_MIN_BYTES, JUMP_BYTES, JUMPS = {jumps.JUMP_MIN_BYTES}, {jumps.JUMP_BYTES}, {jumps.JUMPS}\n" in jumps_lua
    from redis_sessions.responses import names

    assert f"local NAMES_MAX = {names.NAMES_MAX} " in (Path(__file__).resolve().parent.parent / "lua" / "chain_lib.lua").read_text()
