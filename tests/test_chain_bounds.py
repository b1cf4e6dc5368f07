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
from redis_sessions.options import ResponseOptions
from redis_sessions.scripts import script
from slowlog import least_over_rounds

pytestmark = pytest.mark.real

SCRIPTS = ("chain_save", "chain_walk", "chain_delete", "chain_cover", "chain_repoint")
DEFAULT_MAX_DEPTH = ResponseOptions().max_depth


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
