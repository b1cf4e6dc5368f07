"""A response saved with ``conversation_id`` appends its turn to the conversation in the
same atomic step (#10), on every backend."""

from __future__ import annotations

from typing import Any

import fakeredis
import pytest

from chains import all_keys, resending
from conftest import Backend
from redis_sessions import (
    ErrorCode,
    MemoryResponseSessionStore,
    RedisResponseSessionStore,
    SessionError,
    StoredResponseRequestSnapshot,
    StoredResponseSession,
    StoredResponseSnapshot,
)
from redis_sessions import MemoryConversationStore
from redis_sessions.conversations import RedisConversationStore
from redis_sessions.responses import request_input_items


def stores(b: Backend, **options: Any) -> tuple[Any, Any]:
    conversations = RedisConversationStore(b.client, key_prefix=b.prefix, clock=b.clock)
    return RedisResponseSessionStore(b.client, key_prefix=b.prefix, conversations=conversations,
                                     **options), conversations


def turn(rid: str, conversation: str | None, text: str, *, previous: str | None = None,
         output_id: str | None = None) -> StoredResponseSession:
    out: dict[str, Any] = {"type": "message", "role": "assistant",
                           "content": [{"type": "output_text", "text": f"re: {text}"}]}
    if output_id:
        out["id"] = output_id
    return StoredResponseSession(
        id=rid, previous_response_id=previous, conversation_id=conversation, created_at=1_700_000_000,
        request=StoredResponseRequestSnapshot(input=text), response=StoredResponseSnapshot(id=rid, output=[out]))


def texts(items: list[dict[str, Any]]) -> list[str]:
    return [item["content"] if isinstance(item["content"], str) else item["content"][0]["text"] for item in items]


async def test_a_turn_saves_the_response_and_appends_its_items_together(backend: Backend) -> None:
    responses, conversations = stores(backend)
    conv = await conversations.create(items=[{"role": "user", "content": "earlier"}])
    first = await responses.new_response_id(conversation_id=conv.id)
    await responses.save(turn(first, conv.id, "one", output_id="msg_out1"))
    second = await responses.new_response_id(conversation_id=conv.id)
    history = await conversations.history(conv.id)
    assert texts(history) == ["earlier", "one", "re: one"]
    assert history[2]["id"] == "msg_out1"  # an item's own id is kept; the others got minted ones
    assert all(item["id"].startswith("msg_") for item in history)
    await responses.save(turn(second, conv.id, "two"))
    assert texts(await conversations.history(conv.id)) == ["earlier", "one", "re: one", "two", "re: two"]
    # the responses are stored, readable by id and each one its own chain of one
    assert (await responses.get(first)).conversation_id == conv.id
    snap = await responses.resolve_chain(second)
    assert [s.id for s in snap.sessions] == [second]
    # and the next turn's input is the conversation's items plus the new input
    assert texts(await conversations.history(conv.id) + request_input_items("three")) == [
        "earlier", "one", "re: one", "two", "re: two", "three"]


async def test_saving_a_turn_again_appends_nothing(backend: Backend) -> None:
    """A caller's retry (same record, new call) and a re-sent script (same token) are one turn."""
    responses, conversations = stores(backend)
    conv = await conversations.create()
    rid = await responses.new_response_id(conversation_id=conv.id)
    session = turn(rid, conv.id, "once")
    await responses.save(session)
    await responses.save(session)
    assert texts(await conversations.history(conv.id)) == ["once", "re: once"]
    with pytest.raises(SessionError) as err:
        await responses.save(turn(rid, conv.id, "different"))
    assert err.value.code == ErrorCode.STORE_CONFLICT
    assert texts(await conversations.history(conv.id)) == ["once", "re: once"]


