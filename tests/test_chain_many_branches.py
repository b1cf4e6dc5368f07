"""A thread that goes on being written sheds every record nothing needs, whatever its
number of branches: on the fake clock (``clocked``: the scripts' TIME moves with it),
so the rate of writes is the test's choice, not this machine's speed."""

from __future__ import annotations

from typing import Any

from chains import make_store, record
from redis_sessions.ids import thread_of

TTL = 1
PER_TTL = 400
"""Leaves saved per TTL: hundreds of live branches at any time."""
SLACK = 0.1 * TTL
"""How long past its deadline a leaf may stay: the sweep runs at least every sixteenth of
the TTL (lua/chain_lib.lua), and the saves of that time (40 of them, each removing up to
PRUNE) are what removes it."""


async def test_a_thread_of_many_live_branches_still_sheds_its_old_ones(clocked: Any) -> None:
    """Hundreds of live leaves, written continuously under one root for three TTLs: at
    every step no leaf outlives its TTL by more than SLACK, the thread holds no more than
    the leaves of the last TTL and SLACK, and its books name exactly its leaves."""
    store = make_store(clocked, ttl_seconds=TTL)
    root = await store.new_response_id()
    await store.save(record(root, None, "shared system prompt"))
    key = store.keys.thread(thread_of(root) or "")
    saved: dict[str, float] = {}
    for step in range(3 * 4):  # four looks a TTL
        for _ in range(PER_TTL // 4):
            rid = await store.new_response_id(root)
            await store.save(record(rid, root, "branch"))
            saved[rid] = clocked.clock.now
            clocked.clock.advance(TTL / PER_TTL)
        fields = await clocked.client.hkeys(key)
        live = {f.decode()[2:] for f in fields if f.startswith(b"d:")} - {root}
        now = clocked.clock.now
        assert live <= set(saved)
        stale = sorted(rid for rid in live if saved[rid] < now - TTL - SLACK)
        assert stale == [], f"step {step}: {len(stale)} of {len(live)} leaves outlived their TTL by {SLACK} s"
        assert len(live) <= (TTL + SLACK) * PER_TTL / TTL, f"step {step}: {len(live)} leaves live"
        assert {f.decode()[2:] for f in fields if f.startswith(b"e:")} == live  # a deadline per leaf, no other
    assert await store.get(root) is not None
