"""The sync response store vs raw synchronous redis-py, side by side in one run.

    python benchmarks/bench_sync.py [--url redis://...] [--rounds 7]

- save: SyncResponseSessionStore.save against msgspec encode + the EVALSHA of the
  store's own save script with the arguments the store sends (a fresh operation token
  each), on redis-py's sync client;
- get: SyncResponseSessionStore.get against HGET + decode.

The two sides take turns call by call (``--calls`` calls per side and round, the first
side flipped every call); the table gives each side's calls per second at its median
call, and the ratio store / raw (1.00: the store costs nothing over hand-written
redis-py). The store drives the async core without a loop (redis_sessions/responses/sync.py).
"""

from __future__ import annotations

import time
from statistics import median
from typing import Callable

import redis

from _common import parser, redis_url
from bench_peers import record
from redis_sessions import UNSET, SyncResponseSessionStore, new_response_id
from redis_sessions.codec import decode_session
from redis_sessions.ids import thread_of
from redis_sessions.scripts import script


def alternate(rounds: int, sides: dict[str, tuple[Callable[[int], None], int]]) -> dict[str, float]:
    """Calls/s per side from the median call: the sides take turns call by call (the
    first side flipped every call), so a busy moment of the machine hits both alike."""
    times: dict[str, list[float]] = {name: [] for name in sides}
    names = list(sides)
    n = min(count for _, count in sides.values())
    clock = time.perf_counter
    for r in range(rounds):
        for i in range(n):
            for name in names if (r + i) % 2 == 0 else reversed(names):
                call = sides[name][0]
                start = clock()
                call(i)
                times[name].append(clock() - start)
    return {name: 1 / median(t) for name, t in times.items()}


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--calls", type=int, default=3000, help="calls per side per round")
    args = p.parse_args()
    n, rounds = args.calls, args.rounds
    with redis_url(args.url) as url:
        client = redis.Redis.from_url(url)
        store = SyncResponseSessionStore(client, key_prefix="bsync")
        save_script = script("chain_save")
        client.script_load(save_script.source)  # the raw side loads its script up front
        ours = [record(new_response_id(), None, i, 700) for i in range(n * rounds)]
        raw = [record(new_response_id(), None, i, 700) for i in range(n * rounds)]
        at = {"ours": 0, "raw": 0}
        core = store.core  # the raw side sends the store's own script and arguments (a same-tree comparison)

        def ours_save(_: int) -> None:
            store.save(ours[at["ours"]])
            at["ours"] += 1

        def raw_save(_: int) -> None:
            rec = raw[at["raw"]]
            at["raw"] += 1
            blob = core._check_save(rec, UNSET, False)[3]
            client.evalsha(save_script.sha, 1, f"bsync:{{{thread_of(rec.id)}}}:chain",
                           *core._save_args(rec.id, None, None, False, blob, ""))

        save = alternate(rounds, {"ours": (ours_save, n), "raw": (raw_save, n)})
        ours_ids = [rec.id for rec in ours[:n]]
        raw_ids = [rec.id for rec in raw[:n]]

        def ours_get(i: int) -> None:
            assert store.get(ours_ids[i]) is not None

        def raw_get(i: int) -> None:
            rid = raw_ids[i]
            decode_session(client.hget(f"bsync:{{{thread_of(rid)}}}:chain", f"d:{rid}"), rid, rid)

        get = alternate(rounds, {"ours": (ours_get, n), "raw": (raw_get, n)})
        print("| operation (sync) | redis_sessions calls/s | raw redis-py calls/s | ratio |")
        print("|---|---:|---:|---:|")
        for name, result in (("save", save), ("get", get)):
            print(f"| {name} | {result['ours']:,.0f} | {result['raw']:,.0f} | {result['ours'] / result['raw']:.2f} |")
        client.close()


if __name__ == "__main__":
    main()
