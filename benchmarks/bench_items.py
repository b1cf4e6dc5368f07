"""Our RedisSession against the Agents SDK's own RedisSession, on the same local Redis.

    .venv/bin/python benchmarks/bench_items.py            # starts its own redis-server
    .venv/bin/python benchmarks/bench_items.py --url redis://127.0.0.1:6379/0

Measures sequential ops/s (one client, one coroutine, so it is latency per
call; median of alternating rounds, so machine noise hits both sides alike) for add_items of one item, get_items(limit=20) on a 200-item session and
pop_item, and bytes stored per item (MEMORY USAGE of a session's keys / items).
Also get_items from 32 coroutines sharing one session object (the SDK's
session serializes its calls behind an asyncio.Lock; ours has no lock). Prints
a markdown table. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from typing import Any, Awaitable, Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from agents.extensions.memory import RedisSession as SDKRedisSession  # noqa: E402
from redis.asyncio import Redis  # noqa: E402

from redis_sessions.items import RedisSession  # noqa: E402


def make_item(i: int) -> dict[str, Any]:
    """A typical assistant output message, about 300 bytes as JSON."""
    return {
        "id": f"msg_{i:08d}",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "annotations": [], "logprobs": [],
                     "text": f"Answer {i}: the weather in Paris is sunny with a light breeze, 21 degrees."}],
    }


async def rate(n: int, op: Callable[[int], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    for i in range(n):
        await op(i)
    return n / (time.perf_counter() - start)


async def memory_usage(client: Redis, keys: list[str]) -> int:
    total = 0
    for key in keys:
        total += int(await client.memory_usage(key, samples=0) or 0)
    return total


class Side:
    """One implementation under test: how to build a session and list its keys."""

    def __init__(self, make: Callable[[str], Any], keys: Callable[[Any], list[str]], client: Redis) -> None:
        self.make, self.keys, self.client = make, keys, client
        self.runs: dict[str, list[float]] = {}

    async def round(self, n: int) -> None:
        s = self.make(f"add-{uuid.uuid4().hex}")
        self.runs.setdefault("add_items (1 item)", []).append(await rate(n, lambda i: s.add_items([make_item(i)])))
        await s.clear_session()

        g = self.make(f"get-{uuid.uuid4().hex}")
        await g.add_items([make_item(i) for i in range(200)])
        self.runs.setdefault("get_items(limit=20), 200 items", []).append(await rate(n, lambda i: g.get_items(limit=20)))
        self.runs.setdefault("bytes stored per item", []).append(await memory_usage(self.client, self.keys(g)) / 200)
        await g.clear_session()

        p = self.make(f"pop-{uuid.uuid4().hex}")
        await p.add_items([make_item(i) for i in range(n)])
        self.runs.setdefault("pop_item", []).append(await rate(n, lambda i: p.pop_item()))
        await p.clear_session()

    def best(self) -> dict[str, float]:
        return {op: (min(v) if op.startswith("bytes") else max(v)) for op, v in self.runs.items()}

    def median(self) -> dict[str, float]:
        return {op: statistics.median(v) for op, v in self.runs.items()}


async def concurrent(make: Callable[[str], Any], tasks: int, per_task: int) -> float:
    """ops/s of get_items(limit=20) from ``tasks`` coroutines sharing one session object."""
    s = make(f"conc-{uuid.uuid4().hex}")
    await s.add_items([make_item(i) for i in range(200)])

    async def worker() -> None:
        for _ in range(per_task):
            await s.get_items(limit=20)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(tasks)))
    rate_ = tasks * per_task / (time.perf_counter() - start)
    await s.clear_session()
    return rate_


async def main(url: str, n: int, rounds: int) -> None:
    ours_client = Redis.from_url(url)
    theirs_client = Redis.from_url(url)
    prefix = f"bench{uuid.uuid4().hex[:8]}"
    ours = Side(
        lambda sid: RedisSession(sid, client=ours_client, key_prefix=prefix, ttl=None),  # as the SDK: no TTL
        lambda s: [s._items_key],  # one key per session: header and items
        ours_client,
    )
    theirs = Side(
        lambda sid: SDKRedisSession(sid, redis_client=theirs_client, key_prefix=f"{prefix}sdk"),
        lambda s: [s._session_key, s._messages_key, s._counter_key],
        theirs_client,
    )
    conc: dict[str, list[float]] = {"ours": [], "theirs": []}
    try:
        await ours.round(200)  # warm up: connections, script cache
        await theirs.round(200)
        ours.runs.clear()
        theirs.runs.clear()
        for _ in range(rounds):  # alternate, so machine noise hits both sides alike
            await ours.round(n)
            await theirs.round(n)
            conc["ours"].append(await concurrent(ours.make, 32, n // 32))
            conc["theirs"].append(await concurrent(theirs.make, 32, n // 32))
    finally:
        await ours_client.aclose()
        await theirs_client.aclose()
    best_a, best_b = ours.best(), theirs.best()
    med_a, med_b = ours.median(), theirs.median()
    print(f"\n{rounds} alternating rounds x {n} sequential calls per op, one client each, {url}")
    print("best round per side (as timeit reports), and the ratio of the medians for comparison\n")
    print("| operation | redis_sessions | agents RedisSession | ratio (best) | ratio (median) |")
    print("|---|---:|---:|---:|---:|")
    for op in best_a:
        if op.startswith("bytes"):
            print(f"| {op} | {best_a[op]:.0f} B | {best_b[op]:.0f} B | {best_b[op] / best_a[op]:.2f}x smaller | |")
        else:
            print(f"| {op} | {best_a[op]:,.0f} ops/s | {best_b[op]:,.0f} ops/s "
                  f"| {best_a[op] / best_b[op]:.2f}x | {med_a[op] / med_b[op]:.2f}x |")
    ca, cb = max(conc["ours"]), max(conc["theirs"])
    print(f"| get_items(limit=20), 32 coroutines on one session object | {ca:,.0f} ops/s | {cb:,.0f} ops/s "
          f"| {ca / cb:.2f}x | {statistics.median(conc['ours']) / statistics.median(conc['theirs']):.2f}x |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="an existing Redis to use (default: start one on a free port)")
    parser.add_argument("-n", type=int, default=2000, help="calls per operation per round")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per side")
    opts = parser.parse_args()
    if opts.url:
        asyncio.run(main(opts.url, opts.n, opts.rounds))
    else:
        from servers import StandaloneServer

        server = StandaloneServer()
        try:
            asyncio.run(main(server.url, opts.n, opts.rounds))
        finally:
            server.close()
