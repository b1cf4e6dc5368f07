"""Separate OS processes appending to one conversation, on a real redis-server and a real cluster.

Each worker is a fresh interpreter with its own client; all connect first,
report ready, and start together when the test writes "go" to their stdin, so
their script calls interleave on the server. No item may be lost or
duplicated, every batch stays whole, and each worker's batches keep its order.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from conftest import Backend
from redis_sessions.conversations import RedisConversationStore

pytestmark = [pytest.mark.real, pytest.mark.slow]

WORKERS = 6
BATCHES = 30

WORKER = r"""
import asyncio, sys
from redis_sessions.conversations import RedisConversationStore

async def main(url, prefix, conv, worker, batches):
    store = RedisConversationStore.from_url(url, key_prefix=prefix, ttl_seconds=600)
    await store.get(conv)  # connect and load a script before the start signal
    print("ready", flush=True)
    sys.stdin.readline()
    try:
        for batch in range(batches):
            await store.add_items(conv, [{"type": "message", "role": "user", "content": f"{worker}.{batch}.{i}",
                                          "w": worker, "b": batch, "i": i} for i in range(2)])
    finally:
        await store.close()
    print("done", flush=True)

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])))
"""


def run_workers(b: Backend, conv: str) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(b.url), b.prefix, conv, str(w), str(BATCHES)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for w in range(WORKERS)]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        for p in procs:
            out, _ = p.communicate(timeout=120)
            assert p.returncode == 0 and out.strip().endswith("done")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


async def everything(store: RedisConversationStore, conv: str, order: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    after = None
    while True:
        page = await store.list_items(conv, limit=100, order=order, after=after)  # type: ignore[arg-type]
        items += page.data
        if not page.has_more:
            return items
        after = page.last_id


async def test_concurrent_appends_from_processes_lose_and_duplicate_nothing(real_backend: Backend) -> None:
    store = RedisConversationStore(real_backend.client, key_prefix=real_backend.prefix, ttl_seconds=600)
    conv = await store.create(items=[{"type": "message", "role": "system", "content": "start"}])
    run_workers(real_backend, conv.id)
    items = (await everything(store, conv.id, "asc"))
    assert items[0]["content"] == "start"
    items = items[1:]
    assert len(items) == WORKERS * BATCHES * 2
    assert len({i["id"] for i in items}) == len(items), "an item id twice"
    assert len({i["content"] for i in items}) == len(items), "an item stored twice"
    for start in range(0, len(items), 2):  # every batch whole and in its own order
        a, b = items[start:start + 2]
        assert (a["w"], a["b"], a["i"]) == (b["w"], b["b"], 0) and b["i"] == 1
    for w in range(WORKERS):  # each process's batches in the order it sent them
        assert [i["b"] for i in items if i["w"] == w and i["i"] == 0] == list(range(BATCHES))
    desc = await everything(store, conv.id, "desc")
    assert [i["id"] for i in desc] == [i["id"] for i in reversed(items)] + [desc[-1]["id"]]
    for item in items[::37]:  # every item readable by its id
        assert await store.get_item(conv.id, item["id"]) == item
