"""A foreign id's locator lives as long as its record, on the fake clock (``clocked``:
the scripts' TIME moves with it)."""

from __future__ import annotations

from typing import Any

from chains import linear, make_store, record


async def test_a_foreign_ancestor_stays_readable_and_deletable_while_its_chain_lives(clocked: Any) -> None:
    """Foreign ids, each saved under the one before, one every 0.3 s with a 1 s TTL: the
    first ones are kept by their descendants long past their own TTL, and so must their
    locators be, or get and delete could not reach what resolve_chain still serves."""
    store = make_store(clocked, ttl_seconds=1, max_depth=100)
    ids: list[str] = []
    parent = None
    for i in range(10):
        rid = f"ext-{i}"
        await store.save(record(rid, parent, f"turn {i}"))
        ids.append(rid)
        parent = rid
        clocked.clock.advance(0.3)
    assert await store.get(ids[0]) is not None  # 3 s old, three times its TTL
    chain = (await store.resolve_chain(ids[-1])).sessions
    assert [s.id for s in chain] == ids
    for rid in ids:
        assert await store.get(rid) is not None, f"{rid} is served by resolve_chain but not by get"
    assert await store.delete(ids[0]) is True


async def test_a_deep_chain_renews_every_locator_above_in_bounded_calls(clocked: Any) -> None:
    """A foreign chain deeper than one call walks (256 records), not saved under for longer
    than its locators' renewal holds: the save renews every ancestor's locator, its
    script and then lua/chain_cover.lua each walking 256 records at most."""
    store = make_store(clocked, ttl_seconds=100, max_depth=1000)
    ids = await linear(store, 300)
    clocked.clock.advance(90)
    await store.save(record("ext-side", ids[-1]))  # its walk stops at once: the tip's l: lasts
    clocked.clock.advance(90)  # past what the chain's own saves renewed (200 s), but for the tip
    await store.save(record("ext-next", "ext-side"))
    client = clocked.client
    for rid in ids:
        assert await client.pttl(store.keys.locator(rid)) > 150_000, rid
    clocked.clock.advance(60)  # past the renewals of the chain's own saves (200 s), before ext-next's deadline
    assert all([await store.get(rid) is not None for rid in ids])
    assert await store.delete(ids[0]) is True
