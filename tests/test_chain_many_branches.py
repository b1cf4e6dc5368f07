"""A thread that goes on being written sheds every record nothing needs, whatever its
number of branches: on real servers, with a real short TTL."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from chains import make_store, record
from redis_sessions.ids import thread_of


async def test_a_thread_of_many_live_branches_still_sheds_its_old_ones(real_backend: Any) -> None:
    """More live leaves than the expiry index holds (about 240 of minted ids), written
    continuously under one root with a 1 s TTL: every leaf older than its TTL goes
    within a bounded time, and the thread's size stays bounded, for as long as it is
    written (it grew by the leaves the index had no room for, for good)."""
    store = make_store(real_backend, ttl_seconds=1)
    root = await store.new_response_id()
    await store.save(record(root, None, "shared system prompt"))
    saved: list[tuple[float, str]] = []
    stop = time.monotonic() + 5

    async def writer() -> None:
        while time.monotonic() < stop:
            rid = await store.new_response_id(root)
            await store.save(record(rid, root, "branch"))
            saved.append((time.monotonic(), rid))
            await asyncio.sleep(0.01)

    await asyncio.gather(*(writer() for _ in range(8)))
    rate = len(saved) / 5
    assert rate > 300, f"wrote {rate:.0f} leaves a second: too few to overflow the index"
    key = store.keys.thread(thread_of(root) or "")
    now = time.monotonic()
    fields = await real_backend.client.hkeys(key)
    live = {f.decode()[2:] for f in fields if f.startswith(b"d:")}
    stale = [rid for at, rid in saved if at < now - 2.5 and rid in live]
    assert stale == [], f"{len(stale)} of {len(saved)} leaves outlived their TTL by 1.5 s"
    assert len(live) < 2.5 * rate
