"""How long one call holds the server, by the size of what it carries.

    python benchmarks/bench_record_size.py [--url redis://...]

For responses of 0.25 to 32 MiB of prose before compression (a store whose
``max_record_bytes`` allows them, compressing as by default): the longest single command
(SLOWLOG) of a save, a ``get``, and a resolve of a chain of two. For item sessions, stored
uncompressed (``compression=False``: the case of an item that does not compress, where its
stored bytes are its size): ``add_items`` of one item of that size, ``get_items`` and
``pop_item`` then, and ``add_items`` of a batch of items of 1 MiB adding up to it, and
``get_items`` of that session.

A save is one script, and every string that enters Redis's Lua is hashed byte by byte
(bench_lua_costs.py), so a save holds the server in proportion to its
record's bytes; a read by plain ``HGET``/``HMGET`` only copies them. Three calls per size,
the least and the most shown. The server is private unless ``--url`` is given; its
``proto-max-bulk-len`` must allow the largest argument (512 MiB by default).
"""

from __future__ import annotations

import asyncio
from typing import Any

from redis.asyncio import Redis

from _common import logging_client, parser, redis_url
from bench_peers import record
from redis_sessions import RedisResponseSessionStore, RedisSession

MIB = 1024 * 1024
SIZES = (0.25, 0.5, 1, 2, 4, 8, 16, 32)


async def longest(r: Redis, call: Any) -> int:
    """The longest command ``call`` sent, in us (SLOWLOG, threshold 0: each command the
    client sent, a script's inner commands inside the script's own time)."""
    await r.slowlog_reset()
    await call()
    # not the benchmark's own bookkeeping, nor the commands a script ran (logged from the
    # script's client, ?:0, and already inside the script's duration)
    return max(int(e["duration"]) for e in await r.slowlog_get(100_000)
               if e["client_address"] not in (b"?:0", b"") and e["command"].split()[0].upper() not in (b"SLOWLOG", b"CONFIG"))


def span(values: list[int]) -> str:
    return f"{min(values):,}–{max(values):,}"


async def responses(r: Redis) -> None:
    store = RedisResponseSessionStore(r, key_prefix="hold", max_record_bytes=64 * MIB, timeout=120)
    print("### Responses: the longest command of one call, us\n")
    print("| record MiB | save | get | resolve of a chain of two |")
    print("|---:|---:|---:|---:|")
    for mib in SIZES:
        payload = int(mib * MIB) - 2_000  # the record's other fields make up the rest
        got: dict[str, list[int]] = {"save": [], "get": [], "resolve": []}
        for _ in range(3):
            root = await store.new_response_id()
            got["save"].append(await longest(r, lambda: store.save(record(root, None, 0, payload))))
            got["get"].append(await longest(r, lambda: store.get(root)))
            child = await store.new_response_id(root)
            await store.save(record(child, root, 1, payload))
            got["resolve"].append(await longest(r, lambda: store.resolve_chain(child)))
            await store.delete_thread(root)
        print(f"| {mib:g} | {span(got['save'])} | {span(got['get'])} | {span(got['resolve'])} |")
    print()


async def items(r: Redis) -> None:
    print("### Item sessions: the longest command of one call, us\n")
    print("| MiB | add_items of one item | get_items then | pop_item then | add_items of 1 MiB items | get_items then |")
    print("|---:|---:|---:|---:|---:|---:|")
    for mib in SIZES:
        size = int(mib * MIB)
        got: dict[str, list[int]] = {"one": [], "get_one": [], "pop": [], "batch": [], "get_batch": []}
        for n in range(3):
            one = RedisSession(f"hold-one-{mib}-{n}", client=r, max_item_bytes=64 * MIB, max_batch_bytes=64 * MIB,
                               ttl_seconds=600, compression=False)
            item = [{"role": "user", "content": "x" * (size - 60)}]
            got["one"].append(await longest(r, lambda: one.add_items(item)))
            got["get_one"].append(await longest(r, lambda: one.get_items()))
            got["pop"].append(await longest(r, lambda: one.pop_item()))
            await one.clear_session()
            many = RedisSession(f"hold-many-{mib}-{n}", client=r, max_batch_bytes=64 * MIB, ttl_seconds=600,
                                compression=False)
            count = max(1, round(mib))
            batch = [{"role": "user", "content": "y" * (min(size, MIB) - 60)} for _ in range(count)]
            got["batch"].append(await longest(r, lambda: many.add_items(batch)))
            got["get_batch"].append(await longest(r, lambda: many.get_items()))
            await many.clear_session()
        print(f"| {mib:g} | {span(got['one'])} | {span(got['get_one'])} | {span(got['pop'])} | {span(got['batch'])} | {span(got['get_batch'])} |")
    print()


async def main() -> None:
    args = parser(__doc__ or "").parse_args()
    with redis_url(args.url) as url:
        r = await logging_client(url, 10_000)
        info = await r.info("server")
        print(f"Server: {'valkey' if 'valkey_version' in info else 'redis'} "
              f"{info.get('valkey_version', info.get('redis_version'))}\n")
        await responses(r)
        await items(r)
        await r.aclose()


if __name__ == "__main__":
    asyncio.run(main())