async def test_refused_turns_write_nothing_to_either_key(backend: Backend) -> None:
    responses, conversations = stores(backend)
    conv = await conversations.create(items=[{"id": "msg_taken", "role": "user", "content": "x"}])
    before = await all_keys(backend, responses)
    cases = [
        (turn("resp_a", "conv_" + "0" * 48, "to nowhere"), ErrorCode.CONVERSATION_NOT_FOUND),
        (turn("resp_b", conv.id, "dup", output_id="msg_taken"), ErrorCode.STORE_CONFLICT),
        (turn("resp_c", conv.id, "both", previous="resp_x"), ErrorCode.INPUT_INVALID),
        (turn(await responses.new_response_id(), conv.id, "minted for a thread"), ErrorCode.ID_INVALID),
    ]
    for session, code in cases:
        with pytest.raises(SessionError) as err:
            await responses.save(session)
        assert err.value.code == code, session.id
    with pytest.raises(SessionError) as err:
        await responses.save(turn("resp_d", conv.id, "over"), overwrite=True)
    assert err.value.code == ErrorCode.INPUT_INVALID
    with pytest.raises(SessionError) as err:
        await responses.new_response_id("resp_x", conversation_id=conv.id)
    assert err.value.code == ErrorCode.INPUT_INVALID
    assert await all_keys(backend, responses) == before


async def test_a_turn_into_a_conversation_of_another_data_format_is_refused_whole(backend: Backend) -> None:
    """A conversation hash of the layout earlier commits wrote (no header): the turn is
    refused as unsupported, and neither its thread nor the conversation is written."""
    responses, conversations = stores(backend)
    old = "conv_" + "1" * 48
    await backend.client.hset(conversations.keys.conversation(old), mapping={"c": 1_700_000_000, "n": 0})
    before = await all_keys(backend, responses, deadlines=True)
    rid = await responses.new_response_id(conversation_id=old)
    with pytest.raises(SessionError) as err:
        await responses.save(turn(rid, old, "into the old layout"))
    assert err.value.code == ErrorCode.RECORD_UNSUPPORTED
    assert await all_keys(backend, responses, deadlines=True) == before
    assert await responses.get(rid) is None


async def test_a_deleted_conversation_refuses_the_next_turn(backend: Backend) -> None:
    responses, conversations = stores(backend)
    conv = await conversations.create()
    await conversations.delete(conv.id)
    rid = await responses.new_response_id(conversation_id=conv.id)
    with pytest.raises(SessionError) as err:
        await responses.save(turn(rid, conv.id, "late"))
    assert err.value.code == ErrorCode.CONVERSATION_NOT_FOUND and err.value.http_status == 404
    assert await responses.get(rid) is None


async def test_without_a_conversation_store_conversation_id_is_only_recorded(backend: Backend) -> None:
    """GodeX keeps conversation_id on a record 'for future Conversations API compatibility':
    a store built without ``conversations`` saves such a response like any other."""
    _, conversations = stores(backend)
    plain = RedisResponseSessionStore(backend.client, key_prefix=backend.prefix)
    conv = await conversations.create()
    rid = await plain.new_response_id()
    await plain.save(turn(rid, conv.id, "recorded"))
    assert (await plain.get(rid)).conversation_id == conv.id
    assert await conversations.history(conv.id) == []


async def test_a_conversation_store_of_another_backend_or_prefix_is_refused(backend: Backend) -> None:
    _, conversations = stores(backend)
    other = MemoryConversationStore(key_prefix=backend.prefix)
    with pytest.raises(SessionError):  # in process, not on this Redis
        RedisResponseSessionStore(backend.client, key_prefix=backend.prefix, conversations=other)
    with pytest.raises(SessionError):  # another prefix
        RedisResponseSessionStore(backend.client, key_prefix=backend.prefix,
                                  conversations=RedisConversationStore(backend.client, key_prefix=backend.prefix + "x"))
    with pytest.raises(SessionError):  # another in-process server
        MemoryResponseSessionStore(key_prefix=backend.prefix, conversations=other, server=fakeredis.FakeServer())


async def test_a_re_sent_turn_script_appends_once(backend: Backend) -> None:
    """redis-py re-sends a script whose reply was lost: the copy finds its token in the
    thread's ring and appends nothing, even after another turn came in between."""
    responses, conversations = stores(backend)
    conv = await conversations.create()
    other = await responses.new_response_id(conversation_id=conv.id)

    async def between(_: str) -> None:
        inner.calls = set()  # the turn in between is sent once
        await responses.save(turn(other, conv.id, "between"))
        inner.calls = {"chain_save_turn"}

    inner = resending(responses, {"chain_save_turn"}, between)
    rid = await responses.new_response_id(conversation_id=conv.id)
    await responses.save(turn(rid, conv.id, "lost reply"))
    assert inner.first["chain_save_turn"] == [b"ok"]  # the first copy ran, and appended
    assert texts(await conversations.history(conv.id)) == ["lost reply", "re: lost reply", "between", "re: between"]
