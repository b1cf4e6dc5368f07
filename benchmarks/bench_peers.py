"""redis_sessions against its peers, every row in one table, measured in one run.

    .venv/bin/python benchmarks/bench_peers.py                   # a private redis-server on a free port
    .venv/bin/python benchmarks/bench_peers.py --url redis://127.0.0.1:6379/0 --rounds 7
    .venv/bin/python benchmarks/bench_peers.py --svg docs/peers.svg   # and the ratios as a bar chart
    .venv/bin/python benchmarks/bench_peers.py --quick           # a few calls: does the harness run

The peers: the Agents SDK's own ``RedisSession`` (item sessions); raw redis-py sending
the store's own script with the store's own arguments, or HGET + decode (what our
Python adds); a GodeX-style store, one JSON string per response (``EXISTS`` + ``SET PX``
to save, one ``GET`` per hop to resolve a chain). Records are English-like prose from a
word list (deterministic), so that what compression saves is what it saves on text.

The floor rows, measured in the same rounds, are what a target's guarantees cost at the
least, sent by raw redis-py with no store around them: a pop by the smallest scripts,
up to the least that pops exactly once (:data:`POP_FLOORS`); a save by one that keeps only
the parent check and the token ring (:data:`SAVE_FLOOR`). A target beyond its floor is out
of reach.

Each measurement runs both sides in the same run, taking turns round after round (the
first side alternating); a round is N sequential calls on one connection, timed for
wall time per call, with the server's CPU per call from ``INFO cpu`` (used_cpu_sys +
used_cpu_user) read before and after (``INFO commandstats`` would count a script's
inner commands twice). Absolute values are the median round; a ratio is the median of
the rounds' ratios. Gateway turns run in worker processes, CPU per turn from
``time.process_time`` in each worker. Memory is ``MEMORY USAGE`` of every key a side
wrote, per response. Not a test; tests/test_benchmarks.py runs ``--quick``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import multiprocessing
import os
import shlex
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from statistics import median as med
from typing import Any, Awaitable, Callable

import msgspec
from redis.asyncio import Redis

from _common import parser, prose, redis_cpu, redis_url
from redis_sessions import (RedisResponseSessionStore, StoredResponseRequestSnapshot, StoredResponseSession,
                            StoredResponseSnapshot)
from redis_sessions.codec import decode_session
from redis_sessions.ids import thread_of
from redis_sessions.items import RedisSession
from redis_sessions.responses.redis_engine import _save_args
from redis_sessions.responses.store import encode_record
from redis_sessions.scripts import script
from redis_sessions.tokens import new_token


def record(rid: str, parent: str | None, i: int, size: int) -> StoredResponseSession:
    """A gateway's response record of about ``size`` bytes as the store encodes it (0.7 KB or 20 KB)."""
    text = prose(max(0, size - 330), i % 64)
    return StoredResponseSession(
        id=rid, previous_response_id=parent, created_at=1_700_000_000 + i,
        request=StoredResponseRequestSnapshot(input=prose(80, 1000 + i % 64), model="gpt-test", instructions="Be helpful."),
        response=StoredResponseSnapshot(
            id=rid, output=[{"type": "message", "role": "assistant", "id": f"msg_{i}", "status": "completed",
                             "content": [{"type": "output_text", "annotations": [], "text": text}]}],
            usage={"input_tokens": 40, "output_tokens": len(text) // 4}))


def make_item(i: int) -> dict[str, Any]:
    """A typical assistant message, about 300 bytes as JSON (as benchmarks/bench_items.py)."""
    return {"id": f"msg_{i:08d}", "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "annotations": [], "logprobs": [],
                         "text": f"Answer {i}: the weather in Paris is sunny with a light breeze, 21 degrees."}]}


class Godex:
    """A GodeX-style response store: one JSON string per response under its own key."""

    def __init__(self, client: Redis, prefix: str, ttl_ms: int = 30 * 86_400_000) -> None:
        self.r, self.prefix, self.ttl_ms = client, prefix, ttl_ms
        self.decoder = msgspec.json.Decoder(StoredResponseSession)

    async def new_response_id(self, parent: str | None = None) -> str:
        return f"resp_{uuid.uuid4().hex}"

    async def save(self, rec: StoredResponseSession) -> None:
        key = f"{self.prefix}:response:{rec.id}"
        if await self.r.exists(key):
            raise RuntimeError(f"{rec.id} exists")
        await self.r.set(key, msgspec.json.encode(rec), px=self.ttl_ms)

    async def resolve_chain(self, rid: str) -> list[StoredResponseSession]:
        out, cur = [], rid
        while cur:
            out.append(self.decoder.decode(await self.r.get(f"{self.prefix}:response:{cur}")))
            cur = out[-1].previous_response_id
        return out[::-1]


async def turn(store: Any, head: str | None, i: int, size: int) -> str:
    """A gateway turn: resolve the chain of previous_response_id, save the new response."""
    if head is not None:
        await store.resolve_chain(head)
    rid = await store.new_response_id(head)
    await store.save(record(rid, head, i, size))
    return rid


async def conversations(store: Any, count: int, depth: int, size: int) -> list[str]:
    heads: list[str] = []
    for c in range(count):
        head = None
        for i in range(depth):
            head = await turn(store, head, c * depth + i, size)
        heads.append(str(head))
    return heads


async def captured_saves(store: RedisResponseSessionStore, records: list[StoredResponseSession]) -> list[tuple[str, list[Any], int]]:
    """The key and ARGV the store would send to save each record (nothing is sent), and
    where the record's bytes are among them: what raw redis-py sends by hand."""
    sent: list[tuple[str, list[Any], int]] = []

    async def capture(thread: str, request: Any) -> tuple[str, str]:
        args = _save_args(request)
        sent.append((store.keys.thread(thread), args, next(k for k, a in enumerate(args) if a is request.blob)))
        return "ok", request.response_id

    store.engine.save = capture  # type: ignore[method-assign]
    try:
        for rec in records:
            await store.save(rec)
    finally:
        del store.engine.save  # the class's method again
    for rec, (_, args, at) in zip(records, sent):
        assert encode_record(rec, store.compact_records, store.compression) == args[at], "the store no longer encodes with encode_record"
    return sent


Call = Callable[[int], Awaitable[object]]
Prepare = Callable[[int], Awaitable[Call]]


TOKENS = script("tokens").source
"""lua/tokens.lua, put in front of a floor script that checks and remembers its token."""

POP_FLOORS = {
    "an EVALSHA that only RPOPs": "return redis.call('RPOP', KEYS[1])",
    "RPOP + token ring only": TOKENS + """
local key, tok = KEYS[1], ARGV[1]
local ring = redis.call('LINDEX', key, 0)
local done = token_find(ring, tok)
if done then return done end
local item = redis.call('RPOP', key)
redis.call('LSET', key, 0, token_push(ring, tok, 'i', server_ms()))
return item
""",
    "RPOP + token ring + its item kept": TOKENS + """
local key, tok = KEYS[1], ARGV[1]
local ring = redis.call('LINDEX', key, 0)
local done = token_find(ring, tok)
if done then return string.sub(redis.call('LINDEX', key, 1), #tok + 1) end
local item = redis.call('RPOP', key)
redis.call('LSET', key, 1, tok .. item)
redis.call('LSET', key, 0, token_push(ring, tok, 'i', server_ms()))
return item
"""}
"""The least a scripted pop costs. An exactly-once pop must be a script (it checks its
token before it removes anything), so it costs at least the first. The second also checks
and remembers its token in the key's ring (lua/tokens.lua, kept at index 0); the third
also keeps the popped item at index 1, so that a re-sent pop returns it (the least
exactly-once needs: a re-sent pop that found its token but not its item could only fail).
None has the header's counters (which compaction and forks check) or its bounds."""

SAVE_FLOOR = TOKENS + """
local key, id, parent, tok = KEYS[1], ARGV[1], ARGV[2], ARGV[4]
local got = redis.call('HMGET', key, 'ops', 'p:' .. id, 'p:' .. parent)
local done = token_find(got[1], tok)
if done then return done end
if got[2] then return 'exists' end
if parent ~= '' and not got[3] then return 'no parent' end
redis.call('HSET', key, 'd:' .. id, ARGV[3], 'p:' .. id, parent, 'ops', token_push(got[1], tok, 'S', server_ms()))
redis.call('PEXPIRE', key, ARGV[5])
return 'ok'
"""
"""The least a save that keeps our guarantees' core costs: the parent check and exactly-once
(lua/tokens.lua's ring, the one every write shares) on one hash per chain, with none of
the rest (per-response expiry, jump lists, the names list, the leaf index)."""


def fixed(call: Call) -> Prepare:
    """A side whose every round makes the same calls (reads of what is already stored)."""
    async def prepare(n: int) -> Call:
        return call
    return prepare


async def measure(meter: Redis, rounds: int, n: int, sides: dict[str, Prepare]) -> dict[str, list[tuple[float, float]]]:
    """Per side and round: (wall us, Redis CPU us) per call; sides take turns, the first alternating."""
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    for k in range(rounds + 1):  # round 0 warms connections and script caches
        for name in list(sides)[:: 1 if k % 2 else -1]:
            call = await sides[name](n)
            cpu, start = await redis_cpu(meter), time.perf_counter()
            for i in range(n):
                await call(i)
            wall = time.perf_counter() - start
            if k:
                runs[name].append((wall / n * 1e6, (await redis_cpu(meter) - cpu) / n * 1e6))
    return runs


@dataclass
class Row:
    what: str
    peer: str
    ours: float
    theirs: float | None = None
    unit: str = "us"
    ratio: float | None = None
    sense: str = ""  # how the ratio is taken, e.g. "SDK / ours"
    target: tuple[str, float] | None = None

    @property
    def met(self) -> str:
        if self.target is None or self.ratio is None:
            return ""
        return "yes" if (self.ratio >= self.target[1]) == (self.target[0] == ">=") else "no"


def rows_of(what: str, peer: str, runs: dict[str, list[tuple[float, float]]], ours: str, theirs: str, short: str,
            speed: tuple[str, float] | None, cpu: tuple[str, float] | None, wall: bool = True) -> list[Row]:
    """A wall row (speed: theirs / ours) and a Redis CPU row (ours / theirs) of a measurement."""
    a, b = runs[ours], runs[theirs]
    out = []
    if wall:
        out.append(Row(f"{what}: wall per call", peer, med([w for w, _ in a]), med([w for w, _ in b]), "us",
                       med([y[0] / x[0] for x, y in zip(a, b)]), f"{short} time / ours", speed))
    out.append(Row(f"{what}: Redis CPU per call", peer, med([c for _, c in a]), med([c for _, c in b]), "us",
                   med([x[1] / y[1] for x, y in zip(a, b)]), f"ours / {short}", cpu))
    return out


async def items_rows(url: str, tag: str, rounds: int, n: int) -> list[Row]:
    from agents.extensions.memory import RedisSession as SDKSession  # noqa: PLC0415 (slow import; not in workers)

    ours_r, sdk_r, meter = Redis.from_url(url), Redis.from_url(url), Redis.from_url(url)
    sides: dict[str, Callable[[], Any]] = {
        "ours": lambda: RedisSession(uuid.uuid4().hex, client=ours_r, key_prefix=f"{tag}i", ttl=None),  # as the SDK: no TTL
        "sdk": lambda: SDKSession(uuid.uuid4().hex, redis_client=sdk_r, key_prefix=f"{tag}s"),
    }

    def prepared(make: Callable[[], Any], fill: int, op: Callable[[Any, int], Awaitable[object]]) -> Prepare:
        async def prepare(n: int) -> Call:
            s = make()
            for at in range(0, fill or 0, 100):
                await s.add_items([make_item(i) for i in range(at, min(fill, at + 100))])
            return lambda i: op(s, i)
        return prepare

    floors = {name: await ours_r.script_load(source) for name, source in POP_FLOORS.items()}

    def pop_floor(sha: str) -> Prepare:
        async def prepare(n: int) -> Call:
            key = f"{tag}f{uuid.uuid4().hex}"
            await ours_r.rpush(key, b"", b"", *[msgspec.msgpack.encode(make_item(i)) for i in range(n)])

            async def call(i: int) -> None:
                msgspec.msgpack.decode(await ours_r.evalsha(sha, 1, key, new_token()))
            return call
        return prepare

    out: list[Row] = []
    for what, fill, op, speed, cpu in (
            ("pop_item", n, lambda s, i: s.pop_item(), (">=", 1.2), ("<=", 1.0)),  # a session of n items, popped n times
            ("add_items (1 item)", 0, lambda s, i: s.add_items([make_item(i)]), None, None),
            ("get_items(limit=20), 200 items", 200, lambda s, i: s.get_items(limit=20), None, None)):
        competing = {name: prepared(make, fill, op) for name, make in sides.items()}
        if what == "pop_item":
            competing.update({name: pop_floor(sha) for name, sha in floors.items()})
        runs = await measure(meter, rounds, n, competing)
        out += rows_of(what, "agents RedisSession", runs, "ours", "sdk", "SDK", speed, cpu)
        for name in floors if what == "pop_item" else ():
            out += rows_of(f"pop_item floor: {name}", "agents RedisSession", runs, name, "sdk", "SDK", None, None)
    for r in (ours_r, sdk_r, meter):
        await r.aclose()
    return out


async def response_rows(url: str, tag: str, rounds: int, n: int) -> list[Row]:
    r, meter = Redis.from_url(url), Redis.from_url(url)
    ours = RedisResponseSessionStore(r, key_prefix=f"{tag}o", max_depth=100_000)
    recorder = RedisResponseSessionStore(r, key_prefix=f"{tag}r", max_depth=100_000)
    godex = Godex(r, f"{tag}g")
    sha = await r.script_load(script("chain_save").source)  # the raw side loads the store's script up front
    floor_sha = await r.script_load(SAVE_FLOOR)
    out: list[Row] = []
    for size, label in ((700, "0.7 KB"), (20_000, "20 KB")):
        async def chain(store: Any, n: int) -> list[StoredResponseSession]:
            """A saved root and ``n`` records to save under it, each the child of the last."""
            root = await turn(store, None, 0, size)
            recs, parent = [], root
            for i in range(n):
                recs.append(record(await store.new_response_id(parent), parent, i + 1, size))
                parent = recs[-1].id
            return recs

        async def save_ours(n: int) -> Call:
            recs = await chain(ours, n)
            return lambda i: ours.save(recs[i])

        async def save_raw(n: int) -> Call:
            recs = await chain(recorder, n)
            sent, compact, squeeze = await captured_saves(recorder, recs), recorder.compact_records, recorder.compression

            async def call(i: int) -> None:
                key, args, at = sent[i]
                args[at] = encode_record(recs[i], compact, squeeze)
                assert await r.evalsha(sha, 1, key, *args) in (b"ok", "ok")
            return call

        async def save_floor(n: int) -> Call:
            recs, key = await chain(godex, n), f"{tag}f{{{uuid.uuid4().hex}}}"
            await r.hset(key, f"p:{recs[0].previous_response_id}", "")

            async def call(i: int) -> None:
                rec = recs[i]
                args = (rec.id, rec.previous_response_id or "", encode_record(rec, True, True), new_token(), 30 * 86_400_000)
                assert await r.evalsha(floor_sha, 1, key, *args) in (b"ok", "ok")
            return call

        async def save_godex(n: int) -> Call:
            recs = await chain(godex, n)
            return lambda i: godex.save(recs[i])

        runs = await measure(meter, rounds, n, {"ours": save_ours, "raw": save_raw, "godex": save_godex,
                                                "floor": save_floor})
        size_note = f"{label} ({len(encode_record(record('resp_' + '0' * 48, None, 0, size), True))} B msgpack)"
        out += rows_of(f"save {size_note}", "raw redis-py, same script and ARGV", runs, "ours", "raw", "raw",
                       (">=", 0.95), None)
        out += rows_of(f"save {label}", "GodeX-style EXISTS + SET PX of JSON", runs, "ours", "godex", "GodeX",
                       None, ("<=", 1.2), wall=False)
        out += rows_of(f"save {label} floor: parent check + token ring only", "GodeX-style EXISTS + SET PX of JSON",
                       runs, "floor", "godex", "GodeX", None, None, wall=False)

    rid = await turn(ours, None, 0, 700)
    key, field = ours.keys.thread(str(thread_of(rid))), ours.keys.data_field(rid)

    async def get_raw(i: int) -> None:
        decode_session(await r.hget(key, field), rid, rid)

    runs = await measure(meter, rounds, n, {"ours": fixed(lambda i: ours.get(rid)), "raw": fixed(get_raw)})
    out += rows_of("get 0.7 KB", "raw HGET + msgspec decode", runs, "ours", "raw", "raw", (">=", 0.95), None)
    await r.aclose()
    await meter.aclose()
    return out


def _turn_worker(url: str, tag: str, conn: Any) -> None:
    """A gateway worker process: for each job (side, conversations, turns), it builds the
    conversations (untimed), says ready, waits for go, and sends back (turns, CPU s)."""
    async def run() -> None:
        r = Redis.from_url(url)
        stores = {"ours": RedisResponseSessionStore(r, key_prefix=f"{tag}t", max_depth=5000), "godex": Godex(r, f"{tag}t")}
        while (job := conn.recv()) is not None:
            side, count, turns = job
            store = stores[side]
            heads = await conversations(store, count, 10, 700)
            conn.send("ready")
            conn.recv()
            cpu = time.process_time()
            for t in range(turns):
                for c, head in enumerate(heads):
                    heads[c] = await turn(store, head, 100 + t, 700)
            conn.send((turns * count, time.process_time() - cpu))
        await r.aclose()

    asyncio.run(run())


async def gateway_rows(url: str, tag: str, rounds: int, count: int, turns: int) -> list[Row]:
    ctx, meter, out = multiprocessing.get_context("spawn"), Redis.from_url(url), []
    for procs in (1, 4):
        pipes = [ctx.Pipe() for _ in range(procs)]
        workers = [ctx.Process(target=_turn_worker, args=(url, f"{tag}{p}", child)) for p, (_, child) in enumerate(pipes)]
        for w in workers:
            w.start()
        runs: dict[str, list[tuple[float, float, float]]] = {"ours": [], "godex": []}
        for k in range(rounds):
            for side in ("ours", "godex")[:: 1 if k % 2 else -1]:
                for conn, _ in pipes:
                    conn.send((side, count, turns))
                for conn, _ in pipes:
                    assert conn.recv() == "ready"
                cpu, start = await redis_cpu(meter), time.perf_counter()
                for conn, _ in pipes:
                    conn.send("go")
                done = [conn.recv() for conn, _ in pipes]
                wall, server = time.perf_counter() - start, await redis_cpu(meter) - cpu
                total = sum(t for t, _ in done)
                runs[side].append((total / wall, sum(c for _, c in done) / total * 1e6, server / total * 1e6))
        for conn, _ in pipes:
            conn.send(None)
        for w in workers:
            w.join()
        a, b = runs["ours"], runs["godex"]
        what, peer = f"gateway turn, {procs} worker process{'es' if procs > 1 else ''}", "GodeX-style store"
        out += [Row(f"{what}: turns per second", peer, med([x[0] for x in a]), med([x[0] for x in b]), "turns/s",
                    med([x[0] / y[0] for x, y in zip(a, b)]), "ours / GodeX turns/s", (">=", 2.5))]
        for at, name, target in ((1, "worker CPU", ("<=", 0.4)), (2, "Redis CPU", None)):
            out.append(Row(f"{what}: {name} per turn", peer, med([x[at] for x in a]), med([x[at] for x in b]), "us",
                           med([x[at] / y[at] for x, y in zip(a, b)]), "ours / GodeX", target))
    await meter.aclose()
    return out


async def memory_rows(url: str, tag: str, count: int) -> list[Row]:
    from bench_chain_cost import peer_json  # GodeX's JSON.stringify: every field, defaults included

    r, out = Redis.from_url(url), []
    for size, label, target in ((700, "0.7 KB", 0.7), (20_000, "20 KB", 0.45)):
        ours = RedisResponseSessionStore(r, key_prefix=f"{tag}m{size}", max_depth=5000)
        await conversations(ours, count, 10, size)  # as a gateway writes them: resolve, then save
        godex, n = f"{tag}j{size}:response:", 0
        for c in range(count):
            parent = None
            for i in range(10):
                rid, n = f"resp_{uuid.uuid4().hex}", n + 1
                await r.set(godex + rid, peer_json(record(rid, parent, c * 10 + i, size)), px=30 * 86_400_000)
                parent = rid
        used = {}
        for side, pattern in (("ours", ours.keys.scan_pattern()), ("godex", godex + "*")):
            used[side] = sum([await r.memory_usage(k, samples=0) or 0 async for k in r.scan_iter(match=pattern, count=1000)]) / n
        out.append(Row(f"memory per stored response, {label} prose", "GodeX-style: one JSON string per response",
                       used["ours"], used["godex"], "B", used["ours"] / used["godex"], "ours / GodeX", ("<=", target)))
    await r.aclose()
    return out


async def big_read_rows(url: str, tag: str, rounds: int, depth: int, calls: tuple[int, int]) -> list[Row]:
    r, meter = Redis.from_url(url), Redis.from_url(url)
    store = RedisResponseSessionStore(r, key_prefix=f"{tag}b", max_depth=5000)
    leaf = (await conversations(store, 1, depth, 20_000))[0]
    session = RedisSession(uuid.uuid4().hex, client=r, key_prefix=f"{tag}b", ttl=None)
    await session.add_items([make_item(i) for i in range(200)])
    out = []
    for what, call, n in ((f"resolve_chain, {depth} records of 20 KB", lambda i: store.resolve_chain(leaf), calls[0]),
                          ("get_items(), 200 items", lambda i: session.get_items(), calls[1])):
        runs = (await measure(meter, rounds, n, {"ours": fixed(call)}))["ours"]
        out += [Row(f"{what}: wall per call", "none", med([w for w, _ in runs])),
                Row(f"{what}: Redis CPU per call", "none", med([c for _, c in runs]))]
    await r.aclose()
    await meter.aclose()
    return out


def table(rows: list[Row]) -> str:
    lines = ["| measurement | peer | ours | peer's | ratio | target | met |", "|---|---|---:|---:|---:|---:|---|"]
    for row in rows:
        ours, theirs = (f"{v:,.{1 if row.unit == 'us' else 0}f} {row.unit}" if v is not None else ""
                        for v in (row.ours, row.theirs))
        ratio = f"{row.ratio:.2f}x ({row.sense})" if row.ratio is not None else ""
        target = f"{'≥' if row.target[0] == '>=' else '≤'} {row.target[1]:g}" if row.target else ""
        lines.append(f"| {row.what} | {row.peer} | {ours} | {theirs} | {ratio} | {target} | {row.met} |")
    return "\n".join(lines)


def draw(rows: list[Row], path: str) -> None:
    """Every ratio as a bar from 1x (log scale), its target as a tick: green met, red not, grey no target."""
    import matplotlib  # noqa: PLC0415 (only with --svg)

    matplotlib.use("svg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # text as text: a tenth of the file, and diffs that read
    import matplotlib.pyplot as plt  # noqa: PLC0415

    shown = [row for row in rows if row.ratio is not None][::-1]
    ys = list(range(len(shown)))
    fig, ax = plt.subplots(figsize=(11, 0.3 * len(shown) + 1.2))
    colors = {"yes": "#2e8b57", "no": "#c0392b", "": "#9a9a9a"}
    ax.barh(ys, [row.ratio - 1 for row in shown], left=1, color=[colors[row.met] for row in shown])  # type: ignore[operator]
    for y, row in zip(ys, shown):
        ax.text(max(1.0, row.ratio or 1), y, f"  {row.ratio:.2f}x  {row.sense}", va="center", fontsize=7)
        if row.target:
            ax.plot([row.target[1]], [y], marker="|", markersize=11, markeredgewidth=2, color="black")
    ax.set_yticks(ys, [row.what for row in shown], fontsize=7)
    ax.set_xscale("log")
    ax.set_xlim(0.2, 16)
    ax.set_xticks([0.25, 0.5, 1, 2, 4, 8], ["0.25x", "0.5x", "1x", "2x", "4x", "8x"])
    ax.minorticks_off()
    ax.axvline(1.0, color="black", linewidth=0.6)
    ax.set_title("redis_sessions against its peers: each ratio as the table takes it, | its target", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, format="svg", metadata={"Date": None})
    plt.close(fig)


async def run(args: Any, url: str) -> None:
    quick = args.quick
    rounds, n = (1, 3) if quick else (args.rounds, args.calls)
    tag = f"bp{uuid.uuid4().hex[:6]}"
    meter = Redis.from_url(url)
    info = await meter.info("server")
    rows = await items_rows(url, tag, rounds, n)
    rows += await response_rows(url, tag, rounds, n)
    count, turns = (2, 2) if quick else (20, 25)
    rows += await gateway_rows(url, tag, rounds, count, turns)
    rows += await memory_rows(url, tag, 2 if quick else 50)
    rows += await big_read_rows(url, tag, rounds, *((4, (3, 3)) if quick else (64, (30, 100))))
    keys = [key async for key in meter.scan_iter(match=f"{tag}*", count=1000)]
    for at in range(0, len(keys), 1000):
        await meter.unlink(*keys[at:at + 1000])
    await meter.aclose()
    head = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "describe", "--always", "--dirty"],
                          capture_output=True, text=True).stdout.strip() or "?"
    print(f"redis-server {info.get('valkey_version', info['redis_version'])}"
          f"{' (valkey)' if 'valkey_version' in info else ''}, hiredis "
          f"{'installed' if importlib.util.find_spec('hiredis') else 'not installed'}, "
          f"Python {sys.version.split()[0]}, redis_sessions at {head}")
    print(f"command: {shlex.join([os.path.relpath(sys.executable), *sys.argv])}")
    print(f"{rounds} alternating rounds of {n} sequential calls per side (gateway: {count} conversations x {turns} "
          f"turns per worker and round, from depth 10); median round, ratios the median of the rounds' ratios\n")
    print(table(rows))
    if args.svg:
        draw(rows, args.svg)


def main(argv: list[str] | None = None) -> None:
    p = parser(__doc__ or "")
    p.set_defaults(rounds=7)
    p.add_argument("--calls", type=int, default=300, help="sequential calls per side and round")
    p.add_argument("--quick", action="store_true", help="one round of 3 calls per row: does the harness run")
    p.add_argument("--svg", metavar="PATH", help="also draw the ratios as a bar chart (matplotlib) to PATH")
    args = p.parse_args(argv)
    with redis_url(args.url) as url:
        asyncio.run(run(args, url))


if __name__ == "__main__":
    main()
