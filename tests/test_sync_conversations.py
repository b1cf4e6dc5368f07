"""The synchronous conversation store (issue #31): what only the sync API can show.

Its behaviour is the async store's (tests/test_conversations.py runs over both APIs);
here: every public method completes on the first ``send`` (no loop), a turn saved by
the sync response store lands in its conversation in the same script, threads sharing
one store, and a lost reply.
"""

from __future__ import annotations

import inspect
import threading
import uuid
from typing import Any

import fakeredis
import pytest
import redis

from faultproxy import FaultProxy
from redis_sessions import (
    ErrorCode,
    SessionError,
    StoredResponseRequestSnapshot,
    StoredResponseSession,
    StoredResponseSnapshot,
    SyncConversationStore,
    SyncResponseSessionStore,
)
from redis_sessions.conversations import RedisConversationStore
from redis_sessions.conversations.store import SCRIPTS


def msg(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text, **extra}


def first_send(call: Any) -> Any:
    assert inspect.iscoroutine(call)
    try:
        call.send(None)
    except StopIteration as done:
        return done.value
    call.close()
    raise AssertionError("suspended")


def test_every_public_method_completes_on_the_first_send():
    store = SyncConversationStore(fakeredis.FakeRedis(), key_prefix="first")
    core = store.core
    conv = first_send(core.create(items=[msg("a", id="msg_a")], metadata={"k": "v"}))
    assert first_send(core.get(conv.id)) == conv
    assert first_send(core.update(conv.id, {"k": "w"})).metadata == {"k": "w"}
    added = first_send(core.add_items(conv.id, [msg(str(n)) for n in range(20)]))
    assert len(added.data) == 20
    assert len(first_send(core.list_items(conv.id, limit=5, after=added.data[10]["id"])).data) == 5
    assert len(first_send(core.history(conv.id))) == 21
    assert first_send(core.get_item(conv.id, "msg_a"))["content"] == "a"
    assert first_send(core.delete_item(conv.id, "msg_a")).id == conv.id
    with pytest.raises(SessionError):
        first_send(core.get_item(conv.id, "msg_a"))  # a refusal, raised on the first send too
    assert first_send(core.delete(conv.id)).deleted
    assert first_send(core.close()) is None
    public = {name for name, _ in inspect.getmembers(SyncConversationStore, inspect.isfunction)
              if not name.startswith("_")}
    assert public == {"create", "get", "update", "delete", "add_items", "list_items", "history", "get_item",
                      "delete_item", "close"}


def test_the_clients_of_the_other_api_are_refused():
    with pytest.raises(SessionError) as err:
        SyncConversationStore(fakeredis.FakeAsyncRedis())  # type: ignore[arg-type]
    assert err.value.code is ErrorCode.INPUT_INVALID
    with pytest.raises(SessionError) as err:
        RedisConversationStore(fakeredis.FakeRedis())  # type: ignore[arg-type]
    assert "SyncConversationStore" in err.value.message


def test_a_client_that_decodes_responses_works():
    store = SyncConversationStore(fakeredis.FakeRedis(decode_responses=True), key_prefix="dec")
    conv = store.create(items=[msg("é")], metadata={"k": "ü"})
    assert store.get(conv.id).metadata == {"k": "ü"}
    assert store.list_items(conv.id).data[0]["content"] == "é"


def turn(rid: str, conversation: str, text: str) -> StoredResponseSession:
    out = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"re: {text}"}]}
    return StoredResponseSession(
        id=rid, conversation_id=conversation, created_at=1_700_000_000,
        request=StoredResponseRequestSnapshot(input=text), response=StoredResponseSnapshot(id=rid, output=[out]))


def test_the_sync_response_store_appends_a_turn_to_a_sync_conversation_store():
    """``conversations=`` a SyncConversationStore: the response and its turn's items in
    one script, as the asyncio stores do (tests/test_conversation_turns.py)."""
    client = fakeredis.FakeRedis()
    conversations = SyncConversationStore(client, key_prefix="turns")
    responses = SyncResponseSessionStore(client, key_prefix="turns", conversations=conversations)
    conv = conversations.create(items=[msg("earlier")])
    first = responses.new_response_id(conversation_id=conv.id)
    responses.save(turn(first, conv.id, "one"))
    history = conversations.history(conv.id)
    assert [i["content"] if isinstance(i["content"], str) else i["content"][0]["text"] for i in history] == [
        "earlier", "one", "re: one"]
    assert responses.get(first).conversation_id == conv.id  # type: ignore[union-attr]
    missing = responses.new_response_id(conversation_id="conv_gone")
    with pytest.raises(SessionError) as err:
        responses.save(turn(missing, "conv_gone", "x"))
    assert err.value.code is ErrorCode.CONVERSATION_NOT_FOUND
    with pytest.raises(SessionError) as err:
        SyncResponseSessionStore(client, key_prefix="other", conversations=conversations)
    assert err.value.code is ErrorCode.INPUT_INVALID  # the prefixes must match


# -- threads and faults: a real server -----------------------------------------------
THREADS = 32
BATCHES = 10


@pytest.mark.real
def test_threads_share_one_store_and_every_item_lands_once(redis_server):
    """32 threads, one store (one client, one pool), one conversation: each appends 10
    batches of 2 items; all 640 items are there, once each, each thread's in its order."""
    store = SyncConversationStore.from_url(redis_server.url, key_prefix=f"tc{uuid.uuid4().hex[:8]}")
    conv = store.create()
    barrier = threading.Barrier(THREADS)
    failures: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            barrier.wait()
            for b in range(BATCHES):
                store.add_items(conv.id, [msg(f"{n}.{b}.0"), msg(f"{n}.{b}.1")])
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures[:3]
    contents = [i["content"] for i in store.history(conv.id)]
    assert len(contents) == THREADS * BATCHES * 2 == len(set(contents))
    for n in range(THREADS):
        mine = [c for c in contents if c.startswith(f"{n}.")]
        assert mine == [f"{n}.{b}.{k}" for b in range(BATCHES) for k in (0, 1)]
    store.close()


@pytest.mark.real
@pytest.mark.parametrize("fault", ["drop", "cut"])
def test_a_lost_reply_to_an_add_is_retried_and_the_items_land_once(redis_server, fault):
    """The proxy loses conv_add's reply after the server ran it; redis-py re-sends it, the
    token in the conversation's ring makes the copy a no-op, and the caller sees success."""
    prefix = f"fc{uuid.uuid4().hex[:6]}"
    with FaultProxy("127.0.0.1", redis_server.port) as proxy:
        store = SyncConversationStore.from_url(proxy.url, key_prefix=prefix, timeout=8.0,
                                               redis_kwargs={"socket_timeout": 1.0})
        conv = store.create(items=[msg("first")])
        proxy.arm(fault, match=SCRIPTS["conv_add"].sha.encode())
        added = store.add_items(conv.id, [msg("second"), msg("third")])
        assert proxy.fired == 1
        assert proxy.matched == 2  # sent twice: the lost copy and redis-py's retry
        assert [i["content"] for i in added.data] == ["second", "third"]
        store.close()
    client = redis.Redis.from_url(redis_server.url)
    with SyncConversationStore(client, key_prefix=prefix) as direct:
        assert [i["content"] for i in direct.history(conv.id)] == ["first", "second", "third"]
    client.close()
