"""Saves with replica_acks=0 and replica_acks=1 side by side, on a master and replica started here.

    python benchmarks/bench_replica_acks.py [--rounds 5] [--n 2000]

Each side saves a new response into its own chain, one call at a time (so the
time of WAIT is not hidden by concurrency), alternating rounds and keeping each
side's best. Reported: ops/s per side, and Redis's own microseconds per call
(INFO commandstats on the master: EVALSHA, plus ROLE, WAIT, ROLE for replica_acks=1; a
WAIT's time blocked waiting for the replica is not CPU time and is not in it). The
replica runs on the same machine, so the extra cost is the replica's round trip
over loopback; over a network, add one master-to-replica round trip per write.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _common import best_of, parser  # noqa: E402
from bench_peers import record  # noqa: E402
from redis_sessions import RedisResponseSessionStore  # noqa: E402
from servers import RedisProcess, free_port  # noqa: E402


def start_pair(folder: str) -> tuple[RedisProcess, RedisProcess]:
    master = RedisProcess(free_port(), os.path.join(folder, "m"))
    replica = RedisProcess(free_port(), os.path.join(folder, "r"))
    os.makedirs(master.workdir)
    os.makedirs(replica.workdir)
    master.start()
    replica.extra = ["--replicaof", "127.0.0.1", str(master.port)]
    replica.start()
    deadline = time.monotonic() + 20
    with redis.Redis(port=replica.port, decode_responses=True) as r:
        while r.info("replication").get("master_link_status") != "up":
            if time.monotonic() > deadline:
                raise RuntimeError("the replica did not sync")
            time.sleep(0.05)
    return master, replica


def commandstats(port: int) -> dict[str, tuple[int, float]]:
    """calls and total µs per command, from INFO commandstats."""
    with redis.Redis(port=port, decode_responses=True) as r:
        stats = r.info("commandstats")
    return {name.removeprefix("cmdstat_"): (int(v["calls"]), float(v["usec"])) for name, v in stats.items()}


async def run(url: str, port: int, rounds: int, n: int) -> None:
    stores = {acks: RedisResponseSessionStore.from_url(url, key_prefix=f"bench{acks}", replica_acks=acks)
              for acks in (0, 1)}
    parents: dict[int, str | None] = {0: None, 1: None}

    def saver(acks: int):  # type: ignore[no-untyped-def]
        store = stores[acks]

        async def save(i: int) -> None:
            rid = await store.new_response_id(parents[acks])
            await store.save(record(rid, parents[acks], i, 700))
            parents[acks] = rid if i % 50 else None  # chains of 50, so no thread grows without end

        return save

    for acks in (0, 1):
        await saver(acks)(1)  # load the script, connect
    best = await best_of(rounds, {f"save, replica_acks={acks}": (saver(acks), n) for acks in (0, 1)})
    redis_us: dict[int, float] = {}
    for acks in (0, 1):  # one more pass per side, alone, for the server's own time
        before = commandstats(port)
        for i in range(n):
            await saver(acks)(i)
        after = commandstats(port)
        calls = after["evalsha"][0] - before.get("evalsha", (0, 0.0))[0]
        usec = sum(after[c][1] - before.get(c, (0, 0.0))[1] for c in ("evalsha", "wait", "role") if c in after)
        redis_us[acks] = usec / calls
    for acks in (0, 1):
        name = f"save, replica_acks={acks}"
        print(f"{name}: {best[name]:8.0f} ops/s   Redis {redis_us[acks]:6.1f} µs per save (EVALSHA{' + 2 ROLE + WAIT' if acks else ''})")
    print(f"replica_acks=1 / replica_acks=0: {best['save, replica_acks=1'] / best['save, replica_acks=0']:.2f}")
    for store in stores.values():
        await store.close()


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=2000, help="saves per round")
    args = p.parse_args()
    folder = tempfile.mkdtemp(prefix="rs-bench-acks-")
    master, replica = start_pair(folder)
    try:
        asyncio.run(run(master.url, master.port, args.rounds, args.n))
    finally:
        replica.stop()
        master.stop()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
