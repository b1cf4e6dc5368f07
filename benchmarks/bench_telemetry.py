"""What telemetry costs per call: off against a base commit without it, and on (the
OpenTelemetry SDK exporting to memory) against off, side by side in one run.

    python benchmarks/bench_telemetry.py [--url redis://...] [--base 292db97] [--rounds 61] [--calls 100]

Three worker processes on one Redis (a private redis-server unless ``--url``), each with
its own key prefix, each timing the asyncio stores' fast paths: ``base`` imports the base
commit's tree (``git archive``; no telemetry there), ``off`` this checkout with telemetry
off, ``on`` this checkout with :func:`redis_sessions.telemetry.enable` on an SDK
``TracerProvider`` (``SimpleSpanProcessor`` into an ``InMemorySpanExporter``, emptied
between batches) and a ``MeterProvider`` with an ``InMemoryMetricReader``. A round asks
each worker for one batch of ``--calls`` calls of one path, the workers' order turned
every round, so the machine's drift hits all three alike; a side's figure is its median
batch's time per call, a ratio's the median of the rounds' ratios, its spread their
interquartile range; "best off / best base" compares the two sides' fastest batches, the
figure a busy machine disturbs least. The last row is a public call that does nothing (``bounded`` around
an empty coroutine, no I/O): what the decorator costs, and telemetry's test in it.
"""

from __future__ import annotations

import asyncio
import sys
import time
from statistics import median, quantiles
from typing import Any, Callable, Awaitable

from _common import REPO, Worker, checkout, describe, isolate_tree, parser, redis_url, serve, where_imported

PATHS = ("response get", "response save", "resolve_chain depth 10", "get_items(20)", "add_items", "pop_item",
         "conversation list_items", "bounded no-op")
NOOP_CALLS = 50
"""The no-op row's batch is this many times ``--calls`` (a call of it takes a few us)."""


def item(i: int) -> dict[str, Any]:
    """A typical assistant message, about 300 bytes as JSON (bench_peers.make_item's)."""
    return {"id": f"msg_{i:08d}", "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "annotations": [], "logprobs": [],
                         "text": f"Answer {i}: the weather in Paris is sunny with a light breeze, 21 degrees."}]}


class Paths:
    """A worker's stores and the state each path reads, made once."""

    def __init__(self, url: str, prefix: str) -> None:
        from redis.asyncio import Redis

        from bench_peers import record
        import redis_sessions as rs

        self.record, self.rs = record, rs
        self.client = Redis.from_url(url)
        self.responses = rs.RedisResponseSessionStore(self.client, key_prefix=prefix)
        self.conversations = rs.RedisConversationStore(self.client, key_prefix=prefix)
        self.reads = rs.RedisSession("reads", client=self.client, key_prefix=prefix)
        self.writes = rs.RedisSession("writes", client=self.client, key_prefix=prefix)
        self.pops = rs.RedisSession("pops", client=self.client, key_prefix=prefix)
        self.n = 0

    async def setup(self) -> None:
        rs, record = self.rs, self.record
        self.one = rs.new_response_id()
        await self.responses.save(record(self.one, None, 0, 700))
        parent = None
        for i in range(10):
            rid = rs.new_response_id(parent)
            await self.responses.save(record(rid, parent, i, 700))
            parent = rid
        self.leaf = parent
        await self.reads.add_items([item(i) for i in range(40)])
        conversation = await self.conversations.create([item(i) for i in range(20)])
        await self.conversations.add_items(conversation.id, [item(i) for i in range(20, 40)])
        self.conversation = conversation.id

    def path(self, name: str) -> Callable[[], Awaitable[Any]]:
        if name == "response get":
            return lambda: self.responses.get(self.one)
        if name == "response save":
            return self.save
        if name == "resolve_chain depth 10":
            return lambda: self.responses.resolve_chain(self.leaf)
        if name == "get_items(20)":
            return lambda: self.reads.get_items(20)
        if name == "add_items":
            return lambda: self.writes.add_items([item(self.n)])
        if name == "pop_item":
            return self.pops.pop_item
        if name == "conversation list_items":
            return lambda: self.conversations.list_items(self.conversation, limit=20)
        return self.noop()

    def noop(self) -> Callable[[], Awaitable[Any]]:
        """A public call that does nothing: what budget.bounded itself costs, the
        telemetry test included (a store's own ``timeout``, no link: no I/O)."""
        from redis_sessions.budget import bounded

        class Noop:
            timeout = 5.0

            @bounded
            async def call(self) -> None:
                return None

        return Noop().call

    async def save(self) -> None:
        self.n += 1
        await self.responses.save(self.record(self.rs.new_response_id(), None, self.n, 700))


