"""What a response chain costs the shard: Redis time per resolve next to its floor,
memory per response next to the peers' layout, depth 1 next to a raw HGET.

    python benchmarks/bench_chain_cost.py [--url redis://...] [--rounds 5]

Redis time is read from SLOWLOG with a threshold of 0: the duration of every command
a client sent, a script's inner commands included in it (SLOWLOG lists those too,
from the script's own client, and ``INFO commandstats`` counts them under their own
names as well: both are left out). The floor of a resolve is one HMGET of the same
records, sent by hand with the field names known. Memory is ``MEMORY USAGE`` of every
key, per response, over 2,000 responses. Run on one machine in one run, the sides of
each ratio alternating, best of 5 rounds (the depth-1 ops/s: of --rounds).
"""

from __future__ import annotations

import asyncio
import json
import random
import secrets
import time
from contextlib import asynccontextmanager
from statistics import median
from typing import Any, AsyncIterator

import msgspec
from redis.asyncio import Redis

from _common import logging_client, parser, redis_url
from redis_sessions import RedisResponseSessionStore, StoredResponseSession
from redis_sessions.codec import decode_session
from redis_sessions.responses.chain import build_snapshot
from redis_sessions.ids import thread_of
from redis_sessions.budget import bounded
from redis_sessions.responses.protocol import INLINE_BYTES
from redis_sessions.responses.redis_engine import WALK_STEPS
from redis_sessions.responses.names import NAMES_MIN
from redis_sessions.responses.store import encode_record
from redis_sessions.scripts import script

from bench_responses import record


PREVIOUS_WALK = """-- Walk parent pointers inside one thread hash and return the records, newest first.
-- KEYS[1]  the thread hash
-- ARGV[1]  the id to start from    ARGV[2] most records to return
-- ARGV[3]  sliding TTL in ms ('0' = do not touch the TTL); only a walk that
--          found its first record slides it
-- Returns {status, detail, record...}; status is 'ok' (reached a root),
-- 'missing' (detail = the id not found), 'cycle' (detail = the repeated id),
-- 'depth' (detail = the next id past the limit) or 'wrongtype'.
-- Reads first; the one write (the sliding TTL) comes last.
local key = KEYS[1]
local kind = redis.call('TYPE', key)['ok']
if kind == 'none' then return {'missing', ARGV[1]} end
if kind ~= 'hash' then return {'wrongtype', kind} end

local out = {'ok', ''}
local cur, n, limit, seen = ARGV[1], 0, tonumber(ARGV[2]), {}
while cur ~= '' do
  if seen[cur] then out[1] = 'cycle'; out[2] = cur; break end
  if n >= limit then out[1] = 'depth'; out[2] = cur; break end
  seen[cur] = true
  local rec = redis.call('HMGET', key, 'd:' .. cur, 'p:' .. cur)
  if not rec[1] then out[1] = 'missing'; out[2] = cur; break end
  n = n + 1
  out[n + 2] = rec[1]
  cur = rec[2] or ''
end

local ttl = tonumber(ARGV[3])
if ttl > 0 and n > 0 then
  local left = redis.call('PTTL', key)
  if left >= 0 and left < ttl then redis.call('PEXPIRE', key, ttl) end
end
return out
"""
"""lua/chain_walk.lua as it was before the walk stopped copying records (git 1212f4a):
the baseline of the "before" column."""


LEAST_BOOKED_SAVE = """-- A sketch of the least a save costs that keeps per-response expiry's books: one read
-- of every check (the ring, the record, its parent) and of the parent's leaf mark and the
-- leaf index; the clock; the parent's mark removed; the record, its pointer, the ring,
-- its own deadline, the index and the count in one HSET; the TTL. None of ours' other
-- work: no overwrite or expectation checks, no field count, no pruning, no jump lists.
-- KEYS[1] thread  ARGV[1] id  ARGV[2] parent  ARGV[3] record  ARGV[4] token  ARGV[5] TTL ms
local g = redis.call('HMGET', KEYS[1], 'ops', 'p:' .. ARGV[1], 'p:' .. ARGV[2], 'L', 'c', 'e:' .. ARGV[2])
if g[1] and string.find(g[1], ARGV[4], 1, true) then return 'ok' end
if g[2] then return 'exists' end
if not g[3] then return 'parent_missing' end
local t = redis.call('TIME')
local deadline = string.format('%013.0f', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[5]))
local L = g[4] or ''
if g[6] then
  local at = string.find(L, ' ' .. ARGV[2] .. '\\n', 1, true)
  if at then L = string.sub(L, 1, at - 14) .. string.sub(L, at + #ARGV[2] + 2) end
  redis.call('HDEL', KEYS[1], 'e:' .. ARGV[2])
end
redis.call('HSET', KEYS[1], 'd:' .. ARGV[1], ARGV[3], 'p:' .. ARGV[1], ARGV[2],
  'ops', ARGV[4] .. 'S' .. string.sub(g[1] or '', 1, 255), 'e:' .. ARGV[1], deadline,
  'L', L .. deadline .. ' ' .. ARGV[1] .. '\\n', 'c', tonumber(g[5] or '0') + 1)
redis.call('PEXPIRE', KEYS[1], ARGV[5], 'GT')
return 'ok'
"""
"""The turn table's least save that keeps the books: what the books themselves cost a
save, against what ours spends around them."""


