"""redis_sessions against its peers and against a base commit, every row in one table, in one run.

    .venv/bin/python benchmarks/bench_peers.py                   # a private redis-server on a free port
    .venv/bin/python benchmarks/bench_peers.py --base 0288008    # and every row of ours for that commit too
    .venv/bin/python benchmarks/bench_peers.py --url redis://127.0.0.1:6379/0 --rounds 7
    .venv/bin/python benchmarks/bench_peers.py --svg docs/peers.svg   # and every ratio as a bar chart
    .venv/bin/python benchmarks/bench_peers.py --front docs/front.svg # and the README's picture
    .venv/bin/python benchmarks/bench_peers.py --quick --base HEAD     # a few calls: does the harness run

The peers: the Agents SDK's own ``RedisSession`` (item sessions); raw redis-py sending
what the store sends (its script and ARGV, captured at the client as it saved the same
records, and replayed on fresh keys), or the same read + decode (what our Python adds);
a GodeX-style store, one JSON string per response (``EXISTS`` + ``SET PX`` to save, one
``GET`` per hop to resolve a chain). Records are English-like prose from a word list
(deterministic), so that what compression saves is what it saves on text.

The floor rows, measured in the same rounds, are what a target's guarantees cost at the
least, sent by raw redis-py with no store around them: a pop by the smallest scripts,
up to the least that pops exactly once (:data:`POP_FLOORS`); a save by one that keeps only
the parent check and the token ring (:data:`SAVE_FLOOR`). Their token ring is frozen in
``floor_tokens.lua``, so a floor stays put whatever the package's scripts become.

"Ours" goes through the public API only (the stores, the models, ``new_response_id``,
``save``, ``get``, ``resolve_chain``, ``add_items``, ``get_items``, ``pop_item``), so that
one script measures any version. Each tree is a worker process importing its own
redis_sessions and Lua: this checkout (or ``--new``), which also runs every peer, and
with ``--base REV`` the package of ``git archive REV``, which runs only ours, under its
own key prefix. Every row of ours then has the base's figure beside it, measured in the
same rounds, and new / base.

Each measurement runs every side in the same run, taking turns round after round (the
order reversing each round, after a warm-up round); a round is N sequential calls on one
connection, timed for wall time per call, with the server's CPU per call from ``INFO
cpu`` (used_cpu_sys + used_cpu_user) read before and after (``INFO commandstats`` would
count a script's inner commands twice). Absolute values are the median round; a ratio
is the median of the rounds' ratios. Gateway turns run in worker processes of each
tree, CPU per turn from ``time.process_time`` in each. Memory is ``MEMORY USAGE`` of
every key a side wrote, per response. The private server runs on a core of its own and
the workers on the others (:func:`_common.redis_url`). Not a test;
tests/test_benchmarks.py runs ``--quick``.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import importlib
import importlib.util
import json
import multiprocessing
import os
import shlex
import subprocess
import sys
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from statistics import median as med
from typing import Any, Awaitable, Callable

import msgspec
from redis.asyncio import Redis

from _common import (REPO, Worker, checkout, describe, isolate_tree, parser, peer_json, prose, redis_cpu, redis_url,
                     serve, where_imported)

isolate_tree()  # in a tree's worker, before redis_sessions is imported

from redis_sessions import (RedisResponseSessionStore, RedisSession, StoredResponseRequestSnapshot,  # noqa: E402
                            StoredResponseSession, StoredResponseSnapshot)
from redis_sessions.codec import decode_session  # noqa: E402


def record(rid: str, parent: str | None, i: int, size: int) -> StoredResponseSession:
    """A gateway's response record of about ``size`` bytes as msgpack (0.7 KB or 20 KB)."""
    text = prose(max(0, size - 330), i % 64)
    return StoredResponseSession(
        id=rid, previous_response_id=parent, created_at=1_700_000_000 + i,
        request=StoredResponseRequestSnapshot(input=prose(80, 1000 + i % 64), model="gpt-test", instructions="Be helpful."),
        response=StoredResponseSnapshot(
            id=rid, output=[{"type": "message", "role": "assistant", "id": f"msg_{i}", "status": "completed",
                             "content": [{"type": "output_text", "annotations": [], "text": text}]}],
            usage={"input_tokens": 40, "output_tokens": len(text) // 4}))


def make_item(i: int) -> dict[str, Any]:
    """A typical assistant message, about 300 bytes as JSON."""
    return {"id": f"msg_{i:08d}", "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "annotations": [], "logprobs": [],
                         "text": f"Answer {i}: the weather in Paris is sunny with a light breeze, 21 degrees."}]}


def token() -> bytes:
    """A floor script's operation token: 16 random hex digits, as the package's writes send."""
    return os.urandom(8).hex().encode()


# -- ours, by the public API only: the one place a version's constructors are called --

def response_store(client: Redis, prefix: str) -> RedisResponseSessionStore:
    return RedisResponseSessionStore(client, key_prefix=prefix, max_depth=5000)


def item_session(client: Redis, prefix: str) -> RedisSession:
    return RedisSession(uuid.uuid4().hex, client=client, key_prefix=prefix, ttl=None)  # as the SDK: no TTL


RECORD_ENCODERS: tuple[tuple[str, tuple[Any, ...]], ...] = (
    ("redis_sessions.codec", (True, 1 << 30)),  # data format 1 on: compress, max_bytes
    ("redis_sessions.responses.store", (True, True)))  # before it: compact, compress
"""Where the package's ``encode_record`` has lived, and its arguments after the record for
one as the store sends it by default."""


def record_encoder(rec: StoredResponseSession, sent: bytes) -> tuple[str, Callable[[StoredResponseSession], bytes]]:
    """The one internal reached for (by the raw save, not by ours): the package's record
    encoder, so that raw redis-py pays for making the bytes the store sends (compact,
    compressed) as the store pays for them. Taken only where it makes exactly ``sent`` from
    ``rec``; elsewhere (it moved again, or encodes otherwise) a plain msgspec encode stands
    in, and the row's peer says which."""
    for module, args in RECORD_ENCODERS:
        try:
            encode: Callable[..., bytes] = getattr(importlib.import_module(module), "encode_record")
            if encode(rec, *args) == sent:
                return "the package's record encoder", lambda r: encode(r, *args)
        except Exception:  # noqa: BLE001 (not there, or not this signature)
            continue
    return "a plain msgspec encode", msgspec.msgpack.encode


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
            out.append(self.decoder.decode(await self.r.get(f"{self.prefix}:response:{cur}")))  # type: ignore[arg-type]
            cur = out[-1].previous_response_id
        return out[::-1]


async def turn(store: Any, head: str | None, i: int, size: int) -> str:
    """A gateway turn: resolve the chain of previous_response_id, save the new response."""
    if head is not None:
        await store.resolve_chain(head)
    rid: str = await store.new_response_id(head)
    await store.save(record(rid, head, i, size))
    return rid


async def conversations(store: Any, count: int, depth: int, size: int) -> list[str]:
    """``count`` conversations of ``depth`` turns, as a gateway makes them; their last ids."""
    heads: list[str] = []
    for c in range(count):
        head = None
        for i in range(depth):
            head = await turn(store, head, c * depth + i, size)
        heads.append(str(head))
    return heads


async def children(store: Any, parent: str, n: int, size: int) -> list[StoredResponseSession]:
    """``n`` records to save under ``parent``, each the child of the last."""
    recs: list[StoredResponseSession] = []
    for i in range(n):
        recs.append(record(await store.new_response_id(parent), parent, i + 1, size))
        parent = recs[-1].id
    return recs


async def to_save(store: Any, n: int, size: int) -> list[StoredResponseSession]:
    """A saved root and ``n`` records to save under it, each the child of the last."""
    return await children(store, await turn(store, None, 0, size), n, size)


# -- what a store sends, caught at the redis-py client ------------------------------

Sent = list[tuple[tuple[Any, ...], dict[str, Any], Any]]
"""Commands as a client sent them: (arguments, redis-py's options, the reply)."""


class Recorder(Redis):
    """A redis-py client that keeps every command it sends during :meth:`sent`, with its
    reply: what a store sends (its script's EVALSHA, KEYS and ARGV, say), of whatever
    version, as the server got it."""

    log: Sent | None = None

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        # A NOSCRIPT refusal raises here, so it is not kept (the EVAL after it is).
        reply = await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        if self.log is not None:
            self.log.append((args, dict(options), reply))
        return reply

    async def sent(self, call: Awaitable[Any]) -> tuple[Any, Sent]:
        """What ``call`` returned, and what it sent."""
        self.log = []
        try:
            return await call, self.log
        finally:
            self.log = None


def moved(sent: Sent, old: str, new: str) -> Sent:
    """``sent`` with every key and argument that names ``old`` (a key prefix) naming ``new``
    (one of the same length) instead: the same commands on fresh keys."""
    def move(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(old, new)
        if isinstance(value, bytes):
            return value.replace(old.encode(), new.encode())
        if isinstance(value, (list, tuple)):
            return type(value)(move(v) for v in value)
        return value
    return [(move(args), move_options, reply) for args, options, reply in sent
            for move_options in ({k: move(v) for k, v in options.items()},)]


async def replay(client: Redis, sent: Sent) -> None:
    """Send ``sent`` again, by hand; each reply must be the one the store had."""
    for args, options, reply in sent:
        got = await client.execute_command(*args, **options)  # type: ignore[no-untyped-call]
        if got != reply:
            raise RuntimeError(f"{args[0]} replayed answered {got!r}; the store's own answered {reply!r}")


def stored_bytes(sent: Sent, rec: StoredResponseSession) -> bytes:
    """``rec``'s bytes among what the store sent to save it: the argument that reads back
    as ``rec`` (redis_sessions.codec.decode_session reads what the store writes)."""
    for args, _, _ in sent:
        for arg in args:
            if isinstance(arg, bytes):
                try:
                    if decode_session(arg, "a captured save", rec.id) == rec:
                        return arg
                except Exception:  # noqa: BLE001 (any other argument: not the record)
                    continue
    raise RuntimeError(f"no argument of the save of {rec.id} reads back as its record")


# -- the floors ---------------------------------------------------------------------

TOKENS = (Path(__file__).resolve().parent / "floor_tokens.lua").read_text("utf-8")
"""The token ring (lua/tokens.lua as of 0288008, frozen), put in front of a floor script
that checks and remembers its token."""

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
and remembers its token in the key's ring (kept at index 0); the third also keeps the
popped item at index 1, so that a re-sent pop returns it (the least exactly-once needs: a
re-sent pop that found its token but not its item could only fail). None has the
header's counters (which compaction and forks check) or its bounds."""
LEAST_POP = "RPOP + token ring + its item kept"
"""The least exactly-once pop: issue 40's pop_item targets are taken against it."""

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
(the token ring) on one hash per chain, with the record's bytes as the store sends them,
and none of the rest (per-response expiry, indexes, anything that speeds a read)."""


# -- a tree's worker: every side it runs, each measured when the driver asks ---------------

Call = Callable[[int], Awaitable[object]]
Prepare = Callable[[int], Awaitable[Call]]

ITEM_OPS: dict[str, tuple[int | None, Callable[[Any, int], Awaitable[object]]]] = {
    "pop_item": (None, lambda s, i: s.pop_item()),  # a session of n items, popped n times
    "add_items (1 item)": (0, lambda s, i: s.add_items([make_item(i)])),
    "get_items(limit=20), 200 items": (200, lambda s, i: s.get_items(limit=20)),
    "get_items(), 200 items": (200, lambda s, i: s.get_items()),
}
"""Item calls: how many items the session holds first (None: as many as the round's
calls), and the call."""


def fixed(call: Call) -> Prepare:
    """A side whose every round makes the same calls (reads of what is already stored)."""
    async def prepare(n: int) -> Call:
        return call
    return prepare


def write_chains(url: str, prefix: str, count: int, depth: int, size: int) -> list[str]:
    """In a process of its own: ``count`` conversations of ``depth`` turns saved as a gateway
    saves them, so that the worker that reads them never saw them."""
    async def run() -> list[str]:
        r = Redis.from_url(url)
        try:
            return await conversations(response_store(r, prefix), count, depth, size)
        finally:
            await r.aclose()
    return asyncio.run(run())


def _turn_worker(url: str, tag: str, peers: bool, conn: Any) -> None:
    """A gateway worker process: for each job (side, conversations, turns, their depth
    first), it builds the conversations (untimed), says ready, waits for go, and sends back
    (turns, CPU s)."""
    async def run() -> None:
        r = Redis.from_url(url)
        stores: dict[str, Any] = {"ours": response_store(r, f"{tag}t")}
        if peers:
            stores["godex"] = Godex(r, f"{tag}t")
        while (job := conn.recv()) is not None:
            side, count, turns, depth = job
            store = stores[side]
            heads: list[str | None] = [*await conversations(store, count, depth, 700)] if depth else [None] * count
            conn.send("ready")
            conn.recv()
            cpu = time.process_time()
            for t in range(turns):
                for c, head in enumerate(heads):
                    heads[c] = await turn(store, head, 100 + t, 700)
            conn.send((turns * count, time.process_time() - cpu))
        await r.aclose()

    asyncio.run(run())


class Bench:
    """One tree's sides, in its worker process: ours, and with ``peers`` every peer's."""

    def __init__(self, url: str, tag: str, peers: bool) -> None:
        self.url, self.tag, self.peers = url, tag, peers
        self.clients: list[Redis] = []
        self.meter = self.client()
        self.sections: dict[str, dict[str, Prepare]] = {}
        self.noted: dict[str, str] = {}
        self.pools: dict[int, list[tuple[Any, Any]]] = {}
        self.children: list[Any] = []
        self.spawn = multiprocessing.get_context("spawn")
        self.writer = concurrent.futures.ProcessPoolExecutor(1, mp_context=self.spawn)

    def client(self, kind: type[Redis] = Redis) -> Any:
        self.clients.append(kind.from_url(self.url))
        return self.clients[-1]

    def prefix(self, kind: str) -> str:
        """A key prefix no other side shares, all of one length (see :func:`moved`)."""
        return f"{self.tag}{kind}{uuid.uuid4().hex[:8]}"

    async def answer(self, request: list[Any]) -> Any:
        what, *args = request
        return await getattr(self, what)(*args)

    async def run(self, section: list[Any], n: int, side: str) -> list[float]:
        """One round of ``side``: n calls, after their preparation (untimed)."""
        key = json.dumps(section)
        if key not in self.sections:
            kind, *args = section
            self.sections[key] = await getattr(self, f"build_{kind}")(*args, n)
        call = await self.sections[key][side](n)
        cpu, start = await redis_cpu(self.meter), time.perf_counter()
        for i in range(n):
            await call(i)
        wall = time.perf_counter() - start
        return [wall / n * 1e6, (await redis_cpu(self.meter) - cpu) / n * 1e6]

    async def build_items(self, op: str, n: int) -> dict[str, Prepare]:
        fill, act = ITEM_OPS[op]

        def prepared(make: Callable[[], Any]) -> Prepare:
            async def prepare(n: int) -> Call:
                s, count = make(), n if fill is None else fill
                for at in range(0, count, 100):
                    await s.add_items([make_item(i) for i in range(at, min(count, at + 100))])
                return lambda i: act(s, i)
            return prepare

        ours_r, prefix = self.client(), self.prefix("i")
        sides = {"ours": prepared(lambda: item_session(ours_r, prefix))}
        if not self.peers:
            return sides
        from agents.extensions.memory import RedisSession as SDKSession  # noqa: PLC0415 (slow import)

        sdk_r, sdk_prefix = self.client(), self.prefix("s")
        sides["sdk"] = prepared(lambda: SDKSession(uuid.uuid4().hex, redis_client=sdk_r, key_prefix=sdk_prefix))
        if op == "pop_item":
            floor_r = self.client()
            for name, source in POP_FLOORS.items():
                sides[name] = self.pop_floor(floor_r, await floor_r.script_load(source))
        return sides

    def pop_floor(self, r: Redis, sha: str) -> Prepare:
        async def prepare(n: int) -> Call:
            key = self.prefix("f")
            await r.rpush(key, b"", b"", *[msgspec.msgpack.encode(make_item(i)) for i in range(n)])

            async def call(i: int) -> None:
                msgspec.msgpack.decode(await r.evalsha(sha, 1, key, token()))
            return call
        return prepare

    async def captured(self, recorder: Recorder, n: int, size: int) -> tuple[str, Sent, list[StoredResponseSession], list[Sent]]:
        """A root and ``n`` records saved by the store on a scratch prefix, and what it sent
        for the root (its turn) and for each record's save."""
        scratch = self.prefix("c")
        store = response_store(recorder, scratch)
        rid, root = await recorder.sent(turn(store, None, 0, size))
        recs = await children(store, rid, n, size)
        return scratch, root, recs, [(await recorder.sent(store.save(rec)))[1] for rec in recs]

    async def build_save(self, size: int, n: int) -> dict[str, Prepare]:
        r = self.client()
        ours = response_store(r, self.prefix("o"))

        async def save_ours(n: int) -> Call:
            recs = await to_save(ours, n, size)
            return lambda i: ours.save(recs[i])

        if not self.peers:
            return {"ours": save_ours}
        recorder, godex, floor_sha = self.client(Recorder), Godex(r, self.prefix("g")), await r.script_load(SAVE_FLOOR)
        _, _, recs, saves = await self.captured(recorder, 1, size)
        how, encode = record_encoder(recs[0], stored_bytes(saves[0], recs[0]))
        self.noted[f"save {size}"] = f"raw redis-py: {how}, then the store's own commands"

        async def save_raw(n: int) -> Call:
            scratch, root, recs, saves = await self.captured(recorder, n, size)
            fresh = self.prefix("c")
            await replay(r, moved(root, scratch, fresh))
            sends = [moved(sent, scratch, fresh) for sent in saves]

            async def call(i: int) -> None:
                encode(recs[i])  # the bytes it makes are those in sends[i]
                await replay(r, sends[i])
            return call

        async def save_floor(n: int) -> Call:
            _, _, recs, saves = await self.captured(recorder, n, size)
            blobs, key = [stored_bytes(sent, rec) for sent, rec in zip(saves, recs)], f"{self.prefix('f')}{{x}}"
            await r.hset(key, f"p:{recs[0].previous_response_id}", "")

            async def call(i: int) -> None:
                rec = recs[i]
                args = (rec.id, rec.previous_response_id or "", blobs[i], token(), 30 * 86_400_000)
                assert await r.evalsha(floor_sha, 1, key, *args) in (b"ok", "ok")
            return call

        async def save_godex(n: int) -> Call:
            recs = await to_save(godex, n, size)
            return lambda i: godex.save(recs[i])

        return {"ours": save_ours, "raw": save_raw, "godex": save_godex, "floor": save_floor}

    async def build_get(self, n: int) -> dict[str, Prepare]:
        r = self.client()
        ours = response_store(r, self.prefix("o"))
        rid = await turn(ours, None, 0, 700)
        sides = {"ours": fixed(lambda i: ours.get(rid))}
        if not self.peers:
            return sides
        recorder = self.client(Recorder)
        store = response_store(recorder, self.prefix("c"))
        rid = await turn(store, None, 0, 700)
        expected, sent = await recorder.sent(store.get(rid))
        if len(sent) != 1:
            raise RuntimeError(f"a get sent {len(sent)} commands; the raw side reads with the one it sent")
        ((args, options, _),) = sent
        raw = self.client()

        async def get_raw(i: int) -> StoredResponseSession:
            data = await raw.execute_command(*args, **options)
            return decode_session(data[0] if isinstance(data, list) else data, rid, rid)

        assert await get_raw(0) == expected
        self.noted["get"] = f"raw {args[0]} + msgspec decode"
        return {**sides, "raw": fixed(get_raw)}

    async def build_resolve(self, depth: int, size: int, n: int) -> dict[str, Prepare]:
        """Chains of ``depth`` resolved by a store that never saw them: written by another
        process; read, one chain a call, by a store made for the round (warmed on a chain
        of its own), as a worker reads a conversation another worker served."""
        prefix, r = self.prefix("o"), self.client()
        leaves = await asyncio.get_running_loop().run_in_executor(
            self.writer, write_chains, self.url, prefix, n + 1, depth, size)

        async def resolve_ours(n: int) -> Call:
            store = response_store(r, prefix)
            assert len((await store.resolve_chain(leaves[0])).sessions) == depth
            return lambda i: store.resolve_chain(leaves[1 + i])

        if not self.peers or size != 700:
            return {"ours": resolve_ours}
        godex = Godex(self.client(), self.prefix("g"))
        godex_leaves = []
        for c in range(n):
            recs = await to_save(godex, depth - 1, size)
            for rec in recs:
                await godex.save(rec)
            godex_leaves.append(recs[-1].id)
        assert len(await godex.resolve_chain(godex_leaves[0])) == depth
        return {"ours": resolve_ours, "godex": fixed(lambda i: godex.resolve_chain(godex_leaves[i]))}

    async def gateway(self, procs: int, count: int, turns: int, depth: int, side: str) -> list[float]:
        """One round of gateway turns on ``procs`` processes: turns per second, worker
        CPU us per turn and Redis CPU us per turn."""
        if procs not in self.pools:
            pipes = [self.spawn.Pipe() for _ in range(procs)]
            for p, (_, child) in enumerate(pipes):
                self.children.append(self.spawn.Process(target=_turn_worker,
                                                        args=(self.url, self.prefix(f"w{p}"), self.peers, child)))
                self.children[-1].start()
            self.pools[procs] = pipes
        pipes = self.pools[procs]
        for conn, _ in pipes:
            conn.send((side, count, turns, depth))
        for conn, _ in pipes:
            assert conn.recv() == "ready"
        cpu, start = await redis_cpu(self.meter), time.perf_counter()
        for conn, _ in pipes:
            conn.send("go")
        done = [conn.recv() for conn, _ in pipes]
        wall, server = time.perf_counter() - start, await redis_cpu(self.meter) - cpu
        total = sum(t for t, _ in done)
        return [total / wall, sum(c for _, c in done) / total * 1e6, server / total * 1e6]

    async def memory(self, size: int, count: int, side: str) -> list[float]:
        """Bytes of every key a side wrote (MEMORY USAGE) per response, for ``count``
        conversations of 10 turns written as a gateway writes them."""
        r, prefix, n = self.client(), self.prefix("m"), count * 10
        if side == "ours":
            await conversations(response_store(r, prefix), count, 10, size)
        else:
            for c in range(count):
                parent = None
                for i in range(10):
                    rid = f"resp_{uuid.uuid4().hex}"
                    await r.set(f"{prefix}:response:{rid}", peer_json(record(rid, parent, c * 10 + i, size)),
                                px=30 * 86_400_000)
                    parent = rid
        used = [await r.memory_usage(k, samples=0) or 0 async for k in r.scan_iter(match=f"*{prefix}*", count=1000)]
        return [sum(used) / n]

    async def notes(self) -> dict[str, str]:
        """What a side found out that a row names (the command a get sent)."""
        return self.noted

    async def close(self) -> None:
        for pipes in self.pools.values():
            for conn, _ in pipes:
                conn.send(None)
        for child in self.children:
            child.join()
        self.writer.shutdown()
        for client in self.clients:
            await client.aclose()


def worker_main(url: str, tag: str, role: str) -> None:
    async def run() -> None:
        bench = Bench(url, tag, peers=role == "peers")
        try:
            await serve(bench.answer, where_imported())
        finally:
            await bench.close()
    asyncio.run(run())


# -- the driver: asks the workers for rounds, in turns, and makes the rows ------------------

Runs = dict[str, list[tuple[float, ...]]]


@dataclass
class Row:
    what: str
    peer: str
    ours: float
    theirs: float | None = None
    unit: str = "us"
    ratio: float | None = None
    sense: str = ""  # how the ratio is taken, e.g. "SDK time / ours"
    target: tuple[str, float] | None = None
    base: float | None = None  # the base's figure for ours
    moved: float | None = None  # new / base of that figure (median of the rounds')
    base_ratio: float | None = None  # the base's own ratio, taken as ``ratio`` is

    @property
    def met(self) -> str:
        if self.target is None or self.ratio is None:
            return ""
        return "yes" if (self.ratio >= self.target[1]) == (self.target[0] == ">=") else "no"


def compare(what: str, peer: str, runs: Runs, mine: str, theirs: str | None, at: int, unit: str, sense: str,
            flip: bool, target: tuple[str, float] | None) -> Row:
    """Figure ``at`` of ``mine``'s rounds against ``theirs``': each side's median round and
    the median of the rounds' ratios (``flip``: theirs / mine, a speed from times; else
    mine / theirs). Where ``mine`` is ours and a base ran, the base's figure beside it."""
    def ratio(x: list[tuple[float, ...]], y: list[tuple[float, ...]]) -> float:
        return med([(q[at] / p[at]) if flip else (p[at] / q[at]) for p, q in zip(x, y)])

    a, b = runs[mine], runs[theirs] if theirs else None
    base = runs.get("base") if mine == "ours" else None
    row = Row(what, peer, med([x[at] for x in a]), unit=unit, sense=sense, target=target)
    if b:
        row.theirs, row.ratio = med([x[at] for x in b]), ratio(a, b)
    if base:
        row.base, row.moved = med([x[at] for x in base]), med([p[at] / q[at] for p, q in zip(a, base)])
        row.base_ratio = ratio(base, b) if b else None
    return row


def pair(what: str, peer: str, runs: Runs, mine: str, theirs: str | None, short: str,
         speed: tuple[str, float] | None, cpu: tuple[str, float] | None, wall: bool = True) -> list[Row]:
    """A wall row (speed: theirs / ours) and a Redis CPU row (ours / theirs) of a measurement."""
    cpu_row = compare(f"{what}: Redis CPU per call", peer, runs, mine, theirs, 1, "us", f"ours / {short}", False, cpu)
    if not wall:
        return [cpu_row]
    return [compare(f"{what}: wall per call", peer, runs, mine, theirs, 0, "us", f"{short} time / ours", True, speed),
            cpu_row]


class Driver:
    """The workers, one per tree: ``ours`` (this checkout or --new, which also runs the
    peers) and, with --base, ``base``."""

    def __init__(self, workers: dict[str, Worker], rounds: int) -> None:
        self.workers, self.rounds = workers, rounds

    def measure(self, request: list[Any], peers: tuple[str, ...], rounds: int | None = None) -> Runs:
        """Per side, each round's answer to ``request``: the sides take turns, the order
        reversing each round, after a warm-up round (connections, script caches, processes)
        that is not kept. ``rounds=0``: one round, nothing to warm (a measure of memory)."""
        rounds = self.rounds if rounds is None else rounds
        ours = self.workers["ours"]
        sides = [("ours", ours, "ours"), *[("base", w, "ours") for w in self.workers.values() if w is not ours],
                 *[(peer, ours, peer) for peer in peers]]
        runs: Runs = {key: [] for key, _, _ in sides}
        for k in range(rounds + 1):
            for key, worker, side in sides[:: 1 if k % 2 else -1]:
                got = worker.ask([*request, side])
                if k or not rounds:
                    runs[key].append(tuple(got))
        return runs

    def notes(self) -> dict[str, str]:
        notes: dict[str, str] = self.workers["ours"].ask(["notes"])
        return notes


ITEM_TARGETS = {
    "pop_item": ((">=", 1.2), ("<=", 1.0)),
    "add_items (1 item)": (None, None),
    "get_items(limit=20), 200 items": ((">=", 1.2), ("<=", 1.5)),
    "get_items(), 200 items": ((">=", 2.0), ("<=", 1.5)),
}
"""Per item call, its targets against the SDK: speed (SDK time / ours) and Redis CPU (ours / SDK)."""


def item_rows(d: Driver, n: int) -> list[Row]:
    out = []
    for op, (speed, cpu) in ITEM_TARGETS.items():
        floors = tuple(POP_FLOORS) if op == "pop_item" else ()
        runs = d.measure(["run", ["items", op], n], ("sdk", *floors))
        out += pair(op, "agents RedisSession", runs, "ours", "sdk", "SDK", speed, cpu)
        for name in floors:
            out += pair(f"pop_item floor: {name}", "agents RedisSession", runs, name, "sdk", "SDK", None, None)
        if floors:
            out += pair("pop_item against the least exactly-once pop", f"floor: {LEAST_POP}", runs, "ours", LEAST_POP,
                        "floor", (">=", 0.9), ("<=", 1.2))
    return out


def response_rows(d: Driver, n: int) -> list[Row]:
    out = []
    for size, label in ((700, "0.7 KB"), (20_000, "20 KB")):
        runs = d.measure(["run", ["save", size], n], ("raw", "godex", "floor"))
        size_note = f"{label} ({len(msgspec.msgpack.encode(record('resp_' + '0' * 48, None, 0, size)))} B msgpack)"
        out += pair(f"save {size_note}", d.notes()[f"save {size}"], runs, "ours", "raw", "raw", (">=", 0.95), None)
        out += pair(f"save {label}", "GodeX-style EXISTS + SET PX of JSON", runs, "ours", "godex", "GodeX",
                    None, ("<=", 1.2), wall=False)
        out += pair(f"save {label} against its floor", "floor: parent check + token ring only", runs, "ours", "floor",
                    "floor", None, ("<=", 1.15), wall=False)
        out += pair(f"save {label} floor: parent check + token ring only", "GodeX-style EXISTS + SET PX of JSON",
                    runs, "floor", "godex", "GodeX", None, None, wall=False)
    runs = d.measure(["run", ["get"], n], ("raw",))
    out += pair("get 0.7 KB", d.notes()["get"], runs, "ours", "raw", "raw", (">=", 0.95), None)
    for depth, target in ((64, 9.5), (10, 4.5)):
        runs = d.measure(["run", ["resolve", depth, 700], n], ("godex",))
        out += pair(f"resolve_chain, depth {depth} of 0.7 KB, by a worker that did not save it",
                    "GodeX-style: one GET per hop", runs, "ours", "godex", "GodeX", (">=", target), None)
    return out


GATEWAYS = (("conversations of 10 turns", 1, 10, 0, (">=", 2.0), None),
            ("depth 10 to 35", 1, 25, 10, (">=", 2.5), ("<=", 0.4)),
            ("depth 10 to 35", 4, 25, 10, (">=", 2.5), ("<=", 0.4)))
"""Gateway rows: their conversations, worker processes, turns in each conversation, its
depth before them (0: it starts empty), and the targets for turns/s and worker CPU."""


def gateway_rows(d: Driver, fresh: int, continued: int) -> list[Row]:
    """``fresh`` conversations per worker and round that start empty, ``continued`` ones
    that go on from depth 10."""
    out, peer = [], "GodeX-style store"
    for what, procs, turns, depth, speed, cpu in GATEWAYS:
        runs = d.measure(["gateway", procs, continued if depth else fresh, turns, depth], ("godex",))
        what = f"gateway turn, {what}, {procs} worker process{'es' if procs > 1 else ''}"
        out += [compare(f"{what}: turns per second", peer, runs, "ours", "godex", 0, "turns/s", "ours / GodeX turns/s",
                        False, speed),
                compare(f"{what}: worker CPU per turn", peer, runs, "ours", "godex", 1, "us", "ours / GodeX", False, cpu),
                compare(f"{what}: Redis CPU per turn", peer, runs, "ours", "godex", 2, "us", "ours / GodeX", False, None)]
    return out


def memory_rows(d: Driver, count: int) -> list[Row]:
    out = []
    for size, label, target in ((700, "0.7 KB", 0.7), (20_000, "20 KB", 0.45)):
        runs = d.measure(["memory", size, count], ("godex",), rounds=0)
        out.append(compare(f"memory per stored response, {label} prose", "GodeX-style: one JSON string per response",
                           runs, "ours", "godex", 0, "B", "ours / GodeX", False, ("<=", target)))
    return out


def big_read_rows(d: Driver, n: int) -> list[Row]:
    runs = d.measure(["run", ["resolve", 64, 20_000], n], ())
    return pair("resolve_chain, depth 64 of 20 KB, by a worker that did not save it", "none", runs, "ours", None, "",
                None, None)


def figure(value: float | None, unit: str) -> str:
    return "" if value is None else f"{value:,.{1 if unit == 'us' else 0}f} {unit}"


def table(rows: list[Row], base: bool) -> str:
    """The rows as markdown; with a base, its figure for ours and new / base of that figure."""
    lines = ["| measurement | peer | ours | peer's | ratio | target | met |" + (" base | new / base |" if base else ""),
             "|---|---|---:|---:|---:|---:|---|" + ("---:|---:|" if base else "")]
    for row in rows:
        ratio = f"{row.ratio:.2f}x ({row.sense})" if row.ratio is not None else ""
        target = f"{'≥' if row.target[0] == '>=' else '≤'} {row.target[1]:g}" if row.target else ""
        line = f"| {row.what} | {row.peer} | {figure(row.ours, row.unit)} | {figure(row.theirs, row.unit)} | {ratio} " \
               f"| {target} | {row.met} |"
        if base:
            line += f" {figure(row.base, row.unit)} | {'' if row.moved is None else f'{row.moved:.2f}x'} |"
        lines.append(line)
    return "\n".join(lines)


def draw(rows: list[Row], path: str) -> None:
    """Every ratio as a bar from 1x (log scale), its target as a tick: green met, red not, grey
    no target; with a base, the base's ratio as a hollow circle."""
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
        if row.base_ratio is not None:
            ax.plot([row.base_ratio], [y], marker="o", markersize=5, fillstyle="none", color="black")
    ax.set_yticks(ys, [row.what for row in shown], fontsize=7)
    ax.set_xscale("log")
    ratios = [r for row in shown for r in (row.ratio, row.base_ratio) if r is not None]
    low, high = min([0.2, *(r / 1.25 for r in ratios)]), max([16, *(r * 2 for r in ratios)])  # room for each label
    ax.set_xlim(low, high)
    ticks = [2.0 ** k for k in range(-6, 8) if low <= 2.0 ** k <= high / 2]
    ax.set_xticks(ticks, [f"{t:g}x" for t in ticks])
    ax.minorticks_off()
    ax.axvline(1.0, color="black", linewidth=0.6)
    based = " (o the base's)" if any(row.base_ratio is not None for row in shown) else ""
    ax.set_title(f"redis_sessions against its peers: each ratio as the table takes it{based}, | its target", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, format="svg", metadata={"Date": None})
    plt.close(fig)


FRONT = (
    ("resolve_chain, depth 64 of 0.7 KB, by a worker that did not save it: wall per call",
     "resolve a chain 64 deep", "a store reading one GET per hop (GodeX-style)"),
    ("gateway turn, conversations of 10 turns, 1 worker process: turns per second",
     "gateway turns per second, 10-turn conversations", "a GodeX-style store"),
    ("add_items (1 item): wall per call", "add_items, one item", "the Agents SDK's RedisSession"),
    ("get_items(limit=20), 200 items: wall per call", "get_items(limit=20) of 200 items", "the Agents SDK's RedisSession"),
    ("get_items(), 200 items: wall per call", "get_items() of 200 items", "the Agents SDK's RedisSession"),
    ("memory per stored response, 0.7 KB prose", "memory per stored response (0.7 KB)", "one JSON string per response"),
)
"""The front picture's rows: the table's row, what it measures, and the peer."""


def front_rows(rows: list[Row]) -> list[tuple[str, float]]:
    """Each FRONT row as "what, against whom" and how many times better ours is than the
    peer (higher is better): a speed ratio as the table takes it (peer time / ours, ours /
    peer turns/s), a cost ratio (ours / peer) turned over."""
    by_name = {row.what: row for row in rows}
    out = []
    for name, what, peer in FRONT:
        row = by_name[name]
        assert row.ratio is not None and row.sense, name
        better = row.ratio if row.sense.endswith("/ ours") or row.sense.endswith("turns/s") else 1 / row.ratio
        out.append((f"{what}\nagainst {peer}", better))
    return out


def drawn_by(args: Any) -> list[str]:
    """The command that drew the picture, with its paths relative to the repository (only
    a file's name for a path outside it): no machine path goes into a picture."""
    def shown(path: str) -> str:
        rel = os.path.relpath(os.path.abspath(path), REPO)
        return Path(path).name if rel.startswith("..") else rel

    words = ["python", "benchmarks/bench_peers.py"]
    words += ["--quick"] if args.quick else ["--rounds", str(args.rounds), "--calls", str(args.calls)]
    words += ["--base", args.base] if args.base else []
    words += ["--svg", shown(args.svg)] if args.svg else []
    return words + ["--front", shown(args.front)]


def draw_front(rows: list[Row], path: str, caption: str) -> None:
    """The README's picture: what one gains, one measure a row, all "times better than the
    peer", higher is better, with the machine, the server and the command under it."""
    import matplotlib  # noqa: PLC0415 (only with --front)

    matplotlib.use("svg")
    matplotlib.rcParams["svg.fonttype"] = "none"
    import matplotlib.pyplot as plt  # noqa: PLC0415

    shown = front_rows(rows)[::-1]
    ys = list(range(len(shown)))
    fig, ax = plt.subplots(figsize=(8, 0.62 * len(shown) + 1.5))
    ax.barh(ys, [v for _, v in shown], color="#2e6f9e", height=0.6)
    for y, (_, value) in zip(ys, shown):
        ax.text(value, y, f"  {value:.1f}x", va="center", fontsize=9)
    ax.set_yticks(ys, [label for label, _ in shown], fontsize=8)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlim(0, max(v for _, v in shown) * 1.2)
    ax.set_xlabel("times better than the peer (higher is better; 1x = the same)", fontsize=8)
    ax.set_title("redis-sessions: what you gain", fontsize=10)
    fig.text(0.01, 0.01, caption, fontsize=6.5, color="#444444", va="bottom")
    fig.tight_layout(rect=(0, 0.09, 1, 1))
    fig.savefig(path, format="svg", metadata={"Date": None})
    plt.close(fig)


def run(args: Any) -> None:
    import redis  # noqa: PLC0415

    rounds, n = (1, 3) if args.quick else (args.rounds, args.calls)
    fresh, continued = (2, 2) if args.quick else (50, 20)
    tag, new = f"bp{uuid.uuid4().hex[:6]}", Path(args.new).resolve()
    head = subprocess.run(["git", "-C", str(new), "describe", "--always", "--dirty"],  # as measured, not as at the end
                          capture_output=True, text=True).stdout.strip() or "a tree outside git"
    against = f" against base {args.base} ({describe(REPO, args.base)}, git archive)" if args.base else ""
    with ExitStack() as stack:
        url = stack.enter_context(redis_url(args.url, apart=True))
        trees = {"ours": (new, "peers")}
        if args.base:
            trees["base"] = (stack.enter_context(checkout(args.base)), "ours")
        workers: dict[str, Worker] = {}
        try:
            for key, (tree, role) in trees.items():
                workers[key] = Worker(key, tree, __file__, "--worker", url, f"{tag}{key[0]}", role)
            d = Driver(workers, rounds)
            rows = item_rows(d, n) + response_rows(d, n) + gateway_rows(d, fresh, continued)
            rows += memory_rows(d, 2 if args.quick else 50) + big_read_rows(d, 3 if args.quick else 30)
        finally:
            for worker in workers.values():
                worker.close()
        with redis.Redis.from_url(url) as client:
            info = client.info("server")
            keys = list(client.scan_iter(match=f"*{tag}*", count=1000))
            for at in range(0, len(keys), 1000):
                client.unlink(*keys[at:at + 1000])
    print(f"redis-server {info.get('valkey_version', info['redis_version'])}"
          f"{' (valkey)' if 'valkey_version' in info else ''}, hiredis "
          f"{'installed' if importlib.util.find_spec('hiredis') else 'not installed'}, "
          f"Python {sys.version.split()[0]}, redis_sessions at {head}{against}")
    print(f"command: {shlex.join([os.path.relpath(sys.executable), *sys.argv])}")
    print(f"{rounds} alternating rounds of {n} sequential calls per side after a warm-up round (gateway: {fresh} "
          f"conversations of 10 turns from empty, or {continued} conversations x 25 turns from depth 10, per worker "
          f"and round); median round, ratios the median of the rounds' ratios"
          + ("; base: ours for the base's package, in the same rounds, and new / base of the figure in ours"
             if args.base else "") + "\n")
    print(table(rows, bool(args.base)))
    if args.svg:
        draw(rows, args.svg)
    if args.front:
        server = f"{'Valkey' if 'valkey_version' in info else 'redis-server'} " \
                 f"{info.get('valkey_version', info['redis_version'])}"
        draw_front(rows, args.front, f"{os.cpu_count()}-core shared machine, {server} over loopback, Python "
                   f"{sys.version.split()[0]}, hiredis {'installed' if importlib.util.find_spec('hiredis') else 'not installed'}; "
                   f"{rounds} alternating rounds, medians\ndrawn by: {shlex.join(drawn_by(args))}")


def main(argv: list[str] | None = None) -> None:
    p = parser(__doc__ or "")
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.set_defaults(rounds=7)
    p.add_argument("--calls", type=int, default=300, help="sequential calls per side and round")
    p.add_argument("--quick", action="store_true", help="one round of 3 calls per row: does the harness run")
    p.add_argument("--svg", metavar="PATH", help="also draw every ratio as a bar chart (matplotlib) to PATH")
    p.add_argument("--front", metavar="PATH", help="also draw the README's picture of what one gains to PATH")
    p.add_argument("--base", metavar="REV", help="also measure every row of ours for this commit's package")
    p.add_argument("--new", default=str(REPO), help="the tree to measure as ours (default this checkout, as it is)")
    p.add_argument("--worker", nargs=3, metavar=("URL", "TAG", "ROLE"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker_main(*args.worker)
    run(args)


if __name__ == "__main__":
    main()
