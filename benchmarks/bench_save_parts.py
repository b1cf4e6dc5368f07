"""Where a turn's save spends its Redis time: the save script cut short at each step.

    python benchmarks/bench_save_parts.py [--url redis://...] [--size BYTES] [--depth N]

The save of the next turn of a chain ``--depth`` deep (records of about 0.7 KB, or
``--size`` bytes of payload), exactly as the store would send it, is run against a
copy of the thread (RESTORE of its DUMP before each call), whole and cut short after
each step (a ``do return 'ok' end`` put in after the step's line), 400 calls back to
back per version, several rounds alternating. Command time per call is
``INFO commandstats``' usec_per_call of EVALSHA: the script's own time, its inner
commands included, with the caches warm. The same save inside single turns (a resolve,
then the save, as a gateway's worker makes them) is shown after, from SLOWLOG: there
the interpreter works from cold caches.

Beside them, the whole save as a Redis Function (``FUNCTION LOAD`` once, then ``FCALL``):
its libraries' definitions then run once, when the library is loaded, not on every call as
they do in front of a script (:mod:`redis_sessions.scripts`). The library is deleted after.

Last, what a record costs a script only by passing through it: an EVALSHA of a script
that returns at once, given the record as its argument, against the HSET that writes
it, by size. Every string that enters Redis's Lua is interned, and Redis's Lua hashes
every byte of it (deps/lua/src/lstring.c, ``step = 1``, where stock Lua 5.1 hashes at
most 32 bytes of a long string), so a record passed to a script, or read by one, costs
the shard time in proportion to its bytes.
"""

from __future__ import annotations

import asyncio
import os
from statistics import median
from typing import Any

from redis.asyncio import Redis

from _common import parser, redis_url
from bench_chain_cost import SAVE_FUNCTION, chain, save_function, sized
from redis_sessions import RedisResponseSessionStore
from redis_sessions.responses.protocol import SaveRequest
from redis_sessions.responses.redis_engine import _save_args
from redis_sessions.scripts import script

CALLS = 400

CUTS = (
    # (what the version runs, the line of lua/chain_lib.lua it stops after)
    ("an empty script (any EVALSHA)", "EMPTY"),
    ("+ the chain library defined", None),
    ("+ the checks' read (one HMGET)", "local got = redis.call('HMGET', key, unpack(fields))"),
    ("+ the books as they stand (HLEN)", "local b = books_of(redis.call('HLEN', key), unpack(got, 1, #BOOK_FIELDS))"),
    ("+ the clock (TIME)", "local now = server_ms()\n  local deadline"),
    ("+ the record's fields, m, a jump list", "local jumps = jump_list(key, parent, #blob, st.above)"),
    ("+ the names list, the ring, the deadline", "local stale_m = st.has_m and not st.largest"),
    ("+ the leaf index", "if not fits or leaf_due(L, now) then return false end"),
    ("+ the HSET", "local added = redis.call('HSET', key, unpack(args))"),
    ("the whole save (+ HDEL, PEXPIRE)", ""),
)


def cut_after(source: str, line: str | None) -> str:
    """``source`` answering 'ok' right after ``line`` (None: before the save's first line,
    the libraries only; '': the whole script; "EMPTY": nothing else)."""
    if line == "EMPTY":
        return "return 'ok'\n"
    if line is None:
        return source[:source.rindex("local reply, st = save_check")] + "return 'ok'\n"
    if line == "":
        return source
    assert source.count(line) == 1, line
    eol = source.index("\n", source.index(line) + len(line))
    return source[:eol + 1] + "do return 'ok' end\n" + source[eol + 1:]


async def usec_per_call(r: Redis, command: str, queue: Any, last: Any) -> float:
    """Command time per call of ``command`` (``INFO commandstats``) over CALLS calls that
    ``queue(pipe)`` adds to one pipeline each, whose last reply must be ``last``."""
    await r.config_resetstat()
    pipe = r.pipeline(transaction=False)
    for _ in range(CALLS):
        queue(pipe)
    replies = await pipe.execute()
    assert replies[-1] == last, replies[-1]
    return float((await r.info("commandstats"))[f"cmdstat_{command}"]["usec_per_call"])


async def next_save(store: RedisResponseSessionStore, head: str, depth: int, size: int) -> tuple[str, SaveRequest]:
    """The thread and request of the save of ``head``'s next turn, after its resolve, as
    the store makes them; not run."""
    caught: list[tuple[str, SaveRequest]] = []
    engine: Any = store.engine

    async def catch(thread: str, request: SaveRequest) -> tuple[str, str]:
        caught.append((thread, request))
        return "ok", ""

    await store.resolve_chain(head, max_depth=5000)
    rid = await store.new_response_id(head)
    engine.save = catch
    try:
        await store.save(sized(rid, head, depth, size))
    finally:
        del engine.save
    return caught[0]