async def worker(url: str, prefix: str, on: bool) -> None:
    import gc

    hello = where_imported()
    exporter: Any = None
    if on:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        from redis_sessions import telemetry

        exporter, tracer_provider = InMemorySpanExporter(), TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
        telemetry.enable(tracer_provider, MeterProvider(metric_readers=[InMemoryMetricReader()]))
    paths = Paths(url, prefix)
    await paths.setup()

    async def answer(request: dict[str, Any]) -> float:
        name, calls = request["path"], request["calls"]
        if name == "bounded no-op":
            calls *= NOOP_CALLS
        if name == "pop_item":  # items to pop, not timed
            await paths.pops.add_items([item(i) for i in range(calls)])
        call = paths.path(name)
        await call()
        gc.collect()
        start = time.perf_counter()
        for _ in range(calls):
            await call()
        took = (time.perf_counter() - start) / calls * 1e6
        if exporter is not None:
            exporter.clear()
        return took

    await serve(answer, hello)


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--base", default="292db97", help="the commit to compare telemetry off against")
    p.add_argument("--calls", type=int, default=100, help="calls per batch")
    p.add_argument("--worker", choices=("base", "off", "on"), help=argparse_hide())
    p.add_argument("--prefix", default="btel", help=argparse_hide())
    p.set_defaults(rounds=61)
    args = p.parse_args()
    if args.worker:
        isolate_tree()
        asyncio.run(worker(args.url, args.prefix, args.worker == "on"))
        return
    with redis_url(args.url, apart=True) as url, checkout(args.base) as base_tree:
        script = str(REPO / "benchmarks" / "bench_telemetry.py")
        workers = {side: Worker(side, tree, script, "--url", url, "--worker", side, "--prefix", f"btel{side}")
                   for side, tree in (("base", base_tree), ("off", REPO), ("on", REPO))}
        try:
            times: dict[str, dict[str, list[float]]] = {path: {side: [] for side in workers} for path in PATHS}
            for r in range(args.rounds):
                for path in PATHS:
                    order = list(workers) if r % 2 == 0 else list(reversed(workers))
                    order = order[r % 3:] + order[:r % 3]
                    for side in order:
                        times[path][side].append(workers[side].ask({"path": path, "calls": args.calls}))
        finally:
            for w in workers.values():
                w.close()
    print(f"base {args.base} ({describe(REPO, args.base)}) against this checkout ({describe(REPO)}), "
          f"{args.rounds} rounds of {args.calls} calls, asyncio stores, Python {sys.version.split()[0]}\n")
    print("| path | base µs | off µs | off / base (IQR) | best off / best base | on µs | on / off (IQR) | on − off µs |")
    print("|---|---:|---:|---|---:|---:|---|---:|")
    for path in PATHS:
        t = times[path]
        off_base = [o / b for o, b in zip(t["off"], t["base"])]
        on_off = [n / o for n, o in zip(t["on"], t["off"])]
        base, off, on = median(t["base"]), median(t["off"]), median(t["on"])
        best = min(t["off"]) / min(t["base"])
        print(f"| {path} | {base:.2f} | {off:.2f} | {spread(off_base)} | {best:.3f} | {on:.2f} | {spread(on_off)} "
              f"| {on - off:.1f} |")


def spread(ratios: list[float]) -> str:
    """The median ratio and its interquartile range."""
    if len(ratios) < 2:
        return f"{ratios[0]:.3f}"
    q1, _, q3 = quantiles(ratios, n=4)
    return f"{median(ratios):.3f} ({q1:.3f}–{q3:.3f})"


def argparse_hide() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
