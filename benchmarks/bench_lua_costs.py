"""The unit costs the code's comments reason with, measured: what Redis's Lua charges for
the bytes a script is handed, makes and hands back, for the small operations the chain
scripts run on every call, and what the codec pays per record in Python; and a save's
Redis CPU taken apart, from bench_peers.py's floor (the parent check and the token ring)
up to the store's own script, step by step, in alternating rounds.

    python benchmarks/bench_lua_costs.py [--url redis://...]

Server figures are Redis CPU (the ``INFO cpu`` delta) per call, or per operation timed by
``TIME`` inside one script; a private ``redis-server`` on a free port unless ``--url`` is
given. docs/benchmarks.md#unit-costs keeps the latest output; the docstrings that rely on
a figure link there rather than copy it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import msgspec
from redis.asyncio import Redis

from _common import parser, redis_url
from bench_peers import SAVE_FLOOR, TOKENS, record
import random
import statistics
import uuid

from redis_sessions import RedisResponseSessionStore, new_response_id
from redis_sessions import codec
from redis_sessions.scripts import script
from redis_sessions.tokens import new_token

KB = 1024
CALLS = 2000

OPS = {
    "string.match of a thread header": "local a, b, c, d = string.match(h, '^1 (%d+) ([01]) (%d+) (%d+)$')",
    "string.format('%.0f', ms)": "local s = string.format('%.0f', 1733430000000 + i)",
    "a table of 8 strings": "local t = {'d:' .. h, 'x', 'p:' .. h, 'y', 'ops', 'z', 'e:' .. h, 'v'}",
    "a closure": "local g = function(a) return a end",
    "a 3-part concatenation": "local s = 'd:' .. h .. 'x'",
}


async def cpu_us(r: Redis) -> float:
    info = await r.info("cpu")
    return (float(info["used_cpu_sys"]) + float(info["used_cpu_user"])) * 1e6


async def per_call(r: Redis, calls: int, send: Any) -> float:
    """Redis CPU per call of ``send(pipe)``, sent in pipelines of 200."""
    before = await cpu_us(r)
    for start in range(0, calls, 200):
        pipe = r.pipeline(transaction=False)
        for _ in range(min(200, calls - start)):
            send(pipe)
        await pipe.execute()
    return (await cpu_us(r) - before) / calls


async def server_rows(r: Redis) -> list[tuple[str, str]]:
    rows = []
    bare = await r.script_load("return 1")
    heads = {name: await r.script_load(script(name).source.replace(open_script(name), "") + "\nreturn 1")
             for name in ("chain_save", "chain_walk", "items_pop")}
    base = await per_call(r, CALLS, lambda p: p.evalsha(bare, 0))
    rows.append(("an EVALSHA that returns 1", f"{base:.1f} us"))
    for name, sha in heads.items():
        cost = await per_call(r, CALLS, lambda p, sha=sha: p.evalsha(sha, 0)) - base
        rows.append((f"the definitions in front of {name}.lua, run on every call", f"{cost:.1f} us"))
    for size in (64, 1024):
        arg = b"x" * (size * KB)
        cost = await per_call(r, 300, lambda p: p.evalsha(bare, 0, arg)) - base
        rows.append((f"an argument of {size} KB handed to a script, per KB", f"{cost / size:.2f} us"))
    await r.set("lc:big", b"x" * (64 * KB))
    back = await r.script_load("return redis.call('GET', KEYS[1])")
    via = await per_call(r, 300, lambda p: p.evalsha(back, 1, "lc:big"))
    plain = await per_call(r, 300, lambda p: p.get("lc:big"))
    rows.append(("64 KB returned through a script, against a plain GET, per KB", f"{(via - plain) / 64:.2f} us"))
    made = await r.script_load("local s = string.rep('x', tonumber(ARGV[1])) return #s")
    cost = await per_call(r, 300, lambda p: p.evalsha(made, 0, 64 * KB)) - await per_call(r, 300, lambda p: p.evalsha(made, 0, 0))
    rows.append(("a string a script makes, per KB", f"{cost / 64:.2f} us"))
    await r.delete("lc:big")
    loops = 100_000
    for name, body in OPS.items():
        src = (f"local h = '1 20099 1 0 99999999999999'\nlocal t0 = redis.call('TIME')\n"
               f"for i = 1, {loops} do {body} end\nlocal t1 = redis.call('TIME')\n"
               "return (t1[1] - t0[1]) * 1000000 + (t1[2] - t0[2])")
        best = min([await r.eval(src, 0) for _ in range(5)])
        rows.append((f"Lua: {name}", f"{best / loops * 1000:.0f} ns"))
    return rows


BOOKS = TOKENS + """
local key, id, parent, tok = KEYS[1], ARGV[1], ARGV[2], ARGV[4]
local got = redis.call('HMGET', key, 'h', 'ops', 'p:' .. id, 'p:' .. parent, 'e:' .. parent, 'k:' .. parent, 'l:' .. parent)
local h = got[1]
if not h or string.byte(h, 1) ~= 49 or string.byte(h, 2) ~= 32 then return 'v' end
local done = token_find(got[2], tok)
if done then return done end
if got[3] then return 'exists' end
if parent ~= '' and not got[4] then return 'no parent' end
local now = server_ms()
redis.call('HSET', key, 'd:' .. id, ARGV[3], 'p:' .. id, parent, 'ops', token_push(got[2], tok, 'S', now),
           'e:' .. id, string.format('%.0f', now + tonumber(ARGV[5])))
