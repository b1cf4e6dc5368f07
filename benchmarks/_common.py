"""Shared benchmark plumbing: a private redis-server (or --url) and timing."""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Awaitable, Callable, Iterator

from redis.asyncio import Redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from servers import StandaloneServer  # noqa: E402


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--url", help="a Redis to use (default: start a private redis-server on a free port)")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds per measurement (best is kept)")
    return p


@contextmanager
def redis_url(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    server = StandaloneServer()
    try:
        yield server.url
    finally:
        server.close()


async def logging_client(url: str, entries: int) -> Redis:
    """A client for a benchmark that reads SLOWLOG: the server logs every command (up to
    ``entries`` kept), and the client waits up to 120 s for a reply (a whole SLOWLOG,
    parsed in Python on a loaded machine, took longer than redis-py's default 5 s)."""
    r = Redis.from_url(url, socket_timeout=120)
    await r.config_set("slowlog-log-slower-than", 0)
    await r.config_set("slowlog-max-len", entries)
    return r


async def ops_per_second(op: Callable[[int], Awaitable[object]], n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        await op(i)
    return n / (time.perf_counter() - start)


async def best_of(rounds: int, pairs: dict[str, tuple[Callable[[int], Awaitable[object]], int]]) -> dict[str, float]:
    """Run every measurement once per round, alternating, and keep each one's best,
    so that both sides of a ratio see the same machine noise."""
    best = {name: 0.0 for name in pairs}
    for _ in range(rounds):
        for name, (op, n) in pairs.items():
            best[name] = max(best[name], await ops_per_second(op, n))
    return best