SAVE_FUNCTION = "redis_sessions_bench_save"
"""The Redis Function library (and its one function) of the save as a Function, which a
benchmark loads and deletes once it is done."""


def save_as_function() -> str:
    """The store's save (lua/chain_save.lua and its libraries) as a Redis Function library:
    the libraries in front of the save become the library's own code, run once at
    ``FUNCTION LOAD``, where in front of a script they run on every call; the save's own
    lines are the function's body (``KEYS`` and ``ARGV`` its arguments)."""
    source = script("chain_save").source
    at = source.rindex("local reply, st = save_check")
    return (f"#!lua name={SAVE_FUNCTION}\n{source[:at]}\n"
            f"redis.register_function('{SAVE_FUNCTION}', function(KEYS, ARGV)\n{source[at:]}\nend)\n")


@asynccontextmanager
async def save_function(r: Any) -> AsyncIterator[None]:
    """:func:`save_as_function` loaded on ``r``'s server for the block, deleted after it."""
    await r.function_load(save_as_function(), replace=True)
    try:
        yield
    finally:
        await r.function_delete(SAVE_FUNCTION)


class SaveByFunction:
    """Stands in for a store's save script: the same keys and arguments, sent as an
    ``FCALL`` of :data:`SAVE_FUNCTION` (loaded by the caller)."""

    async def __call__(self, client: Redis, keys: list[str], args: list[Any]) -> Any:
        return await client.fcall(SAVE_FUNCTION, len(keys), *keys, *args)


