"""The fast paths of two versions side by side: a base commit against a working tree.

    .venv/bin/python benchmarks/bench_core.py                # 75ffa5b against this tree
    .venv/bin/python benchmarks/bench_core.py --base REV --new DIR --rounds 10 --calls 500

One private redis-server serves both sides, each under its own key prefix. Each side
is a worker process that imports redis_sessions (and reads its Lua) from its own tree;
the base tree is ``git archive REV`` unpacked in a temporary folder. For every
operation the workers take turns, base then new, round after round; a round is N
sequential calls timed in the worker (wall time per call) with the server's CPU per
call from INFO cpu (used_cpu_sys + used_cpu_user) read just before and after. The
table keeps each side's median round. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import shlex
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Awaitable, Callable

from _common import REPO, Worker, checkout, describe, isolate_tree, redis_cpu, redis_url, serve, where_imported

OPS = ("save", "get", "resolve_chain", "add_items", "get_items", "pop_item")


# -- the worker: runs in its own process, against one tree ---------------------------

def record(rid: str, parent: str | None, i: int) -> Any:
    """A gateway's response record, about 0.7 KB encoded."""
    from redis_sessions import StoredResponseRequestSnapshot, StoredResponseSession, StoredResponseSnapshot

    text = f"question number {i}: what is the weather like today in the city?"
    answer = ("It is sunny with a light breeze, 21 degrees, and no rain expected. " * 3)[:170]
    return StoredResponseSession(
        id=rid, previous_response_id=parent, created_at=1_700_000_000 + i,
        request=StoredResponseRequestSnapshot(input=text, model="gpt-test", instructions="Be helpful."),
        response=StoredResponseSnapshot(
            id=rid, output=[{"type": "message", "role": "assistant", "id": f"msg_{i}",
                             "content": [{"type": "output_text", "text": answer}]}],
            output_text=answer, usage={"input_tokens": 40, "output_tokens": 30}),
    )


def item(i: int) -> dict[str, Any]:
    return {"role": "user", "content": f"message number {i}"}


Call = Callable[[int], Awaitable[object]]


class Ops:
    """One method per measured operation: it prepares (untimed) and returns the call to time."""

    def __init__(self, client: Any, prefix: str) -> None:
        import redis_sessions

        self.rs = redis_sessions
        self.client = client
        self.prefix = prefix
        self.store = redis_sessions.RedisResponseSessionStore(client, key_prefix=prefix)

    def session(self) -> Any:
        return self.rs.RedisSession(uuid.uuid4().hex, client=self.client, key_prefix=self.prefix)

    async def chain(self, depth: int) -> list[str]:
        ids: list[str] = []
        for i in range(depth):
            parent = ids[-1] if ids else None
            ids.append(await self.store.new_response_id(parent))
            await self.store.save(record(ids[-1], parent, i))
        return ids

    async def setup(self) -> None:
        """What the reads read: a root, a depth-10 chain and a 200-item session."""
        self.root = (await self.chain(1))[-1]
        self.leaf = (await self.chain(10))[-1]
        self.full = self.session()
        await self.full.add_items([item(i) for i in range(200)])
        assert len((await self.store.resolve_chain(self.leaf)).sessions) == 10
        assert len(await self.full.get_items(limit=20)) == 20

    async def save(self, n: int) -> Call:
        records, parent = [], None  # ids minted by the store, each the child of the last
        for i in range(n):
            rid = await self.store.new_response_id(parent)
            records.append(record(rid, parent, i))
            parent = rid
        return lambda i: self.store.save(records[i])

    async def get(self, n: int) -> Call:
        return lambda i: self.store.get(self.root)

    async def resolve_chain(self, n: int) -> Call:
        return lambda i: self.store.resolve_chain(self.leaf)

    async def add_items(self, n: int) -> Call:
        session = self.session()
        return lambda i: session.add_items([item(i)])

    async def get_items(self, n: int) -> Call:
        return lambda i: self.full.get_items(limit=20)

    async def pop_item(self, n: int) -> Call:
        session = self.session()
        for start in range(0, n, 100):
            await session.add_items([item(i) for i in range(start, min(n, start + 100))])
        return lambda i: session.pop_item()


