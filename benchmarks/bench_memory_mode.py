"""Memory mode: the Redis stores on an in-process fakeredis server, which runs the same
Lua scripts with lupa. What a call costs there, per call, in one process and one event
loop (the least of ``--rounds`` rounds of ``--calls`` calls).

    python benchmarks/bench_memory_mode.py [--rounds 5] [--calls 500]
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable

from _common import parser
from bench_peers import make_item, record
from redis_sessions import MemoryResponseSessionStore, MemorySession, new_response_id


async def per_call(call: Callable[[int], Awaitable[Any]], calls: int, rounds: int) -> float:
    best = float("inf")
    for r in range(rounds):
        start = time.perf_counter()
        for i in range(calls):
            await call(r * calls + i)
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


async def main() -> None:
    p = parser(__doc__)
    p.add_argument("--calls", type=int, default=500)
    args = p.parse_args()
    n, rounds = args.calls, args.rounds
    session = MemorySession("bench")
    store = MemoryResponseSessionStore()
    parent = new_response_id()
    await store.save(record(parent, None, 0, 700))
    chain = [parent]
    for i in range(9):
        chain.append(new_response_id(chain[-1]))
        await store.save(record(chain[-1], chain[-2], i + 1, 700))

    async def save(i: int) -> None:
        rid = new_response_id(parent)
        await store.save(record(rid, parent, i, 700))

    await session.add_items([make_item(i) for i in range(n * rounds)])
    rows = {
        "add_items (one item)": await per_call(lambda i: session.add_items([make_item(i)]), n, rounds),
        "get_items(20)": await per_call(lambda i: session.get_items(20), n, rounds),
        "pop_item": await per_call(lambda i: session.pop_item(), n, rounds),
        "save (0.7 KB)": await per_call(save, n, rounds),
        "get": await per_call(lambda i: store.get(parent), n, rounds),
        "resolve_chain, 10 deep": await per_call(lambda i: store.resolve_chain(chain[-1]), n, rounds),
    }
    print("| call | µs |\n|---|---:|")
    for name, us in rows.items():
        print(f"| `{name}` | {us:,.0f} |")


if __name__ == "__main__":
    asyncio.run(main())
