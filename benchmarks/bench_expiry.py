"""Per-response expiry over a long conversation: a year of one turn and one regeneration
a day, ids minted elsewhere, TTL 30 days, on the server's own clock with a day
compressed to 40 ms; ``response_expiry`` on, side by side with it off (the thread
expires whole).

    python benchmarks/bench_expiry.py [--url redis://...]

What is kept after the year (records, ``MEMORY USAGE`` of every key), whether the newest
turn resolves and at what depth, the round trips of that resolve, its Redis CPU (the
``INFO cpu`` delta, the least of 20) and the longest single command it sent (SLOWLOG, the
least of the 20 resolves' longest).
"""

from __future__ import annotations

import asyncio
import uuid

from redis.asyncio import Redis

from _common import logging_client, parser, redis_cpu, redis_url
from bench_peers import record
from redis_sessions import RedisResponseSessionStore

DAY = 0.04
"""Seconds a day takes here: the reads after the year must fit in the TTL (1.2 s) of its last turn."""


async def one_year(r: Redis, expiry: bool) -> str:
    prefix = "y" + uuid.uuid4().hex[:8]
    store = RedisResponseSessionStore(r, key_prefix=prefix, max_depth=5000, ttl_seconds=30 * DAY,
                                      response_expiry=expiry)
    parent = None
    for d in range(365):
        turn, regen = f"resp_t{d:047x}", f"resp_r{d:047x}"
        await store.save(record(regen, parent, d, 0))
        await store.save(record(turn, parent, d, 0))
        parent = turn
        await asyncio.sleep(DAY)
    assert parent is not None
    total, kept = 0, 0
    async for key in r.scan_iter(match=f"{prefix}:*", count=1000):
        total += await r.memory_usage(key, samples=0) or 0
        if key.endswith(b":chain"):
            kept += sum([1 async for field, _ in r.hscan_iter(key, match="d:*", count=1000)])
    before = store.round_trips
    snap = await store.resolve_chain(parent, max_depth=1000)
    trips = store.round_trips - before
    cpu, held = [], []
    for _ in range(20):
        await r.slowlog_reset()
        start = await redis_cpu(r)
        await store.resolve_chain(parent, max_depth=1000)
        cpu.append((await redis_cpu(r) - start) * 1e6)
        held.append(max(int(entry["duration"]) for entry in await r.slowlog_get(10_000)
                        if entry["command"].split()[0].upper() not in (b"INFO", b"SLOWLOG")))
    longest = min(held)  # the least of the resolves' longest: a descheduled server reads slow once
    return (f"| {'on' if expiry else 'off'} | {kept} | {total:,} | yes ({len(snap.sessions)}) | {trips} | "
            f"{min(cpu):,.0f} | {longest:,} |")


async def main() -> None:
    args = parser(__doc__).parse_args()
    with redis_url(args.url) as url:
        r = await logging_client(url, 10_000)
        try:
            rows = [await one_year(r, expiry) for expiry in (True, False)]
        finally:
            await r.aclose()
    print("| response_expiry | records kept | bytes kept | newest turn resolves (depth) | round trips | "
          "Redis CPU µs | longest command µs |\n|---|---:|---:|---|---:|---:|---:|")
    print("\n".join(rows))


if __name__ == "__main__":
    asyncio.run(main())