async def worker(url: str, prefix: str) -> None:
    """Answer one line per request: [op, n] in, [wall per call, Redis CPU per call] out."""
    from redis.asyncio import Redis

    from redis_sessions.scripts import lua_folder

    client = Redis.from_url(url)
    ops = Ops(client, prefix)
    await ops.setup()

    async def answer(request: Any) -> list[float]:
        op, n = request
        call = await getattr(ops, op)(n)
        cpu = await redis_cpu(client)
        start = time.perf_counter()
        for i in range(n):
            await call(i)
        wall = time.perf_counter() - start
        return [wall / n, (await redis_cpu(client) - cpu) / n]

    await serve(answer, {**where_imported(), "lua": str(lua_folder())})
    await client.aclose()


def worker_main(url: str, prefix: str) -> None:
    isolate_tree()
    asyncio.run(worker(url, prefix))


# -- the driver -------------------------------------------------------------------

def measure(sides: list[Worker], rounds: int, calls: int) -> dict[str, dict[str, tuple[float, float]]]:
    """Per operation and side: the median wall and Redis CPU per call, in microseconds."""
    table: dict[str, dict[str, tuple[float, float]]] = {}
    for op in OPS:
        runs: dict[str, list[tuple[float, float]]] = {side.name: [] for side in sides}
        for _ in range(rounds):
            for side in sides:
                runs[side.name].append(tuple(side.ask([op, calls])))
        table[op] = {name: (statistics.median(w for w, _ in r) * 1e6, statistics.median(c for _, c in r) * 1e6)
                     for name, r in runs.items()}
    return table


def main() -> None:
    p = argparse.ArgumentParser(description="base against new: wall and Redis CPU per call of the fast paths")
    p.add_argument("--base", default="75ffa5b", help="the commit to compare against (default 75ffa5b)")
    p.add_argument("--new", default=str(REPO), help="the tree to measure (default this checkout, as it is)")
    p.add_argument("--rounds", type=int, default=10, help="alternating rounds per side and operation")
    p.add_argument("--calls", type=int, default=500, help="calls per round")
    p.add_argument("--quick", action="store_true", help="2 rounds of 20 calls: does the harness run")
    p.add_argument("--worker", nargs=2, metavar=("URL", "PREFIX"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker_main(*args.worker)
    rounds, calls = (2, 20) if args.quick else (args.rounds, args.calls)

    import redis

    new = Path(args.new).resolve()
    with checkout(args.base) as base, redis_url(None) as url:
        sides = [Worker(name, tree, __file__, "--worker", url, f"bc{name}") for name, tree in (("base", base), ("new", new))]
        try:
            table = measure(sides, rounds, calls)
        finally:
            for side in sides:
                side.close()
        with redis.Redis.from_url(url) as client:
            server = client.info("server")

    print(f"base {describe(REPO, args.base)} against new {new} (HEAD {describe(new)}, uncommitted changes included); "
          f"{rounds} rounds of {calls} calls per side, median round")
    print(f"redis-server {server['redis_version']}, hiredis "
          f"{'installed' if importlib.util.find_spec('hiredis') else 'not installed'}, "
          f"Python {sys.version.split()[0]}")
    print(f"command: {shlex.join([os.path.relpath(sys.executable), *sys.argv])}")
    for side in sides:
        print(f"{side.name} imports {side.where['package']}, scripts from {side.where['lua']}")
    print()
    print("| operation | base wall us | new wall us | ratio | base Redis CPU us | new Redis CPU us | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for op, row in table.items():
        (bw, bc), (nw, nc) = row["base"], row["new"]
        print(f"| {op} | {bw:.1f} | {nw:.1f} | {nw / bw:.3f} | {bc:.1f} | {nc:.1f} | {nc / bc:.3f} |")


if __name__ == "__main__":
    main()
