"""What one page of list_items costs as a conversation grows.

    .venv/bin/python benchmarks/bench_conversations.py        # starts its own redis-server
    .venv/bin/python benchmarks/bench_conversations.py --url redis://127.0.0.1:6379/0

For conversations of 10, 1,000 and 100,000 items (about 300 bytes each, added
through the store 20 at a time), measures a page of ``limit=20``: newest first
(the default), oldest first after a cursor in the middle, and after a cursor
naming a deleted item. For each: Redis CPU per page (the INFO cpu delta,
which counts a script's inner commands once), round trips per page (commands
the server was sent / pages, from INFO commandstats), and the client's latency
per page. Also the key's bytes per item
(MEMORY USAGE), and a conversation whose first 10,000 items were deleted
before one live one. Prints a markdown table. Not a test.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from typing import Any, Awaitable, Callable

from _common import parser, redis_cpu, redis_url
from redis.asyncio import Redis

from redis_sessions.conversations import RedisConversationStore

PAGES = 2000


def make_item(i: int) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "annotations": [], "logprobs": [],
                     "text": f"Answer {i}: the weather in Paris is sunny with a light breeze, 21 degrees."}],
    }


async def fill(store: RedisConversationStore, conv: str, count: int) -> list[str]:
    ids: list[str] = []
    batches = [list(range(s, min(count, s + 20))) for s in range(0, count, 20)]
    for start in range(0, len(batches), 32):  # 32 batches at a time; their order does not matter here
        group = batches[start:start + 32]
        results = await asyncio.gather(*(store.add_items(conv, [make_item(i) for i in b]) for b in group))
        ids += [str(item["id"]) for r in results for item in r.data]
    return ids


async def measure(client: Redis, page: Callable[[], Awaitable[Any]]) -> tuple[float, float, float]:
    """(server µs per page, round trips per page, client µs per page)."""
    await page()  # the script is loaded
    await client.config_resetstat()
    cpu = await redis_cpu(client)
    latencies = []
    for _ in range(PAGES):
        start = time.perf_counter()
        await page()
        latencies.append(time.perf_counter() - start)
    server_us = (await redis_cpu(client) - cpu) / PAGES * 1e6
    stats = await client.info("commandstats")
    # every page is one script call (the store sends nothing else for it)
    calls = sum(int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in ("evalsha", "eval"))
    return server_us, calls / PAGES, statistics.median(latencies) * 1e6


async def main(url: str) -> None:
    client = Redis.from_url(url)
    store = RedisConversationStore(client, key_prefix=f"bench{uuid.uuid4().hex[:6]}", ttl_seconds=3600)
    rows = []
    for length in (10, 1_000, 100_000):
        conv = (await store.create()).id
        ids = await fill(store, conv, length)
        middle = ids[length // 2]
        gone = ids[length // 2 - 1]
        await store.delete_item(conv, gone)
        size = int(await client.memory_usage(store.keys.conversation(conv), samples=0) or 0)
        cases = {
            "newest first": lambda: store.list_items(conv, limit=20),
            "asc, after a middle item": lambda: store.list_items(conv, limit=20, order="asc", after=middle),
            "desc, after a deleted item": lambda: store.list_items(conv, limit=20, after=gone),
        }
        for name, call in cases.items():
            server_us, trips, client_us = await measure(client, call)
            rows.append((f"{length:,}", name, server_us, trips, client_us, size / length))
        await store.delete(conv)
    conv = (await store.create()).id
    ids = await fill(store, conv, 10_001)
    for start in range(0, 10_000, 32):
        await asyncio.gather(*(store.delete_item(conv, i) for i in ids[start:start + 32]))
    for name, order in (("10,000 deleted, then 1: asc", "asc"), ("10,000 deleted, then 1: desc", "desc")):
        server_us, trips, client_us = await measure(client, lambda: store.list_items(conv, limit=20, order=order))
        rows.append(("10,001", name, server_us, trips, client_us, float("nan")))
    await store.delete(conv)
    version = (await client.info("server"))["redis_version"]
    await client.aclose()
    print(f"redis {version}, {PAGES} pages each, limit=20, one client, loopback\n")
    print("| items | page | Redis µs/page | round trips/page | client µs/page | key bytes/item |")
    print("|---:|---|---:|---:|---:|---:|")
    for length, name, server_us, trips, client_us, per_item in rows:
        bytes_col = "" if per_item != per_item else f"{per_item:.0f}"
        print(f"| {length} | {name} | {server_us:.1f} | {trips:.2f} | {client_us:.0f} | {bytes_col} |")


if __name__ == "__main__":
    args = parser(__doc__ or "").parse_args()
    with redis_url(args.url) as url:
        asyncio.run(main(url))
