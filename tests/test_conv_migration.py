"""Conversations on a slot that is being migrated (the test cluster, a live
IMPORTING/MIGRATING pair): the key either still on its source or already moved."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from redis.asyncio.cluster import RedisCluster

from faultservers import admin, key_slot, start_slot_migration
from redis_sessions import (
    ErrorCode,
    RedisResponseSessionStore,
    SessionError,
    StoredResponseRequestSnapshot,
    StoredResponseSession,
    StoredResponseSnapshot,
)
from redis_sessions.conversations import ConversationDeleted, RedisConversationStore
from redis_sessions.tokens import new_token

pytestmark = pytest.mark.real


def msg(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


async def code_of(call: Any) -> ErrorCode:
    with pytest.raises(SessionError) as err:
        await call
    return err.value.code


def tryagains(cluster: Any) -> int:
    """TRYAGAIN answers the cluster's nodes have given so far (INFO errorstats)."""
    total = 0
    for node in cluster.nodes:
        with admin(node.port) as r:
            total += int(r.info("errorstats").get("errorstat_TRYAGAIN", {}).get("count", 0))
    return total


async def until_refused(cluster: Any, count: int, deadline: float = 60) -> None:
    end = time.monotonic() + deadline
    while tryagains(cluster) < count:
        assert time.monotonic() < end, f"fewer than {count} TRYAGAIN answers within {deadline} s"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("moved", [False, True], ids=["on-source", "moved"])
async def test_a_conversation_is_deleted_mid_migration_and_a_resent_delete_answers_ok(
        redis_cluster: Any, moved: bool) -> None:
    """The delete once UNLINKed the key and recreated it, which Redis refuses mid-migration:
    the conversation was gone, the caller got session.backend.error and its retry a 404."""
    store = RedisConversationStore.from_url(redis_cluster.url, key_prefix="m" + uuid.uuid4().hex[:8],
                                            ttl_seconds=600)
    try:
        conv = await store.create(items=[msg("a"), msg("b")])
        key = store.keys.conversation(conv.id)
        with start_slot_migration(redis_cluster, key_slot(key), [key] if moved else []) as migration:
            token = new_token()
            for _ in range(2):  # the second: redis-py re-sending it after a lost reply
                assert await store._call("conv_delete", conv.id, token, "", write=True) == b"ok"
            assert await code_of(store.get(conv.id)) is ErrorCode.CONVERSATION_NOT_FOUND
            assert await code_of(store.add_items(conv.id, [msg("c")])) is ErrorCode.CONVERSATION_NOT_FOUND
            assert await code_of(store.delete(conv.id)) is ErrorCode.CONVERSATION_NOT_FOUND
            other = await store.create(items=[msg("x")])
            assert await store.delete(other.id) == ConversationDeleted(id=other.id)
            migration.finish()
        assert await code_of(store.get(conv.id)) is ErrorCode.CONVERSATION_NOT_FOUND
        assert 0 < await store.client.pttl(key) <= 300_000
    finally:
        await store.close()


async def test_a_first_turn_is_saved_once_its_slot_has_migrated(redis_cluster: Any) -> None:
    """Defect 6: a turn saved into a conversation got TRYAGAIN (a two-key script whose
    thread key does not exist yet) for as long as the slot migrated, and failed. It is
    sent again until the migration lets it through, within the call's budget: saved
    once, whole, after the migration ends."""
    prefix = "m" + uuid.uuid4().hex[:8]
    conversations = RedisConversationStore.from_url(redis_cluster.url, key_prefix=prefix, ttl_seconds=600)
    responses = RedisResponseSessionStore.from_url(redis_cluster.url, key_prefix=prefix, timeout=10.0,
                                                   conversations=conversations)
    try:
        conv = await conversations.create(items=[msg("a")])
        key = conversations.keys.conversation(conv.id)
        rid = await responses.new_response_id(conversation_id=conv.id)
        refused = tryagains(redis_cluster)
        migration = start_slot_migration(redis_cluster, key_slot(key))
        try:
            save = asyncio.ensure_future(responses.save(StoredResponseSession(
                id=rid, conversation_id=conv.id, created_at=1_700_000_000,
                request=StoredResponseRequestSnapshot(input="b"),
                response=StoredResponseSnapshot(id=rid, output=[msg("re")]))))
            # Refused more often than redis-py sends one command (its own TRYAGAIN retries):
            # the store sent the turn again after redis-py gave up on it.
            await until_refused(redis_cluster, refused + RedisCluster.RedisClusterRequestTTL + 1)
            assert not save.done()  # held back while the slot migrates, not failed
            await asyncio.to_thread(migration.finish)
            await save
        finally:
            migration.move_back()  # the slot goes home for the tests after this one
        history = await conversations.history(conv.id)
        assert len(history) == 3 and history[0]["content"] == "a" and history[2]["content"] == "re"  # once, whole
        assert (await responses.get(rid)) is not None
    finally:
        await responses.close()
        await conversations.close()
