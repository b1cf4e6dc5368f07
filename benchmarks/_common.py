"""Shared benchmark plumbing: a private redis-server (or --url), timing, English-like
prose, and worker processes that each import redis_sessions from a tree of their own (a
base commit's, unpacked by ``git archive``, against this checkout's)."""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator

import msgspec
from redis.asyncio import Redis

REPO = Path(__file__).resolve().parent.parent
TREE = "BENCH_TREE"
"""Set in a worker's environment (and so its children's): the tree it measures."""


WORDS = (
    "the of and to a in is that it for you was on are with as be this have from or at by not but what all were "
    "when we there can an your which their if do will each about how up out them then she many some so these would "
    "other into has more her two like him see time could no make than first been its who now people my made over did "
    "down only way find use may water long little very after words called just where most know get through back much "
    "before go good new write our used me man too any day same right look think also around another came come work "
    "three word must because does part even place well such here take why help put different away again off went old "
    "number great tell men say small every found still between name should home big give air line set own under read "
    "last never us left end along while might next sound below saw something thought both few those always looked show "
    "large often together asked house world going want school important until form food keep children feet land side "
    "without boy once animals life enough took sometimes four head above kind began almost live page got earth need far "
    "hand high year mother light parts country father let night following picture being study second eyes soon times "
    "story boys since white days ever paper hard near sentence better best across during today others however sure means "
    "knew trying weather answer request model city question response service customer order account system data").split()
ZIPF = [1 / (rank + 8) for rank in range(len(WORDS))]
"""Common English words and their weights (Zipf): 20 KB of :func:`prose` packs 2.5x with
zlib -6, near real English prose (about 2.7x), where random bytes would not pack at all."""


@functools.lru_cache(maxsize=256)
def prose(size: int, seed: int) -> str:
    """``size`` characters of English-like sentences, the same for the same seed."""
    rnd, out, n = random.Random(seed), [], 0
    while n < size:
        words = rnd.choices(WORDS, ZIPF, k=rnd.randint(5, 18))
        if len(words) > 8 and rnd.random() < 0.5:
            words[rnd.randint(3, len(words) - 3)] += ","
        out.append(" ".join(words).capitalize() + rnd.choice(".....?!") + " ")
        n += len(out[-1])
    return "".join(out)[:size]


def peer_json(value: Any) -> bytes:
    """A record as GodeX and its peers store it: JSON of every field, defaults included
    (JSON.stringify of the whole object)."""
    def full(v: Any) -> Any:
        if isinstance(v, msgspec.Struct):
            return {f: full(getattr(v, f)) for f in v.__struct_fields__}
        if isinstance(v, list):
            return [full(x) for x in v]
        if isinstance(v, dict):
            return {k: full(x) for k, x in v.items()}
        return v
    return json.dumps(full(value), separators=(",", ":")).encode()


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--url", help="a Redis to use (default: start a private redis-server on a free port)")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds per measurement")
    return p


@contextmanager
def redis_url(url: str | None, *, apart: bool = False) -> Iterator[str]:
    """A Redis to measure on: ``url``, else a private redis-server on a free port. With
    ``apart``, that server gets a core of its own and this process (and every worker it
    starts after) the others: left to the scheduler, the worker that happened to share
    the server's core ran the same code up to 1.3x slower than the other, for as long as
    both lived, which a comparison of two trees in two workers took for a change."""
    if url:
        yield url
        return
    # The tests' server helper (it imports redis_sessions: never at import time, so that a
    # worker imports its own tree's package first).
    sys.path.insert(0, str(REPO / "tests"))
    from servers import StandaloneServer

    server = StandaloneServer()
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if apart and len(cores) >= 2 and server.process.proc is not None:
        os.sched_setaffinity(server.process.proc.pid, cores[:1])
        os.sched_setaffinity(0, cores[1:])
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


async def redis_cpu(client: Redis) -> float:
    """The server's CPU seconds so far (INFO cpu: used_cpu_sys + used_cpu_user). Unlike
    INFO commandstats, it counts a script's inner commands once, inside the script."""
    info = await client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


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


# -- two versions side by side: a worker process per tree ---------------------------

def isolate_tree() -> None:
    """In a worker (``TREE`` set), call before the first import of redis_sessions. The
    venv's editable install maps redis_sessions.lua to its own checkout's lua/; without
    that finder, the package on PYTHONPATH reads its own tree's lua/ (scripts fall back
    to it when redis_sessions.lua is not a package). Spawned children run it again."""
    if os.environ.get(TREE):
        sys.meta_path[:] = [f for f in sys.meta_path if getattr(f, "__name__", "") != "_EditableFinder"]


def where_imported() -> dict[str, str | None]:
    """What a worker says first: the redis_sessions it imported and, when its Lua is a
    package (redis_sessions.lua), that package's folder (None: the package reads the
    lua/ folder beside it)."""
    import importlib.util

    import redis_sessions

    spec = importlib.util.find_spec("redis_sessions.lua")
    lua = list(spec.submodule_search_locations or [])[0] if spec and spec.submodule_search_locations else None
    return {"package": redis_sessions.__file__, "lua": lua}


class Worker:
    """A process running ``script`` with ``args`` that imports redis_sessions (and its Lua)
    from ``tree``, asked one JSON line at a time and answering one. Its first line is
    :func:`where_imported`, checked to lie in ``tree``."""

    def __init__(self, name: str, tree: Path, script: str, *args: str) -> None:
        self.name, self.tree = name, tree
        env = {**os.environ, "PYTHONPATH": str(tree), TREE: str(tree)}
        self.proc = subprocess.Popen([sys.executable, script, *args], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.where = self.answer()
        for what in ("package", "lua"):
            place = self.where.get(what)
            assert place is None or Path(place).resolve().is_relative_to(tree.resolve()), self.where

    def answer(self) -> Any:
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise RuntimeError(f"the {self.name} worker exited ({self.proc.wait()})")
        return json.loads(line)

    def ask(self, request: Any) -> Any:
        self.proc.stdin.write(json.dumps(request) + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        return self.answer()

    def close(self) -> None:
        self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.wait(timeout=60)


async def serve(answer: Callable[[Any], Awaitable[Any]], hello: dict[str, Any]) -> None:
    """A worker's loop: ``hello`` (see :class:`Worker`), then one answer per request line."""
    print(json.dumps(hello), flush=True)
    for line in sys.stdin:
        print(json.dumps(await answer(json.loads(line))), flush=True)


@contextmanager
def checkout(rev: str) -> Iterator[Path]:
    """``rev``'s files in a temporary folder (git archive: nothing is added to .git)."""
    folder = Path(tempfile.mkdtemp(prefix="bench-tree-"))
    try:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def describe(tree: Path, rev: str = "HEAD") -> str:
    return subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", rev],
                          capture_output=True, text=True).stdout.strip() or "?"
