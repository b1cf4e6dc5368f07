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
import time
from typing import Any

import msgspec
from redis.asyncio import Redis

from _common import best_of, parser, redis_url
from redis_sessions import RedisResponseSessionStore, StoredResponseSession
from redis_sessions.codec import decode_session
from redis_sessions.ids import thread_of
from redis_sessions.responses.redis_engine import INLINE_BYTES, WALK_STEPS
from redis_sessions.responses.store import encode_record

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


async def best_server_us(r: Redis, sides: dict[str, Any], n: int, rounds: int = 5) -> dict[str, tuple[float, float]]:
    """``server_us`` of each side, alternating, best of ``rounds``: every side sees the
    same machine noise, and the best round the least of it."""
    best: dict[str, tuple[float, float]] = {}
    for _ in range(rounds):
        for name, calls in sides.items():
            got = await server_us(r, calls, n)
            if name not in best or got[0] < best[name][0]:
                best[name] = got
    return best


async def stored_bytes(r: Redis, key: str, fields: list[str]) -> int:
    pipe = r.pipeline(transaction=False)
    for f in fields:
        pipe.hstrlen(key, f)
    return sum(await pipe.execute())


async def chain(store: RedisResponseSessionStore, depth: int, size: int) -> list[str]:
    ids: list[str] = []
    parent = None
    for i in range(depth):
        rid = await store.new_response_id(parent)
        await store.save(sized(rid, parent, i, size))
        ids.append(rid)
        parent = rid
    return ids


