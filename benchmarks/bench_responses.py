"""Response store vs raw redis-py, side by side on one connection in one run.

    python benchmarks/bench_responses.py [--url redis://...]

- save / get: ops/s of RedisResponseSessionStore against raw redis-py doing the
  same Redis work by hand (msgspec encode + the same EVALSHA for save; HGET +
  msgspec decode for get), as a ratio (goal >= 0.85).
- resolve_chain at depths 1, 10, 100, 1000: our round trips and time against a
  walk that reads one record per hop (how GodeX and SMG resolve), as a speed-up
  (goal >= 8x at depth 100).
"""

from __future__ import annotations

import asyncio
import secrets

import msgspec
from redis.asyncio import Redis

from _common import best_of, parser, redis_url
from redis_sessions import (
    RedisResponseSessionStore,
    StoredResponseRequestSnapshot,
    StoredResponseSession,
    StoredResponseSnapshot,
    new_response_id,
)
from redis_sessions.codec import decode_session
from redis_sessions.ids import thread_of
from redis_sessions.scripts import script


def record(rid: str, parent: str | None, i: int) -> StoredResponseSession:
    text = f"question number {i}: what is the weather like today in the city?"
    return StoredResponseSession(
        id=rid, previous_response_id=parent, created_at=1_700_000_000 + i,
        request=StoredResponseRequestSnapshot(input=text, model="gpt-test", instructions="Be helpful."),
        response=StoredResponseSnapshot(
            id=rid, output=[{"type": "message", "role": "assistant", "id": f"msg_{i}",
                             "content": [{"type": "output_text", "text": "It is sunny. " * 8}]}],
            output_text="It is sunny. " * 8, usage={"input_tokens": 40, "output_tokens": 30}),
    )


async def main() -> None:
    args = parser(__doc__ or "").parse_args()
    with redis_url(args.url) as url:
        client = Redis.from_url(url)
        store = RedisResponseSessionStore(client, key_prefix="bench", max_depth=2000)
        save_script = script("chain_save")
        n = 3000
        ours_ids = [new_response_id() for _ in range(n * args.rounds)]
        raw_ids = [new_response_id() for _ in range(n * args.rounds)]
        records = [record(ours_ids[i], None, i) for i in range(len(ours_ids))]
        raw_records = [record(raw_ids[i], None, i) for i in range(len(raw_ids))]
        counter = {"ours": 0, "raw": 0}

        async def ours_save(_: int) -> None:
            await store.save(records[counter["ours"]])
            counter["ours"] += 1

        async def raw_save(_: int) -> None:
            rec = raw_records[counter["raw"]]
            counter["raw"] += 1
            blob = msgspec.msgpack.encode(rec)
            key = f"bench:{{{thread_of(rec.id)}}}:chain"
            # The same script and arguments the store sends, a fresh operation token included,
            # so both sides do the same work on the server.
            await client.evalsha(save_script.sha, 1, key, rec.id, "", "-", "", "0", blob, 2592000000, 100000,
                                 secrets.token_hex(8), 16, "1")

        await client.script_load(save_script.source)  # the raw side loads its script up front
        save = await best_of(args.rounds, {"ours": (ours_save, n), "raw": (raw_save, n)})

        read_ids = ours_ids[:n]

        async def ours_get(i: int) -> None:
            assert await store.get(read_ids[i]) is not None

        async def raw_get(i: int) -> None:
            rid = read_ids[i]
            data = await client.hget(f"bench:{{{thread_of(rid)}}}:chain", f"d:{rid}")
            decode_session(data, rid, rid)

        get = await best_of(args.rounds, {"ours": (ours_get, n), "raw": (raw_get, n)})

        print("| operation | redis_sessions ops/s | raw redis-py ops/s | ratio |")
        print("|---|---:|---:|---:|")
        for name, result in (("save", save), ("get", get)):
            print(f"| {name} | {result['ours']:,.0f} | {result['raw']:,.0f} | {result['ours'] / result['raw']:.2f} |")

        print()
        print("| depth | resolve_chain ops/s | round trips | one-read-per-hop ops/s | round trips | speed-up |")
        print("|---:|---:|---:|---:|---:|---:|")
        for depth in (1, 10, 100, 1000):
            parent = None
            for i in range(depth):
                rid = await store.new_response_id(parent)
                await store.save(record(rid, parent, i))
                parent = rid
            leaf = parent
            assert leaf is not None
            key = f"bench:{{{thread_of(leaf)}}}:chain"
            hops = {"n": 0}

            async def ours_resolve(_: int) -> None:
                snap = await store.resolve_chain(leaf, max_depth=2000)
                assert len(snap.sessions) == depth

            async def per_hop(_: int) -> None:
                cur: str | None = leaf
                sessions = []
                while cur:
                    hops["n"] += 1
                    data = await client.hget(key, f"d:{cur}")
                    session = decode_session(data, cur, cur)
                    sessions.append(session)
                    cur = session.previous_response_id
                assert len(sessions) == depth

            before = store.round_trips
            await ours_resolve(0)
            ours_rt = store.round_trips - before
            hops["n"] = 0
            await per_hop(0)
            hop_rt = hops["n"]
            reps = max(5, 3000 // depth)
            res = await best_of(args.rounds, {"ours": (ours_resolve, reps), "hop": (per_hop, reps)})
            print(f"| {depth} | {res['ours']:,.0f} | {ours_rt} | {res['hop']:,.0f} | {hop_rt} | "
                  f"{res['ours'] / res['hop']:.1f}x |")
        await client.aclose()


if __name__ == "__main__":
    asyncio.run(main())