if got[5] then redis.call('HDEL', key, 'e:' .. parent) end
redis.call('PEXPIRE', key, ARGV[5], 'GT')
return 'ok'
"""
"""The floor plus what per-response expiry needs at the least: the header's format check,
the parent's expiry fields in the same read, the record's deadline, the parent's leaf
mark cleared, and a TTL that never shortens."""


async def save_rows(r: Redis, rounds: int) -> list[tuple[str, str]]:
    """Redis CPU per save of 0.7 KB records, 300 a round into one thread each side:
    the floor, the floor with the least of per-response expiry, that with the store's
    library definitions in front, and the store's own script (its ARGV as the store
    sends it), each as a ratio to the floor (the median of the rounds' ratios)."""
    store = RedisResponseSessionStore(r, key_prefix="lc")
    lib = open_script("chain_lib")
    sides = {"the floor: parent check + token ring": SAVE_FLOOR,
             "+ the least per-response expiry needs": BOOKS,
             "+ the library definitions a save carries": BOOKS.replace(TOKENS, script("chain_save").source.replace(
                 open_script("chain_save"), "")),
             "the store's save (lua/chain_save.lua)": script("chain_save").source}
    shas = {name: await r.script_load(source) for name, source in sides.items()}
    ratios: dict[str, list[float]] = {name: [] for name in sides}
    ours = "the store's save (lua/chain_save.lua)"
    for _ in range(rounds):
        per: dict[str, float] = {}
        for name in random.sample(list(sides), len(sides)):
            root, parent, key = new_response_id(), None, f"lc:{{{uuid.uuid4().hex}}}"
            await r.hset(key, mapping={f"p:{root}": "", "h": "1 0 1 0 99999999999999", f"e:{root}": "1"})
            parent = root
            calls = []
            for i in range(300):
                rid = new_response_id(parent)
                blob = codec.encode_record(record(rid, parent, i + 1, 700), True, 1 << 20)
                args = (store._save_args(rid, parent, None, False, blob, "") if name == ours
                        else [rid, parent, blob, new_token(), 30 * 86_400_000])
                calls.append(args)
                parent = rid
            before = await cpu_us(r)
            for args in calls:
                await r.evalsha(shas[name], 1, key, *args)
            per[name] = (await cpu_us(r) - before) / len(calls)
            await r.delete(key)
        floor = per["the floor: parent check + token ring"]
        for name in sides:
            ratios[name].append(per[name] / floor)
    return [(f"save 0.7 KB, Redis CPU: {name}", f"{statistics.median(v):.2f}x the floor") for name, v in ratios.items()]


def open_script(name: str) -> str:
    """The script's own file, without the libraries in front of it."""
    from redis_sessions.scripts import lua_folder
    return lua_folder().joinpath(f"{name}.lua").read_text("utf-8")


def timed(fn: Any, n: int = 2000) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - start) / n)
    return best * 1e6


def python_rows() -> list[tuple[str, str]]:
    import zstandard
    rows = []
    for size in (700, 20 * KB):
        rid = new_response_id()
        session = record(rid, None, 1, size)
        plain = msgspec.msgpack.encode(session)
        packed = codec.encode_record(session, True, 1 << 24)
        rows.append((f"a {size / KB:.1f} KB prose record: msgpack bytes / stored bytes",
                     f"{len(plain):,} / {len(packed):,} ({len(plain) / len(packed):.1f}x smaller)"))
        frame = memoryview(packed)[2:]
        unzip = codec._contexts.small_decompressor if packed[1] & codec.DICTIONARY else codec._contexts.decompressor
        rows.append((f"read {size / KB:.1f} KB back: the store's whole decode / its zstd decompression alone",
                     f"{timed(lambda: codec.decode_session(packed, 'r', rid, 1 << 24)):.1f} us / "
                     f"{timed(lambda: unzip.decompress(frame)):.1f} us"))
    rid = new_response_id()
    packed = codec.encode_record(record(rid, None, 1, 700), True, 1 << 24)

    def one_shot() -> None:  # what a per-call API does: a context (with the dictionary) for one value
        dictionary = zstandard.ZstdCompressionDict(codec.ZSTD_DICTIONARY, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
        zstandard.ZstdDecompressor(dict_data=dictionary).decompress(memoryview(packed)[2:])
    rows.append(("decompress 0.7 KB with a context made for it, as a one-shot API does", f"{timed(one_shot, 500):.1f} us"))
    return rows


async def main() -> None:
    args = parser(__doc__).parse_args()
    with redis_url(args.url) as url:
        r = Redis.from_url(url)
        try:
            rows = await server_rows(r) + await save_rows(r, args.rounds * 4)
        finally:
            await r.aclose()
    rows += python_rows()
    print("| unit | cost |\n|---|---:|")
    for name, cost in rows:
        print(f"| {name} | {cost} |")


if __name__ == "__main__":
    asyncio.run(main())
