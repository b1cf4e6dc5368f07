"""Every Conversations write through a proxy that loses, holds or cuts its reply after
the server ran it: the effect happens exactly once, and the caller sees the
result it would have seen had the reply arrived (never a 404 or 409 for its own
write). The store is built as users build it (``from_url``: redis-py's retry,
the package's budget) on a real server and a real cluster; see test_faults.py.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

import pytest

from redis_sessions.conversations import RedisConversationStore, SyncConversationStore
from redis_sessions.conversations import store as conv_store
from redis_sessions.conversations.store import SCRIPTS
from redis_sessions.errors import SessionError
from redis_sessions.ids import mint_id
from test_faults import FAULTS, ROUNDS, SYNC_TOO, Faulty, Tally, faulty  # noqa: F401  (faulty: the fixture)

pytestmark = pytest.mark.real


def conversation_store(f: Faulty) -> RedisConversationStore:
    return f.built(RedisConversationStore, SyncConversationStore, f.url, key_prefix=f.prefix,
                   redis_kwargs=f.redis_kwargs, ttl_seconds=600)


async def under_fault(f: Faulty, tally: Tally, key: str, script_name: str, call: Callable[[], Awaitable[Any]]) -> Any:
    """Arm the fault on the reply to ``script_name`` for ``key``, make the call, count."""
    for proxy in f.proxies:
        proxy.disarm()
    f.for_key(key).arm(tally.fault, match=SCRIPTS[script_name].sha.encode(), hold=0.0)
    before = f.fired
    tally.calls += 1
    try:
        return await call()
    except SessionError as exc:
        tally.failed(exc)
        return exc
    finally:
        tally.fired += f.fired - before
        for proxy in f.proxies:
            proxy.disarm()


def msg(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


@SYNC_TOO
@FAULTS
async def test_add_items_appends_each_batch_exactly_once(faulty: Faulty, fault: str) -> None:  # noqa: F811
    tally = Tally(faulty.name, "conversation add_items", fault)
    store = conversation_store(faulty)
    conv = await store.create()
    key = store.keys.conversation(conv.id)
    sent: list[str] = []
    for i in range(ROUNDS[fault]):
        batch = [msg(f"{i}.0"), msg(f"{i}.1")]
        result = await under_fault(faulty, tally, key, "conv_add", lambda: store.add_items(conv.id, batch))
        if not isinstance(result, SessionError):
            sent += [b["content"] for b in batch]
    got = [i["content"] for i in (await store.list_items(conv.id, limit=100, order="asc")).data]
    tally.duplicated = len(got) - len(set(got))
    tally.lost = len(set(sent) - set(got))
    assert got == sent
    await store.close()
    tally.check()


@SYNC_TOO
@FAULTS
async def test_create_update_delete_item_and_delete_apply_once_and_answer(faulty: Faulty, fault: str,  # noqa: F811
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    tally = Tally(faulty.name, "conversation create/update/delete_item/delete", fault)
    store = conversation_store(faulty)
    for i in range(ROUNDS[fault]):
        conv_id = mint_id("conv")  # the id create will mint, so that its key's proxy is armed
        monkeypatch.setattr(conv_store, "mint_id", lambda prefix: conv_id if prefix == "conv" else mint_id(prefix))
        conv = await under_fault(faulty, tally, store.keys.conversation(conv_id), "conv_create",
                                 lambda: store.create(items=[msg("a"), msg("b")], metadata={"round": str(i)}))
        if isinstance(conv, SessionError):
            continue
        key = store.keys.conversation(conv.id)
        assert (await store.get(conv.id)).metadata == {"round": str(i)}
        updated = await under_fault(faulty, tally, key, "conv_update", lambda: store.update(conv.id, {"u": str(i)}))
        if not isinstance(updated, SessionError) and updated.metadata != {"u": str(i)}:
            tally.wrong_results += 1
        first = (await store.list_items(conv.id, order="asc")).data[0]["id"]
        result = await under_fault(faulty, tally, key, "conv_delete_item", lambda: store.delete_item(conv.id, first))
        if not isinstance(result, SessionError) and result.id != conv.id:
            tally.wrong_results += 1
        left = [x["content"] for x in (await store.list_items(conv.id)).data]
        tally.lost += left != ["b"]  # "lost" here: a delete that did not happen, or took more
        result = await under_fault(faulty, tally, key, "conv_delete", lambda: store.delete(conv.id))
        if not isinstance(result, SessionError) and not result.deleted:
            tally.wrong_results += 1
        try:
            await store.get(conv.id)
            tally.lost += 1
        except SessionError:
            pass
    await store.close()
    tally.check()


@SYNC_TOO
@FAULTS
async def test_a_conversation_turn_saves_and_appends_exactly_once(faulty: Faulty, fault: str) -> None:  # noqa: F811
    """A response saved with conversation_id: its save and its turn's append are one
    script; a lost, held or cut reply has redis-py send it again, and the copy finds its
    token in the thread and appends nothing."""
    from redis_sessions import StoredResponseRequestSnapshot, StoredResponseSession
    from redis_sessions import StoredResponseSnapshot
    from redis_sessions.scripts import script

    tally = Tally(faulty.name, "conversation turn (save + append)", fault)
    conversations = conversation_store(faulty)
    responses = faulty.store(ttl_seconds=600, conversations=conversations)
    conv = await conversations.create()
    key = responses.keys.thread("c:" + conv.id)
    sha = script("chain_save_turn").sha.encode()
    sent: list[str] = []
    for i in range(ROUNDS[fault]):
        rid = await responses.new_response_id(conversation_id=conv.id)
        session = StoredResponseSession(
            id=rid, conversation_id=conv.id, created_at=1_700_000_000, request=StoredResponseRequestSnapshot(input=f"q{i}"),
            response=StoredResponseSnapshot(id=rid, output=[{"type": "message", "role": "assistant",
                                                              "content": [{"type": "output_text", "text": f"a{i}"}]}]))
        for proxy in faulty.proxies:
            proxy.disarm()
        faulty.for_key(key).arm(tally.fault, match=sha, hold=0.0)
        before = faulty.fired
        tally.calls += 1
        try:
            await responses.save(session)
            sent += [f"q{i}", f"a{i}"]
        except SessionError as exc:
            tally.failed(exc)
        finally:
            tally.fired += faulty.fired - before
            for proxy in faulty.proxies:
                proxy.disarm()
    got = []
    for item in await conversations.history(conv.id):
        content = item["content"]
        got.append(content if isinstance(content, str) else content[0]["text"])
    tally.duplicated = len(got) - len(set(got))
    tally.lost = len(set(sent) - set(got))
    assert got == sent
    await responses.close()
    await conversations.close()
    tally.check()