async def resolve_costs(r: Redis, store: RedisResponseSessionStore) -> None:
    print("### Redis time per resolve_chain, next to one HMGET of the same records\n")
    previous = await r.script_load(PREVIOUS_WALK)
    # What any resolve in one round trip costs at the least: the records must come back
    # through a script, for only a script can learn the ancestors' names on the server.
    # This one is given the names and only returns the HMGET.
    relay = await r.script_load("return redis.call('HMGET', KEYS[1], unpack(ARGV))")
    print("| records | depth | stored KB | round trips | resolve us | HMGET us | ratio | before: walk copying records us "
          "| ratio | least one-round-trip script us | ratio | longest command us |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
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
            got = await best_server_us(r, {
                "ours": lambda: store.resolve_chain(leaf, max_depth=5000),
                "floor": lambda: r.hmget(key, fields),
                "old": lambda: r.evalsha(previous, 1, key, leaf, 5000, 0),
                "least": lambda: r.evalsha(relay, 1, key, *fields),
            }, n)
            (ours, longest), floor, old, least = got["ours"], got["floor"][0], got["old"][0], got["least"][0]
            print(f"| {label} | {depth} | {stored / 1024:,.1f} | {trips} | {ours:,.1f} | {floor:,.1f} | "
                  f"{ours / floor:.2f}x | {old:,.1f} | {old / floor:.2f}x | {least:,.1f} | {least / floor:.2f}x | {longest:,} |")
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
    print("### Memory per stored response: 200 conversations of 10 turns, MEMORY USAGE of every key\n")
    print("| record | peers: one JSON string per response | ours, ids minted here | ratio | ours, ids minted elsewhere "
          "| ratio | compact records, ids minted here | ratio | compact, minted elsewhere | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    n, turns = 2000, 10
    # Redis allocates in jemalloc's size classes (640, 768, ... bytes), so a saving shows
    # whole or not at all at one record size: the mixed row spreads the sizes evenly.
    for size, label in ((0, "0.7 KB"), (20_000, "20 KB"), (-1, "0.3 to 3 KB, mixed")):
        per: dict[str, float] = {}
        for mode in ("peer", "minted", "foreign", "minted compact", "foreign compact"):
            await r.flushall()
            store = RedisResponseSessionStore(r, key_prefix="m", max_depth=5000, compact_records="compact" in mode)
            parent = None
            for i in range(n):
                if i % turns == 0:
                    parent = None
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
    day = 0.02
    print("### A year of one turn and one regeneration a day (TTL 30 days; a day is 20 ms here)\n")
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
        ours, longest = await server_us(r, lambda: store.resolve_chain(parent, max_depth=1000), 20)
        before = store.round_trips
        snap = await store.resolve_chain(parent, max_depth=1000)
        print(f"| {'on' if expiry else 'off'} | {kept} | {total:,} | yes ({len(snap.sessions)}) | "
              f"{store.round_trips - before} | {ours:,.0f} | {longest:,} |")
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
        decode_session(await r.hget(f"bench:{{{thread_of(rid)}}}:chain", f"d:{rid}"), rid)

    res = await best_of(rounds, {"get": (get, 2000), "resolve": (resolve, 2000), "raw": (raw, 2000)})
    print("### Depth 1: one response, ops/s on one connection\n")
    print("| get | resolve_chain of a root | raw HGET + decode | get / raw | resolve / raw |")
    print("|---:|---:|---:|---:|---:|")
    print(f"| {res['get']:,.0f} | {res['resolve']:,.0f} | {res['raw']:,.0f} | {res['get'] / res['raw']:.2f} | "
          f"{res['resolve'] / res['raw']:.2f} |\n")


async def turn_cost(r: Redis, store: RedisResponseSessionStore) -> None:
    """One gateway turn (resolve the chain, save the next turn) against its floor: the
    same record bytes read with one HMGET, the new record written with HSET + PEXPIRE."""
    print("### Redis time per gateway turn (resolve, then save the next turn), next to its floor\n")
    # The least any turn whose save is a script costs: the records' HMGET, and a script
    # that only writes (HSET + PEXPIRE, none of a save's checks).
    bare = await r.script_load("redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) "
                               "return redis.call('PEXPIRE', KEYS[1], ARGV[3])")
    print("| records | chain depth | turn us | floor us (HMGET + HSET + PEXPIRE) | ratio "
          "| least with a save script us (HMGET + script of HSET + PEXPIRE) | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for size, label in ((0, "0.7 KB"), (20_000, "20 KB")):
        for depth in (1, 10, 64):
            heads = [(await chain(store, depth, size))[-1] for _ in range(30)]
            n = len(heads)

            async def turns() -> None:
                for i, head in enumerate(heads):
                    await store.resolve_chain(head, max_depth=5000)
                    rid = await store.new_response_id(head)
                    await store.save(sized(rid, head, depth, size))
                    heads[i] = rid

            ours = floor = least = float("inf")
            for _ in range(3):  # best of 3 alternating rounds; each round's turns go one deeper
                await r.slowlog_reset()
                await turns()
                ours = min(ours, sum(e["duration"] for e in sent(await r.slowlog_get(100_000))) / n)
                # the floor: the records of each chain read by one HMGET, the next written by HSET + PEXPIRE
                jobs = []
                for head in heads:
                    snap = await store.resolve_chain(head, max_depth=5000)
                    key = f"bench:{{{thread_of(head)}}}:chain"
                    jobs.append((key, [f"d:{s.id}" for s in snap.sessions[-depth:]],
                                 encode_record(sized(head, None, 0, size))))
                await r.slowlog_reset()
                for key, fields, blob in jobs:
                    await r.hmget(key, fields)
                    await r.hset(key + ":floor", "d:x", blob)
                    await r.pexpire(key + ":floor", 86_400_000)
                floor = min(floor, sum(e["duration"] for e in sent(await r.slowlog_get(100_000))) / n)
                await r.slowlog_reset()
                for key, fields, blob in jobs:
                    await r.hmget(key, fields)
                    await r.evalsha(bare, 1, key + ":floor", "d:x", blob, 86_400_000)
                least = min(least, sum(e["duration"] for e in sent(await r.slowlog_get(100_000))) / n)
            print(f"| {label} | {depth} | {ours:,.1f} | {floor:,.1f} | {ours / floor:.2f}x | {least:,.1f} | "
                  f"{least / floor:.2f}x |")
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
    print("| processes | turns/s | Redis us per turn | worker CPU us per turn |")
    print("|---:|---:|---:|---:|")
    ctx = multiprocessing.get_context("spawn")
    loop = asyncio.get_running_loop()
    for procs in (1, 2, 4):
        ready, go, out = ctx.Queue(), ctx.Event(), ctx.Queue()
        workers = [ctx.Process(target=_worker, args=(url, 25, ready, go, out)) for _ in range(procs)]
        for w in workers:
            w.start()
        for _ in workers:
            await loop.run_in_executor(None, ready.get)
        await r.slowlog_reset()
        start = time.perf_counter()
        go.set()
        results = [await loop.run_in_executor(None, out.get) for _ in workers]
        wall = time.perf_counter() - start
        for w in workers:
            w.join()
        top = sum(e["duration"] for e in sent(await r.slowlog_get(100_000)))
        turns = sum(d for d, _ in results)
        cpu = sum(c for _, c in results)
        print(f"| {procs} | {turns / wall:,.0f} | {top / turns:,.1f} | {cpu / turns * 1e6:,.0f} |")
    print()


async def main() -> None:
    args = parser(__doc__ or "").parse_args()
    with redis_url(args.url) as url:
        r = Redis.from_url(url)
        await r.config_set("slowlog-log-slower-than", 0)
        await r.config_set("slowlog-max-len", 100_000)
        store = RedisResponseSessionStore(r, key_prefix="bench", max_depth=5000)
        await resolve_costs(r, store)
        await inline_threshold(r, store)
        await depth_one(r, store, args.rounds)
        await turn_cost(r, store)
        await gateway_loop(r, url)
        await memory(r)
        await year(r)
        await r.aclose()


if __name__ == "__main__":
    asyncio.run(main())