async def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--size", type=int, default=0, help="payload bytes per record (0: a 0.7 KB record)")
    p.add_argument("--depth", type=int, default=10)
    args = p.parse_args()
    with redis_url(args.url) as url:
        r = Redis.from_url(url, socket_timeout=120)
        store = RedisResponseSessionStore(r, key_prefix="bench-parts", max_depth=5000)
        ids = await chain(store, args.depth, args.size)
        thread, request = await next_save(store, ids[-1], args.depth, args.size)
        key = store.keys.thread(thread)
        copy = key + ":copy"  # the same slot, for a cluster's sake
        dump = await r.dump(key)
        source = script("chain_save").source
        versions = {name: await r.script_load(cut_after(source, line)) for name, line in CUTS}
        argv = _save_args(request)
        function = "the whole save as a Redis Function (FCALL)"
        took: dict[str, list[float]] = {name: [] for name in (*versions, function)}
        async with save_function(r):
            for _ in range(args.rounds):
                for name, sha in versions.items():
                    took[name].append(await usec_per_call(r, "evalsha", lambda pipe, sha=sha: (
                        pipe.restore(copy, 0, dump, replace=True), pipe.evalsha(sha, 1, copy, *argv)), b"ok"))
                took[function].append(await usec_per_call(r, "fcall", lambda pipe: (
                    pipe.restore(copy, 0, dump, replace=True), pipe.fcall(SAVE_FUNCTION, 1, copy, *argv)), b"ok"))
        await r.delete(copy)
        print(f"### The save of a turn at depth {args.depth}, {len(request.blob):,} B record: "
              f"command time per call, warm (median of {args.rounds} rounds of {CALLS})\n")
        print("| version | us | step's share us |")
        print("|---|---:|---:|")
        before = 0.0
        for name in versions:
            us = median(took[name])
            print(f"| {name} | {us:.2f} | {us - before:+.2f} |")
            before = us
        us = median(took[function])
        print(f"| {function} | {us:.2f} | {us - before:+.2f} against the script |")
        # The same save inside turns: a resolve, then the save, one turn at a time.
        logged = (await r.config_get("slowlog-log-slower-than"))["slowlog-log-slower-than"]
        await r.config_set("slowlog-log-slower-than", 0)
        inside: list[int] = []
        for _ in range(20):
            head = (await chain(store, args.depth, args.size))[-1]
            await store.resolve_chain(head, max_depth=5000)
            rid = await store.new_response_id(head)
            await r.slowlog_reset()
            await store.save(sized(rid, head, args.depth, args.size))
            inside += [e["duration"] for e in await r.slowlog_get(100)
                       if e["command"].split(b" ", 1)[0].upper() == b"EVALSHA"]
        await r.config_set("slowlog-log-slower-than", logged)
        inside.sort()
        print(f"\nThe whole save inside 20 turns (SLOWLOG, caches cold): median {median(inside):.0f} us, "
              f"least {inside[0]} us, most {inside[-1]} us.\n")
        await passing_through(r, args.rounds)
        await r.aclose()


async def passing_through(r: Redis, rounds: int) -> None:
    """Command time of an empty script given a record, next to the HSET of that record."""
    empty = await r.script_load("return 'ok'")
    print("### A record passed to a script that returns at once, against its HSET: command time per call\n")
    print("| record bytes | EVALSHA of an empty script us | HSET us | script us per KB |")
    print("|---:|---:|---:|---:|")
    for size in (600, 4_096, 20_000, 100_000):
        blob = os.urandom(size)
        best: dict[str, float] = {}
        for _ in range(rounds):
            for command, queue, last in (("evalsha", lambda pipe: pipe.evalsha(empty, 1, "bench-parts:arg", blob), b"ok"),
                                         ("hset", lambda pipe: pipe.hset("bench-parts:arg", "d", blob), 0)):
                us = await usec_per_call(r, command, queue, last)
                best[command] = min(best.get(command, us), us)
        print(f"| {size:,} | {best['evalsha']:.2f} | {best['hset']:.2f} | {best['evalsha'] / size * 1024:.2f} |")
    await r.delete("bench-parts:arg")
    print()


if __name__ == "__main__":
    asyncio.run(main())
