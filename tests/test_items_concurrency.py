"""Eight separate processes on one session, against a real redis-server and a real cluster.

Each worker is a fresh interpreter (subprocess) with its own client; all of
them connect first, report ready, and start together when the test writes
"go" to their stdin, so their script calls really interleave on the server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from conftest import Backend
from redis_sessions.items import RedisSession

pytestmark = [pytest.mark.real, pytest.mark.slow]

WORKERS = 8

WORKER = r"""
import asyncio, json, sys
from redis_sessions.items import RedisSession

async def main(mode, url, prefix, worker, amount):
    s = RedisSession.from_url("shared", url=url, key_prefix=prefix, ttl_seconds=600)
    await s.get_items(1)  # connect (and load the scripts) before the start signal
    print("ready", flush=True)
    sys.stdin.readline()
    out = []
    try:
        if mode == "pop":
            while len(out) < amount:
                item = await s.pop_item()
                if item is None:
                    break
                out.append(item["n"])
        else:
            for batch in range(amount):
                await s.add_items([{"w": worker, "b": batch, "i": i} for i in range(5)])
    finally:
        await s.close()
    print(json.dumps(out), flush=True)

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])))
"""


def run_workers(mode: str, b: Backend, amount: int) -> list[list[Any]]:
    env = dict(os.environ)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, mode, str(b.url), b.prefix, str(w), str(amount)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        )
        for w in range(WORKERS)
    ]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        results = []
        for p in procs:
            out, _ = p.communicate(timeout=120)
            assert p.returncode == 0
            results.append(json.loads(out.strip().splitlines()[-1]))
        return results
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


async def test_concurrent_pops_lose_and_duplicate_nothing(real_backend: Backend) -> None:
    s = RedisSession("shared", client=real_backend.client, key_prefix=real_backend.prefix, ttl_seconds=600)
    added = 2000
    for start in range(0, added, 500):
        await s.add_items([{"n": n} for n in range(start, start + 500)])
    # 8 workers x at most 200 pops: they compete for 1600 items and leave 400.
    results = run_workers("pop", real_backend, 200)
    popped = [n for r in results for n in r]
    remaining = [i["n"] for i in await s.get_items()]
    assert len(popped) == len(set(popped)), "an item was returned twice"
    assert len(popped) == 1600
    assert sorted(popped + remaining) == list(range(added))
    assert remaining == list(range(len(remaining)))  # pops took the newest
    for r in results:  # each worker saw newest-first order
        assert r == sorted(r, reverse=True)


async def test_concurrent_adds_keep_batches_whole(real_backend: Backend) -> None:
    batches = 40
    run_workers("add", real_backend, batches)
    s = RedisSession("shared", client=real_backend.client, key_prefix=real_backend.prefix)
    items = await s.get_items()
    assert len(items) == WORKERS * batches * 5
    for start in range(0, len(items), 5):
        chunk = items[start:start + 5]
        assert [i["i"] for i in chunk] == [0, 1, 2, 3, 4]
        assert len({(i["w"], i["b"]) for i in chunk}) == 1
    for w in range(WORKERS):  # each worker's batches in the order it added them
        assert [i["b"] for i in items if i["w"] == w and i["i"] == 0] == list(range(batches))
