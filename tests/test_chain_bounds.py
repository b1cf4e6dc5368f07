"""Response chains at the largest sizes the defaults admit: no command over 5 ms (SLOWLOG).

A chain of ``max_depth`` (64) records of ``max_record_bytes`` (1 MiB) each is saved,
read by id, resolved whole, and deleted record by record and whole, on a private
redis-server. Every command's time comes from SLOWLOG (threshold 0); each kind of
command keeps the least of the rounds (tests/slowlog.py), since other processes share
the machine: a command over 5 ms in every round is the store's.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from redis.asyncio import Redis

from chains import record
from redis_sessions import RedisResponseSessionStore, new_response_id
from redis_sessions.limits import DEFAULT_MAX_RECORD_BYTES
from redis_sessions.responses.store import DEFAULT_MAX_DEPTH
from redis_sessions.scripts import script
from slowlog import least_over_rounds

pytestmark = pytest.mark.real

SCRIPTS = ("chain_save", "chain_walk", "chain_walk_slide", "chain_delete", "chain_known", "chain_repoint")


async def test_the_largest_chain_the_defaults_admit_holds_no_command_5_ms(redis_server: Any) -> None:
    client = Redis.from_url(redis_server.url)
    names = {script(name).sha.encode(): name for name in SCRIPTS}

    def kind(words: list[bytes], _: bytes) -> str | None:
        if words[0] in (b"SLOWLOG", b"CONFIG"):
            return None
        return names.get(words[1], words[0].decode()) if words[0] == b"EVALSHA" else words[0].decode()

    async def run_round() -> None:
        store = RedisResponseSessionStore(client, key_prefix="cb" + uuid.uuid4().hex[:8])
        payload = "x" * (DEFAULT_MAX_RECORD_BYTES - 2048)
        ids: list[str] = []
        for _ in range(DEFAULT_MAX_DEPTH):
            rid = new_response_id(ids[-1] if ids else None)
            await store.save(record(rid, ids[-1] if ids else None, payload=payload))
            ids.append(rid)
        assert (await store.get(ids[-1])) is not None
        assert len((await store.resolve_chain(ids[-1])).sessions) == DEFAULT_MAX_DEPTH
        assert await store.delete(ids[-1]) is True
        assert await store.delete_thread(ids[0]) == DEFAULT_MAX_DEPTH - 1

    try:
        seen = await least_over_rounds(client, run_round, kind)
        assert {"chain_save", "HMGET"} <= set(seen), seen  # the saves and the records' reads were seen
        assert {k: v for k, v in seen.items() if v >= 5000} == {}, seen
    finally:
        await client.aclose()


async def test_a_names_list_stops_growing_at_its_bound(redis_server: Any) -> None:
    """A names list held every ancestor of a chain's tip (16 bytes each), and each save
    under the tip copied it: a chain 100,000 deep copied 1.6 MB a save. A list holds
    names.NAMES_MAX at most; a deeper record keeps none, and its chain is read whole by
    the walk."""
    from chains import build_chain
    from redis_sessions.responses import names

    client = Redis.from_url(redis_server.url)
    try:
        store = RedisResponseSessionStore(client, key_prefix="nm" + uuid.uuid4().hex[:8], max_depth=10_000)
        ids = await build_chain(store, 20)
        await store.resolve_chain(ids[-1])  # the worker now remembers the chain: its saves start a list
        ids += await build_chain(store, names.NAMES_MAX + 10, first_parent=ids[-1])
        key = store.keys.thread(ids[0].split("_")[1])
        longest = max([await client.hstrlen(key, f) for f in await client.hkeys(key) if f.startswith(b"n:")] or [0])
        assert 0 < longest <= names.NAMES_MAX * names.NAME_BYTES
        assert await client.hexists(key, f"n:{ids[-1]}") == 0  # past the bound: none
        assert [s.id for s in (await store.resolve_chain(ids[-1])).sessions] == ids
    finally:
        await client.aclose()
