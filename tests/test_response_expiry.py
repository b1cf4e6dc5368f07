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

TTL = 30
LUA = (Path(__file__).resolve().parent.parent / "lua" / "chain_lib.lua").read_text()
PRUNE = int(LUA.split("local PRUNE, SWEEP_BYTES, SWEEP_COUNT, SWEEP_GAP_MS, COVER_STEPS = ")[1].split(",")[0])
"""Records one save removes at most (lua/chain_lib.lua); no Python copy of it exists."""


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
    assert 29 <= len(regens) <= 31 + PRUNE  # the last 30 days' worth, give or take a day
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
    leaves = [await save(store, f"leaf {i}", root) for i in range(3 * PRUNE)]
    clocked.clock.advance(TTL * 0.6)
    keeper = await save(store, "keeper", root)  # keeps the thread alive
    clocked.clock.advance(TTL * 0.6)  # every leaf is past its deadline now
    last = await save(store, "k0", keeper)
    gone = [rid for rid in leaves if await store.get(rid) is None]
    assert len(gone) == PRUNE
    for i in range(2):
        last = await save(store, f"k{i + 1}", last)
    assert all([await store.get(rid) is None for rid in leaves])
    assert await store.get(root) is not None
    assert [s.request.input for s in (await store.resolve_chain(last)).sessions] == ["root", "keeper", "k0", "k1", "k2"]


async def test_many_leaves_all_go_once_due_but_one_needed_again(clocked: Any) -> None:
    """Leaves are found by a sweep of the thread's e: fields, PRUNE removed a save: however
    many branches a thread has, every one goes once past its deadline while saves go on,
    the one a sliding read needed again excepted (until its new deadline)."""
    store = make_store(clocked, ttl_seconds=TTL)
    sliding = make_store(clocked, ttl_seconds=TTL, sliding_ttl=True)
    root = await save(store, "root", None)
    leaves = []
    for i in range(300):
        await store.save(record(f"x{i}", root, "leaf"))
        leaves.append(f"x{i}")
    clocked.clock.advance(TTL * 0.6)
    keeper = await save(store, "keeper", root)
    assert await sliding.get(leaves[150]) is not None  # needed again: another TTL from now
    clocked.clock.advance(TTL * 0.6)
    last = keeper
    for i in range(len(leaves) // PRUNE + 4):
        last = await save(store, f"k{i}", last)
    kept = [rid for rid in leaves if await store.get(rid) is not None]
    assert kept == [leaves[150]]
    clocked.clock.advance(TTL * 0.6)
    await save(store, "end", last)
    assert await store.get(leaves[150]) is None
    fields = await fields_of(clocked, store, root)
    assert sorted(f for f in fields if f.startswith("e:")) == sorted(f"e:{rid}" for rid in [only_leaf(fields)])
    await resolvable_whenever_readable(store, [root, keeper, last])


def only_leaf(fields: dict[str, Any]) -> str:
    """The one leaf of a linear chain's thread: the record no other record names as parent."""
    ids = {f[2:] for f in fields if f.startswith("p:")}
    parents = {(v.decode() if isinstance(v, bytes) else v) for f, v in fields.items() if f.startswith("p:")}
    (leaf,) = ids - parents
    return leaf


async def test_a_thread_keeps_the_books_its_first_save_chose(clocked: Any) -> None:
    """response_expiry=False: a thread that store starts keeps no books and expires whole,
    whoever writes to it after; a thread started with them trims whoever writes to it."""
    trims, keeps = make_store(clocked, ttl_seconds=TTL), make_store(clocked, ttl_seconds=TTL, response_expiry=False)
    for first, then in ((keeps, trims), (trims, keeps)):
        root = await save(first, "ext-root", None)
        regen = await save(then, "ext-regen", root)
        turn = await save(first, "ext-turn", root)
        clocked.clock.advance(TTL * 0.7)
        t2 = await save(then, "ext-t2", turn)
        clocked.clock.advance(TTL * 0.7)
        t3 = await save(first, "ext-t3", t2)
        assert await store_has(trims, regen) is (first is keeps)
        fields = await fields_of(clocked, trims, t3)
        assert (fields["h"].split()[2] == b"1") is (first is trims)
        assert bool([f for f in fields if f.startswith("e:")]) is (first is trims)
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