def sized(rid: str, parent: str | None, i: int, size: int) -> StoredResponseSession:
    """The benchmark's small response (676 bytes stored), or one whose output is ``size`` bytes of text."""
    base = record(rid, parent, i)
    if not size:
        return base
    text = ("The weather is sunny and warm today. " * (size // 36 + 1))[:size]
    out = [{"type": "message", "role": "assistant", "id": f"msg_{i}", "content": [{"type": "output_text", "text": text}]}]
    return msgspec.structs.replace(base, response=msgspec.structs.replace(base.response, output=out, output_text=None))


def peer_json(value: Any) -> bytes:
    """The record as the peers store it: JSON of every field, defaults included (GodeX's JSON.stringify)."""
    def full(v: Any) -> Any:
        if isinstance(v, msgspec.Struct):
            return {f: full(getattr(v, f)) for f in v.__struct_fields__}
        if isinstance(v, list):
            return [full(x) for x in v]
        if isinstance(v, dict):
            return {k: full(x) for k, x in v.items()}
        return v
    return json.dumps(full(value), separators=(",", ":")).encode()


def sent(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The SLOWLOG entries of the commands a client sent: not the benchmark's own
    bookkeeping, and not the commands a script ran (logged too, from the script's
    client, ``?:0``, and already inside the script's duration)."""
    return [e for e in log if e["client_address"] not in (b"?:0", b"")
            and e["command"].split()[0].upper() not in (b"SLOWLOG", b"CONFIG", b"INFO")]


async def server_us(r: Redis, calls: Any, n: int) -> tuple[float, float]:
    """Server time per call (us), and the longest single command, from SLOWLOG (threshold
    0): each command the client sent, with its own duration, a script's inner commands
    inside the script's. (``INFO commandstats`` counts a script's inner commands a second
    time under their own names, so a resolve that runs HMGETs inside its walk and sends
    one of its own cannot be told apart there.)"""
    await r.slowlog_reset()
    for _ in range(n):
        await calls()
    mine = sent(await r.slowlog_get(100_000))
    return sum(e["duration"] for e in mine) / n, max(e["duration"] for e in mine)


class ServerCpu:
    """The CPU time of the server's main thread, the one that runs every command of the
    shard (ns, from ``/proc/<pid>/schedstat``, which the kernel keeps exactly), when the
    server runs on this machine. Unlike a command's duration it also counts what each
    round trip costs the server around the command: reading and parsing the request,
    writing the reply, the event loop (about 15-30 us a round trip here, against 1 us for
    a small HMGET's execution). SLOWLOG is off while it is read: logging each command,
    a script's inner ones too, would be counted."""

    def __init__(self, pid: int | None) -> None:
        self.path = f"/proc/{pid}/schedstat" if pid else None

    @classmethod
    async def of(cls, r: Redis) -> "ServerCpu":
        pid = int((await r.info("server"))["process_id"])
        try:
            with open(f"/proc/{pid}/comm") as comm:
                local = comm.read().strip().startswith(("redis-server", "valkey-server"))
        except OSError:
            local = False
        return cls(pid if local else None)

    def ns(self) -> int:
        assert self.path is not None
        with open(self.path) as f:
            return int(f.read().split()[0])

    async def us(self, r: Redis, calls: Any, n: int) -> float:
        """Main-thread CPU per call (us); NaN when the server is not on this machine."""
        if self.path is None:
            return float("nan")
        await r.config_set("slowlog-log-slower-than", -1)
        try:
            start = self.ns()
            for _ in range(n):
                await calls()
            return (self.ns() - start) / n / 1000
        finally:
            await r.config_set("slowlog-log-slower-than", 0)


CPU: ServerCpu = ServerCpu(None)
"""The benchmarked server's (set in main)."""


async def best_server_us(r: Redis, sides: dict[str, Any], n: int, rounds: int = 5) -> dict[str, tuple[float, float, list[float]]]:
    """``server_us`` of each side, best of ``rounds`` (every side sees the same machine
    noise, and the best round the least of it), and ``ServerCpu.us`` of each round, the
    sides alternating: a CPU ratio is taken round by round (``cpu_ratio``)."""
    took: dict[str, tuple[float, float]] = {}
    cpu: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, calls in sides.items():
            took[name] = min(took.get(name, (float("inf"), 0.0)), await server_us(r, calls, n))
            cpu[name].append(await CPU.us(r, calls, n))
    return {name: (*took[name], cpu[name]) for name in sides}


_order = random.Random(11)


def shuffled(names: Any) -> list[str]:
    """``names`` in an order of their own for this round (seeded: runs repeat)."""
    out = list(names)
    _order.shuffle(out)
    return out


def cpu_ratio(side: list[float], floor: list[float]) -> float:
    """The median over rounds of each round's ratio: both sides measured at one moment of
    a noisy machine, and no one lucky or unlucky round deciding."""
    return median([a / b for a, b in zip(side, floor)])


async def stored_bytes(r: Redis, key: str, fields: list[str]) -> int:
    pipe = r.pipeline(transaction=False)
    for f in fields:
        pipe.hstrlen(key, f)
    return sum(await pipe.execute())


async def chain(store: RedisResponseSessionStore, depth: int, size: int) -> list[str]:
    """A chain ``depth`` deep, built as a gateway builds one: a turn's save follows the
    resolve of its parent on the same worker, which hands the save the names it read
    (redis_sessions/responses/names.py), and mints its id as one that keeps a list where
    the chain will not come back inline (ids.marks_names). Only the turn where a deep
    chain's list starts and the tip are resolved here: the saves between carry the list on
    from their parent's, to the same fields, and the tip's id is what a gateway's is."""
    ids: list[str] = []
    parent = None
    for i in range(depth):
        if parent is not None and i in (NAMES_MIN - 1, depth - 1):
            await store.resolve_chain(parent, max_depth=5000)
        rid = await store.new_response_id(parent)
        await store.save(sized(rid, parent, i, size))
        ids.append(rid)
        parent = rid
    return ids


FOLLOW_POINTERS = ("local cur, f = ARGV[1], {} while cur ~= '' do f[#f + 1] = 'd:' .. cur "
                   "cur = redis.call('HGET', KEYS[1], 'p:' .. cur) end ")
"""The least walk by parent pointers (no checks, no limits, no lists): the field names of
the records in ``f``, for a script to return or HMGET."""


async def by_pointers(r: Redis, names_script: str, key: str, leaf: str) -> None:
    """The least two-round-trip resolve by pointers: the names, then one HMGET."""
    await r.hmget(key, await r.evalsha(names_script, 1, key, leaf))


async def cold_resolve(store: RedisResponseSessionStore, leaf: str) -> None:
    """A resolve by a worker that never saw the chain: the store's memo of it (its chains
    read by names, lua/chain_known.lua) is dropped first, so it walks, as another worker
    of the fleet would (a private of the store, touched here only)."""
    store._memo.forget(leaf)
    await store.resolve_chain(leaf, max_depth=5000)


async def resolve_costs(r: Redis, store: RedisResponseSessionStore) -> None:
    previous = await r.script_load(PREVIOUS_WALK)
    # What any resolve in one round trip costs at the least: the records must come back
    # through a script, for only a script can learn the ancestors' names on the server.
    # This one is given the names and only returns the HMGET.
    relay = await r.script_load("return redis.call('HMGET', KEYS[1], unpack(ARGV))")
    # What any walk by parent pointers costs at the least (no checks, no limits, no lists):
    # in one round trip, a script that follows the pointers and returns the HMGET of the
    # records; in two, one that returns the names, then HMGET.
    walk_one = await r.script_load(FOLLOW_POINTERS + "return redis.call('HMGET', KEYS[1], unpack(f))")
    walk_two = await r.script_load(FOLLOW_POINTERS + "return f")

    sides = ("ours", "cold", "floor", "old", "least", "walk_one", "walk_two")
    rows: list[tuple[str, int, float, int, dict[str, tuple[float, float, float]]]] = []
    for size, label in ((0, "0.7 KB"), (20_000, "20 KB"), (4_000, "4 KB")):
        for depth in ((1000,) if size == 4_000 else (1, 10, 64)):
            ids = await chain(store, depth, size)
            leaf = ids[-1]
            key = f"bench:{{{thread_of(leaf)}}}:chain"
            fields = [f"d:{x}" for x in reversed(ids)]
            stored = await stored_bytes(r, key, fields)
            await store.resolve_chain(leaf, max_depth=5000)
            before = store.round_trips
            await store.resolve_chain(leaf, max_depth=5000)
            trips = store.round_trips - before
            n = 20 if depth >= 64 else 200
            got = await best_server_us(r, dict(zip(sides, (
                lambda: store.resolve_chain(leaf, max_depth=5000),
                lambda: cold_resolve(store, leaf),
                lambda: r.hmget(key, fields),
                lambda: r.evalsha(previous, 1, key, leaf, 5000, 0),
                lambda: r.evalsha(relay, 1, key, *fields),
                lambda: r.evalsha(walk_one, 1, key, leaf),
                lambda: by_pointers(r, walk_two, key, leaf),
            ))), n)
            rows.append((label, depth, stored, trips, got))
    head = ("| resolve us | HMGET us | ratio | by a worker that never saw the chain | before: walk copying records | least one-round-trip script: "
            "given the names | by pointers | least two round trips: pointers, then HMGET |")
    print("### Redis time per resolve_chain, next to one HMGET of the same records\n")
    print("Command time (SLOWLOG: each command's execution, a script's inner commands inside it); "
          "the least-cost columns are ratios to the HMGET.\n")
    print("Ours: the worker that resolved or saved the chain last, which reads it by names where "
          "it comes back inline (lua/chain_known.lua); a worker that never saw it walks.\n")
    print("| records | depth | stored KB | round trips " + head + " longest command us |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, depth, stored, trips, got in rows:
        floor = got["floor"][0]
        print(f"| {label} | {depth} | {stored / 1024:,.1f} | {trips} | {got['ours'][0]:,.1f} | {floor:,.1f} | "
              + " | ".join(f"{got[side][0] / floor:.2f}x" for side in ("ours", "cold", "old", "least", "walk_one", "walk_two"))
              + f" | {got['ours'][1]:,} |")
    print("\nRedis CPU (the main thread's, read and reply included; see ServerCpu), same runs: "
          "medians of 5 rounds, each ratio taken round by round:\n")
    print("| records | depth " + head)
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, depth, stored, trips, got in rows:
        floor = got["floor"][2]
        print(f"| {label} | {depth} | {median(got['ours'][2]):,.1f} | {median(floor):,.1f} | "
              + " | ".join(f"{cpu_ratio(got[side][2], floor):.2f}x" for side in ("ours", "cold", "old", "least", "walk_one", "walk_two"))
              + " |")
    print()


async def inline_threshold(r: Redis, store: RedisResponseSessionStore) -> None:
    """Server time of the walk returning records itself against ids + HMGET, by chain bytes."""
    from redis_sessions.scripts import script
    walk = script("chain_walk")
    await r.script_load(walk.source)
    print("### The inline threshold: records through the walk's reply, or ids then HMGET\n")
    print("| chain KB | inline us | ids + HMGET us | inline wall us | ids + HMGET wall us |")
    print("|---:|---:|---:|---:|---:|")
    for depth in (1, 2, 4, 8, 16, 32):
        ids = await chain(store, depth, 900)
        leaf = ids[-1]
        key = f"bench:{{{thread_of(leaf)}}}:chain"
        fields = [f"d:{x}" for x in reversed(ids)]
        stored = await stored_bytes(r, key, fields)

        async def inline() -> None:
            await r.evalsha(walk.sha, 1, key, leaf, 5000, 0, 1 << 30, 1, WALK_STEPS)

        async def two() -> None:
            await r.evalsha(walk.sha, 1, key, leaf, 5000, 0, -1, 1, WALK_STEPS)
            await r.hmget(key, fields)

        got = await best_server_us(r, {"inline": inline, "two": two}, 200)
        a, b = got["inline"][0], got["two"][0]
        wall = {}
        for name, fn in (("inline", inline), ("two", two)):
            best = float("inf")
            for _ in range(5):
                start = time.perf_counter()
                for _ in range(200):
                    await fn()
                best = min(best, (time.perf_counter() - start) / 200 * 1e6)
            wall[name] = best
        print(f"| {stored / 1024:.1f} | {a:.1f} | {b:.1f} | {wall['inline']:.0f} | {wall['two']:.0f} |")
    print(f"\nINLINE_BYTES is {INLINE_BYTES:,}.\n")


async def memory(r: Redis) -> None:
    print("### Memory per stored response: 200 conversations of 10 turns (30 of 64 in the last row, its ids "
          "minted here keeping names lists), MEMORY USAGE of every key\n")
    print("| record | peers: one JSON string per response | full records (compact_records=False), ids minted here "
          "| ratio | full, ids minted elsewhere | ratio | compact records (the default), ids minted here | ratio "
          "| compact, minted elsewhere | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    # Redis allocates in jemalloc's size classes (640, 768, ... bytes), so a saving shows
    # whole or not at all at one record size: the mixed row spreads the sizes evenly.
    for size, label, turns in ((0, "0.7 KB", 10), (20_000, "20 KB", 10), (-1, "0.3 to 3 KB, mixed", 10),
                               (0, "0.7 KB, 64 turns", 64)):
        n = 2000 if turns == 10 else 30 * turns
        per: dict[str, float] = {}
        for mode in ("peer", "minted", "foreign", "minted compact", "foreign compact"):
            await r.flushall()
            store = RedisResponseSessionStore(r, key_prefix="m", max_depth=5000, compact_records="compact" in mode)
            parent = None
            for i in range(n):
                if i % turns == 0:
                    parent = None
                if parent is not None and i % turns == NAMES_MIN - 1 and mode != "peer":
                    await store.resolve_chain(parent)  # as a gateway (see chain): where a names list starts
                rid = await store.new_response_id(parent) if mode.startswith("minted") else f"resp_{i:048x}"
                rec = sized(rid, parent, i, size if size >= 0 else 300 + (i * 7919) % 2700)
                if mode == "peer":
                    await r.set(f"godex:response:{rid}", peer_json(rec), px=30 * 86_400_000)
                else:
                    await store.save(rec)
                parent = rid
            total = 0
            async for key in r.scan_iter(count=1000):
                total += await r.memory_usage(key, samples=0) or 0
            per[mode] = total / n
        shape = "" if size < 0 else (f" ({len(encode_record(sized('resp_' + '0' * 48, None, 0, size)))} B msgpack, "
                                     f"{len(peer_json(sized('resp_' + '0' * 48, None, 0, size)))} B JSON)")
        print(f"| {label}{shape} | {per['peer']:,.0f} | "
              f"{per['minted']:,.0f} | {per['minted'] / per['peer']:.2f}x | {per['foreign']:,.0f} | "
              f"{per['foreign'] / per['peer']:.2f}x | {per['minted compact']:,.0f} | "
              f"{per['minted compact'] / per['peer']:.2f}x | {per['foreign compact']:,.0f} | "
              f"{per['foreign compact'] / per['peer']:.2f}x |")
    print()


async def year(r: Redis) -> None:
    """One turn and one regeneration a day for a year, ids minted elsewhere, TTL 30 days,
    on the server's own clock with a day compressed to DAY seconds; per-response expiry
    on, side by side with it off (whole-thread expiry, the version before)."""
    day = 0.04  # the measurements after the year must fit in the TTL (1.2 s) of its last turn
    print("### A year of one turn and one regeneration a day (TTL 30 days; a day is 40 ms here)\n")
    print("| response_expiry | records kept | bytes kept | newest turn resolves (depth) | round trips | Redis us | longest command us |")
    print("|---|---:|---:|---|---:|---:|---:|")
    for expiry in (True, False):
        await r.flushall()
        store = RedisResponseSessionStore(r, key_prefix="y", max_depth=5000, ttl_seconds=30 * day,
                                          response_expiry=expiry)
        parent = None
        for d in range(365):
            turn, regen = f"resp_t{d:047x}", f"resp_r{d:047x}"
            await store.save(sized(regen, parent, d, 0))
            await store.save(sized(turn, parent, d, 0))
            parent = turn
            await asyncio.sleep(day)
        total = 0
        async for key in r.scan_iter(match="y:*", count=1000):
            total += await r.memory_usage(key, samples=0) or 0
        thread = (await r.get(f"y:{{l:{parent}}}:loc")).decode()
        fields = await r.hkeys(f"y:{{{thread}}}:chain")
        kept = sum(1 for f in fields if f.startswith(b"d:"))
        before = store.round_trips
        snap = await store.resolve_chain(parent, max_depth=1000)
        trips = store.round_trips - before
        ours, longest = await server_us(r, lambda: store.resolve_chain(parent, max_depth=1000), 20)
        print(f"| {'on' if expiry else 'off'} | {kept} | {total:,} | yes ({len(snap.sessions)}) | "
              f"{trips} | {ours:,.0f} | {longest:,} |")
    print()


async def depth_one(r: Redis, store: RedisResponseSessionStore, rounds: int) -> None:
    ids = [await store.new_response_id() for _ in range(2000)]
    for i, rid in enumerate(ids):
        await store.save(sized(rid, None, i, 0))

    async def get(i: int) -> None:
        await store.get(ids[i])

    async def resolve(i: int) -> None:
        await store.resolve_chain(ids[i])

    async def raw(i: int) -> None:
        rid = ids[i]
        decode_session(await r.hget(f"bench:{{{thread_of(rid)}}}:chain", f"d:{rid}"), rid, rid)

    async def raw_items(i: int) -> None:
        """What resolve_chain answers besides the record: the snapshot and its input items."""
        rid = ids[i]
        session = decode_session(await r.hget(f"bench:{{{thread_of(rid)}}}:chain", f"d:{rid}"), rid, rid)
        build_snapshot(rid, [session], include_incomplete=False, replay_instructions=False)

    class Least:
        """The least a store costs that keeps ours' per-call timeout budget (the same
        ``bounded``): the raw read, and the raw read that builds the snapshot."""
        timeout = store.timeout

        @bounded
        async def get(self, i: int) -> None:
            await raw(i)

        @bounded
        async def resolve(self, i: int) -> None:
            await raw_items(i)

    least = Least()
    # Interleaved op by op (each op of one id, then the next id), so that all see the same
    # moment of a noisy machine; a round's ratio is of its total times, and the rounds'
    # median is reported.
    ops = {"get": get, "resolve": resolve, "raw": raw, "raw_items": raw_items,
           "least_get": least.get, "least_resolve": least.resolve}
    names = list(ops)
    orders = [names[k:] + names[:k] for k in range(len(names))]  # each name first in one of them
    sides = {"get": ("raw", "get"), "resolve": ("raw", "resolve"), "resolve_items": ("raw_items", "resolve"),
             "least_get": ("raw", "least_get"), "least_resolve": ("raw", "least_resolve"),
             "get_least": ("least_get", "get"), "resolve_least": ("least_resolve", "resolve")}
    ratios: dict[str, list[float]] = {name: [] for name in sides}
    best = {name: 0.0 for name in ops}
    clock = time.perf_counter
    for _ in range(max(rounds, 9)):
        spent = dict.fromkeys(ops, 0.0)
        for i in range(2000):
            for name in orders[i % len(orders)]:  # each goes first, second, ... in turn: the later
                start = clock()         # ones find the record warm in every cache
                await ops[name](i)
                spent[name] += clock() - start
        for name in ops:
            best[name] = max(best[name], 2000 / spent[name])
        for name, (base, side) in sides.items():
            ratios[name].append(spent[base] / spent[side])
    middle = {name: median(v) for name, v in ratios.items()}
    print("### Depth 1: one response, ops/s on one connection\n")
    print("| get | resolve_chain of a root | raw HGET + decode | get / raw | resolve / raw "
          "| resolve / (raw + the input items any resolve builds) | least with the budget: get / raw "
          "| resolve / raw | ours / least: get | resolve |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| {best['get']:,.0f} | {best['resolve']:,.0f} | {best['raw']:,.0f} | "
          + " | ".join(f"{middle[name]:.3f}" for name in sides) + " |\n")
    print("Rounds' ranges: " + ", ".join(f"{side.replace('_', ' ')} / {base.replace('_', ' ')} {min(v):.3f}-{max(v):.3f}"
                                         for (base, side), v in zip(sides.values(), ratios.values())) + "\n")


async def turn_cost(r: Redis, store: RedisResponseSessionStore) -> None:
    """One gateway turn (resolve the chain, save the next turn) against its floor: the
    same record bytes read with one HMGET, the new record written with HSET + PEXPIRE."""
    print("### Redis time per gateway turn (resolve, then save the next turn), next to its floor\n")
    # The least any turn whose save is a script costs: the records' HMGET, and a script
    # that only writes (HSET + PEXPIRE, none of a save's checks).
    bare = await r.script_load("redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) "
                               "return redis.call('PEXPIRE', KEYS[1], ARGV[3])")
    booked = await r.script_load(LEAST_BOOKED_SAVE)
    # Ours with its save made a Redis Function: a store of its own (its own memo of the
    # chains it served), whose engine sends the save's keys and arguments as an FCALL.
    by_function = RedisResponseSessionStore(r, key_prefix="bench", max_depth=5000)
    by_function.engine._save = SaveByFunction()  # type: ignore[attr-defined]
    async with save_function(r):
        await _turn_table(r, store, by_function, bare, booked)


async def _turn_table(r: Redis, store: RedisResponseSessionStore, by_function: RedisResponseSessionStore,
                      bare: str, booked: str) -> None:
    print("Ours: the worker that served the conversation's last turn (it reads the chain by names where "
          "it comes back inline); cold: a worker that never saw it, which walks, then saves the next turn. "
          "Every side has chains of its own; the floor, touched, reads ours' right after ours. "
          "The last column is ours with its save loaded once as a Redis Function and called with FCALL, "
          "its libraries defined at load rather than on every call.\n")
    print("| records | chain depth | turn us | floor us (HMGET + HSET + PEXPIRE) | ratio | cold turn ratio "
          "| least with a save script us (HMGET + script of HSET + PEXPIRE) | ratio "
          "| least with a save that keeps the books us | ratio "
          "| Redis CPU: turn us | floor us | ratio | cold turn ratio | least with a save script ratio "
          "| least with a save that keeps the books ratio | our resolve + that least save ratio "
          "| ours to the floor, touched (reading ours' records after ours) "
          "| ours with its save a Redis Function (FCALL) ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size, label in ((0, "0.7 KB"), (20_000, "20 KB")):
        for depth in (1, 10, 64):
            # Each measurement has chains of its own, made for it, exactly ``depth`` deep,
            # a set for every side: a save through the store under a chain's tip moves the
            # tip's names list to the new record (a second reader of the old tip would read
            # a regeneration's chain), and records a side has just read are warm in the
            # CPU's caches for the next. The order the sets are made in, and the sides run
            # in, is shuffled every round. Only "floor, touched" reads ours' records right
            # after ours did, as the floor did before the eleventh day.
            n = 30  # chains per measurement and set
            names = ("ours", "cold", "floor", "least", "booked", "read_booked", "function")
            sets: dict[str, tuple[list[str], list[tuple[str, list[str], bytes]]]] = {
                name: ([], []) for name in names}

            async def fresh() -> None:
                for name in shuffled(names):
                    set_heads, set_jobs = sets[name]
                    set_heads[:], set_jobs[:] = [], []
                    for _ in range(n):
                        ids = await chain(by_function if name == "function" else store, depth, size)
                        key = f"bench:{{{thread_of(ids[-1])}}}:chain"
                        set_heads.append(ids[-1])
                        set_jobs.append((key, [f"d:{x}" for x in ids], encode_record(sized(ids[-1], None, 0, size))))
                        # the books' sketch saves into a copy of the head's books, the head a leaf
                        leaf = f"{int(time.time() * 1000) + 86_400_000:013d} {ids[-1]}\n"
                        await r.hset(key + ":books", mapping={f"p:{ids[-1]}": "", f"e:{ids[-1]}": leaf[:13], "L": leaf})

            def store_turns(name: str, resolve: Any, via: RedisResponseSessionStore = store) -> Any:
                """Turns through the store ``via``: ``resolve`` the tip, then save the next turn."""
                async def batch() -> None:
                    for head in sets[name][0]:
                        await resolve(head)
                        rid = await via.new_response_id(head)
                        await via.save(sized(rid, head, depth, size))
                return batch

            def floor_of(name: str) -> Any:
                async def floor_turns() -> None:
                    for key, fields, blob in sets[name][1]:
                        await r.hmget(key, fields)
                        await r.hset(key + ":floor", "d:x", blob)
                        await r.pexpire(key + ":floor", 86_400_000)
                return floor_turns

            async def least_turns() -> None:
                for key, fields, blob in sets["least"][1]:
                    await r.hmget(key, fields)
                    await r.evalsha(bare, 1, key + ":floor", "d:x", blob, 86_400_000)

            def booked_of(name: str, by_store: bool) -> Any:
                """The sketch's save into a copy of the books, after the floor's HMGET, or
                (``by_store``) after ours' read: the least one-round-trip read that learns the
                records' size before it copies them (the 5 ms bound), so how near a turn that
                keeps both comes, whatever its save spends."""
                async def batch() -> None:
                    heads, jobs = sets[name]
                    for (key, fields, blob), head in zip(jobs, heads):
                        if by_store:
                            await store.resolve_chain(head, max_depth=5000)
                        else:
                            await r.hmget(key, fields)
                        await r.evalsha(booked, 1, key + ":books", f"x{secrets.token_hex(8)}", head, blob,
                                        secrets.token_hex(8), 86_400_000)
                return batch

            sides = {"ours": store_turns("ours", lambda head: store.resolve_chain(head, max_depth=5000)),
                     "cold": store_turns("cold", lambda head: cold_resolve(store, head)),
                     "floor": floor_of("floor"), "least": least_turns, "booked": booked_of("booked", False),
                     "read_booked": booked_of("read_booked", True), "floor_touched": floor_of("ours"),
                     "function": store_turns("function", lambda head: by_function.resolve_chain(head, max_depth=5000),
                                             by_function)}
            took = dict.fromkeys(sides, float("inf"))
            cpu: dict[str, list[float]] = {name: [] for name in sides}
            for _ in range(5):  # best of 5 rounds (CPU: medians of per-round ratios)
                for measured in ("time", "cpu"):
                    await fresh()
                    order = shuffled(names)
                    order.insert(order.index("ours") + 1, "floor_touched")
                    for name in order:
                        if measured == "time":
                            took[name] = min(took[name], (await server_us(r, sides[name], 1))[0] / n)
                        else:
                            cpu[name].append(await CPU.us(r, sides[name], 1) / n)
                    await r.delete(*[k + suffix for _, set_jobs in sets.values() for k, _, _ in set_jobs
                                     for suffix in ("", ":floor", ":books")])
            ours, floor, least, books = took["ours"], took["floor"], took["least"], took["booked"]
            print(f"| {label} | {depth} | {ours:,.1f} | {floor:,.1f} | {ours / floor:.2f}x | {took['cold'] / floor:.2f}x | {least:,.1f} | "
                  f"{least / floor:.2f}x | {books:,.1f} | {books / floor:.2f}x | {median(cpu['ours']):,.1f} | "
                  f"{median(cpu['floor']):,.1f} | {cpu_ratio(cpu['ours'], cpu['floor']):.2f}x | "
                  f"{cpu_ratio(cpu['cold'], cpu['floor']):.2f}x | "
                  f"{cpu_ratio(cpu['least'], cpu['floor']):.2f}x | {cpu_ratio(cpu['booked'], cpu['floor']):.2f}x | "
                  f"{cpu_ratio(cpu['read_booked'], cpu['floor']):.2f}x | "
                  f"{cpu_ratio(cpu['ours'], cpu['floor_touched']):.2f}x | "
                  f"{cpu_ratio(cpu['function'], cpu['floor']):.2f}x |")
    print()


def _worker(url: str, rounds: int, ready: Any, go: Any, out: Any) -> None:
    async def run() -> tuple[int, float]:
        r = Redis.from_url(url)
        store = RedisResponseSessionStore(r, key_prefix="gw", max_depth=5000)
        heads = [(await chain(store, 10, 0))[-1] for _ in range(20)]
        ready.put(1)
        go.wait()
        done, cpu0 = 0, time.process_time()
        for _ in range(rounds):
            for i, head in enumerate(heads):
                await store.resolve_chain(head, max_depth=5000)
                rid = await store.new_response_id(head)
                await store.save(sized(rid, head, 10, 0))
                heads[i] = rid
                done += 1
        cpu = time.process_time() - cpu0
        await r.aclose()
        return done, cpu

    out.put(asyncio.run(run()))


async def gateway_loop(r: Redis, url: str) -> None:
    import multiprocessing
    print("### The gateway loop: processes each continuing 20 conversations of 0.7 KB turns 25 times (depth 10 to 35)\n")
    print("| processes | turns/s | Redis us per turn (commands) | Redis CPU us per turn (main thread) "
          "| worker CPU us per turn |")
    print("|---:|---:|---:|---:|---:|")
    ctx = multiprocessing.get_context("spawn")
    loop = asyncio.get_running_loop()

    async def run(procs: int, logged: bool) -> tuple[float, float, float, int]:
        """Wall seconds, Redis us (SLOWLOG when ``logged``, else main-thread CPU), worker
        CPU seconds, turns."""
        ready, go, out = ctx.Queue(), ctx.Event(), ctx.Queue()
        workers = [ctx.Process(target=_worker, args=(url, 25, ready, go, out)) for _ in range(procs)]
        for w in workers:
            w.start()
        for _ in workers:
            await loop.run_in_executor(None, ready.get)
        await r.slowlog_reset()
        await r.config_set("slowlog-log-slower-than", 0 if logged else -1)
        cpu0 = CPU.ns() if CPU.path else 0
        start = time.perf_counter()
        go.set()
        results = [await loop.run_in_executor(None, out.get) for _ in workers]
        wall = time.perf_counter() - start
        server = (CPU.ns() - cpu0) / 1000 if CPU.path else float("nan")
        await r.config_set("slowlog-log-slower-than", 0)
        for w in workers:
            w.join()
        if logged:
            server = sum(e["duration"] for e in sent(await r.slowlog_get(100_000)))
        return wall, server, sum(c for _, c in results), sum(d for d, _ in results)

    for procs in (1, 2, 4):
        _, commands, _, logged_turns = await run(procs, True)
        wall, server_cpu, cpu, turns = await run(procs, False)  # the turns/s of a server not logging
        print(f"| {procs} | {turns / wall:,.0f} | {commands / logged_turns:,.1f} | {server_cpu / turns:,.1f} | "
              f"{cpu / turns * 1e6:,.0f} |")
    print()


def _pinger(url: str, seconds: float, out: Any) -> None:
    """Another client of the server, in a process of its own: its PINGs' waits (s)."""
    import redis

    client = redis.Redis.from_url(url)
    client.ping()
    waits, end = [], time.time() + seconds
    while time.time() < end:
        start = time.perf_counter()
        client.ping()
        waits.append(time.perf_counter() - start)
    out.put(sorted(waits))


async def longest_hold(r: Redis, url: str) -> None:
    """The store's largest records, 64 of 1 MiB (less a little, so that each fits
    ``max_record_bytes``): the longest command of a resolve, and what another client,
    in its own process, waits for a PING meanwhile, resolves running back to back (and
    with none: the machine's own stalls)."""
    import multiprocessing

    print("### The longest hold: resolves of 64 records of 1 MiB, back to back\n")
    store = RedisResponseSessionStore(r, key_prefix="hold", max_depth=5000)
    ids = await chain(store, 64, (1 << 20) - 4096)
    await store.resolve_chain(ids[-1])
    before = store.round_trips
    await store.resolve_chain(ids[-1])
    trips = store.round_trips - before
    ctx = multiprocessing.get_context("spawn")
    loop = asyncio.get_running_loop()
    print("| resolves | round trips each | longest command us | other client's PING: median ms | 99.9th percentile ms | most ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, busy in (("none", False), ("back to back", True)):
        out = ctx.Queue()
        pinger = ctx.Process(target=_pinger, args=(url, 4.0, out))
        pinger.start()
        await asyncio.sleep(0.5)  # the pinger's process started and connected
        await r.slowlog_reset()
        end = time.time() + 3.0
        while time.time() < end:
            if busy:
                await store.resolve_chain(ids[-1])
            else:
                await asyncio.sleep(0.05)
        waits = await loop.run_in_executor(None, out.get)
        pinger.join()
        longest = max((e["duration"] for e in sent(await r.slowlog_get(100_000))), default=0)
        print(f"| {label} | {trips if busy else '-'} | {longest:,} | {waits[len(waits) // 2] * 1000:.2f} | "
              f"{waits[int(len(waits) * 0.999)] * 1000:.2f} | {waits[-1] * 1000:.1f} |")
    await r.delete(store.keys.thread(thread_of(ids[-1])))
    print()


async def main() -> None:
    args = parser(__doc__ or "").parse_args()
    with redis_url(args.url) as url:
        r = await logging_client(url, 100_000)
        global CPU
        CPU = await ServerCpu.of(r)
        store = RedisResponseSessionStore(r, key_prefix="bench", max_depth=5000)
        await resolve_costs(r, store)
        await inline_threshold(r, store)
        await depth_one(r, store, args.rounds)
        await turn_cost(r, store)
        await gateway_loop(r, url)
        await longest_hold(r, url)
        await memory(r)
        await year(r)
        await r.aclose()


if __name__ == "__main__":
    asyncio.run(main())
