"""A locator left pointing at a thread that does not hold its id blocks nothing."""

from __future__ import annotations

from typing import Any

from chains import make_store, record
from redis_sessions import StoredResponseRequestSnapshot, StoredResponseSession, StoredResponseSnapshot
from redis_sessions.conversations import RedisConversationStore


async def test_a_locator_left_by_a_crash_does_not_block_its_id(real_backend: Any) -> None:
    """A conversation's save points the locator first; a crash (or a timeout) before its
    script runs leaves a locator to a thread that does not hold the id. The id reads as
    None, and it can still be saved, here or into that conversation."""
    store = make_store(real_backend, ttl_seconds=60)
    await store.client.set(store.keys.locator("ext-lost"), "c:conv_gone", px=60_000)  # the step before the crash
    assert await store.get("ext-lost") is None
    await store.save(record("ext-lost", None, "saved after all"))
    got = await store.get("ext-lost")
    assert got is not None and got.request.input == "saved after all"
    assert await store.delete("ext-lost") is True
    # under a parent, in the parent's thread
    await store.save(record("ext-parent", None, "parent"))
    await store.client.set(store.keys.locator("ext-child"), "c:conv_gone", px=60_000)
    await store.save(record("ext-child", "ext-parent", "child"))
    assert [s.id for s in (await store.resolve_chain("ext-child")).sessions] == ["ext-parent", "ext-child"]
    # and into a conversation, whose save points the locator before its script
    conversations = RedisConversationStore(real_backend.client, key_prefix=real_backend.prefix)
    turns = make_store(real_backend, ttl_seconds=60, conversations=conversations)
    conversation = await conversations.create(items=[])
    await store.client.set(store.keys.locator("ext-turn"), "c:conv_gone", px=60_000)
    await turns.save(StoredResponseSession(
        id="ext-turn", conversation_id=conversation.id, created_at=1_700_000_000,
        request=StoredResponseRequestSnapshot(input="hi"), response=StoredResponseSnapshot(id="ext-turn", output=[])))
    assert await turns.get("ext-turn") is not None
