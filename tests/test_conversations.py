"""The Conversations API store on every backend: CRUD, items, paging, errors, TTL, re-sends.

Every behaviour test runs on memory, fakeredis, a real redis-server and a real
cluster (Valkey with ``REDIS_SESSIONS_TEST_SERVER=valkey``); TTLs on the fake
clock (memory, fakeredis), and for real in tests/test_real_expiry.py.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from async_front import AsyncFront
from conftest import Backend
from redis_sessions.config import SessionConfig, create_conversation_store
from redis_sessions import MemoryConversationStore
from redis_sessions.conversations import (
    ConversationStore,
    RedisConversationStore,
    SyncConversationStore,
)
from redis_sessions.conversations import store as conv_store
from redis_sessions import codec, tokens
from redis_sessions.errors import ErrorCode, SessionError


def make_store(b: Backend, **options: Any) -> ConversationStore:
    """The store on ``b``; on a backend of the ``sync`` API (tests/conftest.py), the
    SyncConversationStore on a sync client of the same server, behind async methods."""
    options.setdefault("ttl_seconds", 600)
    if b.api == "sync":
        sync = SyncConversationStore(b.sync_client(), key_prefix=b.prefix, clock=b.clock, **options)
        return AsyncFront(sync)  # type: ignore[return-value]
    return RedisConversationStore(b.client, key_prefix=b.prefix, clock=b.clock, **options)


def msg(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text, **extra}


async def code_of(call: Any) -> ErrorCode:
    with pytest.raises(SessionError) as err:
        await call
    return err.value.code


async def filled(store: ConversationStore, count: int) -> tuple[str, list[str]]:
    """A conversation of ``count`` messages "0".."count-1"; their ids, oldest first."""
    conv = await store.create()
    ids: list[str] = []
    for start in range(0, count, 20):
        added = await store.add_items(conv.id, [msg(str(n)) for n in range(start, min(count, start + 20))])
        ids += [str(i["id"]) for i in added.data]
    return conv.id, ids


async def walk(store: ConversationStore, conv: str, limit: int, order: str) -> list[list[str]]:
    """Every page, following last_id while has_more: the contents, page by page."""
    pages: list[list[str]] = []
    after = None
    while True:
        page = await store.list_items(conv, limit=limit, order=order, after=after)  # type: ignore[arg-type]
        pages.append([i["content"] for i in page.data])
        assert page.first_id == (page.data[0]["id"] if page.data else None)
        assert page.last_id == (page.data[-1]["id"] if page.data else None)
        if not page.has_more:
            return pages
        assert len(page.data) == limit
        after = page.last_id


# -- conversations ----------------------------------------------------------------------
async def test_create_get_update_delete(backend: Backend) -> None:
    store = make_store(backend)
    conv = await store.create(items=[msg("hi")], metadata={"topic": "demo"})
    assert re.fullmatch(r"conv_[0-9a-f]{48}", conv.id)
    assert conv.object == "conversation" and conv.metadata == {"topic": "demo"}
    assert conv.created_at == int(backend.clock())
    assert await store.get(conv.id) == conv
    updated = await store.update(conv.id, {"topic": "other", "k": "v"})
    assert updated.metadata == {"topic": "other", "k": "v"} and updated.created_at == conv.created_at
    assert await store.get(conv.id) == updated
    deleted = await store.delete(conv.id)
    assert (deleted.id, deleted.object, deleted.deleted) == (conv.id, "conversation.deleted", True)
    for call in (store.get(conv.id), store.delete(conv.id), store.update(conv.id, {}),
                 store.add_items(conv.id, [msg("x")]), store.list_items(conv.id), store.get_item(conv.id, "msg_1"),
                 store.delete_item(conv.id, "msg_1")):
        assert await code_of(call) is ErrorCode.CONVERSATION_NOT_FOUND


async def test_unknown_conversation_is_404_and_bad_ids_are_400(backend: Backend) -> None:
    store = make_store(backend)
    err = await code_of(store.get("conv_nope"))
    assert err is ErrorCode.CONVERSATION_NOT_FOUND
    with pytest.raises(SessionError) as exc:
        await store.get("conv_nope")
    assert exc.value.http_status == 404
    for bad in ("", "a b", "{x}", 5):
        assert await code_of(store.get(bad)) is ErrorCode.ID_INVALID  # type: ignore[arg-type]


async def test_a_new_conversation_has_empty_metadata_and_no_items(backend: Backend) -> None:
    store = make_store(backend)
    conv = await store.create()
    assert conv.metadata == {}
    for order in ("asc", "desc"):
        page = await store.list_items(conv.id, order=order)  # type: ignore[arg-type]
        assert (page.object, page.data, page.first_id, page.last_id, page.has_more) == ("list", [], None, None, False)


@pytest.mark.parametrize("metadata", [
    {f"k{i}": "v" for i in range(17)},
    {"k" * 65: "v"},
    {"k": "v" * 513},
    {"k": 1},
    {1: "v"},
    ["k", "v"],
])
async def test_metadata_outside_openais_limits_is_refused_and_nothing_is_written(backend: Backend, metadata: Any) -> None:
    store = make_store(backend)
    conv = await store.create(metadata={"keep": "me"})
    assert await code_of(store.update(conv.id, metadata)) is ErrorCode.INPUT_INVALID
    assert await code_of(store.create(metadata=metadata)) is ErrorCode.INPUT_INVALID
    assert (await store.get(conv.id)).metadata == {"keep": "me"}


async def test_metadata_at_openais_limits_is_accepted(backend: Backend) -> None:
    store = make_store(backend)
    metadata = {f"{i:02d}" + "k" * 62: "v" * 512 for i in range(16)}
    conv = await store.create(metadata=metadata)
    assert (await store.get(conv.id)).metadata == metadata


# -- items --------------------------------------------------------------------------
async def test_items_get_ids_minted_by_type_and_keep_their_own(backend: Backend) -> None:
    store = make_store(backend)
    conv = await store.create()
    items = [
        msg("a"),
        {"role": "assistant", "content": "b"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"type": "reasoning", "summary": []},
        {"type": "something_new"},
        msg("mine", id="msg_custom"),
    ]
    added = await store.add_items(conv.id, items)
    ids = [i["id"] for i in added.data]
    prefixes = [i.rsplit("_", 1)[0] for i in ids[:6]]
    assert prefixes == ["msg", "msg", "fc", "fco", "rs", "item"]
    assert all(re.fullmatch(r"[a-z]+_[0-9a-f]{48}", i) for i in ids[:6])
    assert ids[6] == "msg_custom"
    assert (added.first_id, added.last_id, added.has_more) == (ids[0], ids[-1], False)
    assert [{k: v for k, v in i.items() if k != "id"} for i in added.data] == [
        {k: v for k, v in i.items() if k != "id"} for i in items]
    assert "id" not in items[0]  # the caller's dicts are not changed
    for item in added.data:
        assert await store.get_item(conv.id, item["id"]) == item


async def test_add_items_refuses_bad_batches_whole(backend: Backend) -> None:
    store = make_store(backend)
    conv = await store.create(items=[msg("first", id="msg_1")])
    cases: list[tuple[Any, ErrorCode]] = [
        ([msg(str(i)) for i in range(21)], ErrorCode.INPUT_INVALID),
        ([], ErrorCode.INPUT_INVALID),
        ("not a list", ErrorCode.INPUT_INVALID),
        ([msg("x"), "y"], ErrorCode.INPUT_INVALID),
        ([msg("x", id="same"), msg("y", id="same")], ErrorCode.INPUT_INVALID),
        ([msg("x", id="bad id")], ErrorCode.ID_INVALID),
        ([msg("x"), msg("y", id="msg_1")], ErrorCode.STORE_CONFLICT),
        ([msg("x" * (2 << 20))], ErrorCode.RECORD_TOO_LARGE),
    ]
    for items, code in cases:
        assert await code_of(store.add_items(conv.id, items)) is code, items if len(str(items)) < 200 else code
    page = await store.list_items(conv.id)
    assert [i["content"] for i in page.data] == ["first"]
    assert await code_of(store.create(items=[msg(str(i)) for i in range(21)])) is ErrorCode.INPUT_INVALID
    conv20 = await store.create(items=[msg(str(i)) for i in range(20)])
    assert len((await store.list_items(conv20.id, limit=100)).data) == 20


async def test_delete_item_returns_the_conversation_and_the_id_can_be_used_again(backend: Backend) -> None:
    store = make_store(backend)
    conv = await store.create(items=[msg("a", id="msg_a"), msg("b", id="msg_b")], metadata={"m": "1"})
    assert await store.delete_item(conv.id, "msg_a") == conv
    assert await code_of(store.get_item(conv.id, "msg_a")) is ErrorCode.CONVERSATION_ITEM_NOT_FOUND
    assert await code_of(store.delete_item(conv.id, "msg_a")) is ErrorCode.CONVERSATION_ITEM_NOT_FOUND
    assert await code_of(store.get_item(conv.id, "msg_never")) is ErrorCode.CONVERSATION_ITEM_NOT_FOUND
    assert await code_of(store.delete_item(conv.id, "msg_never")) is ErrorCode.CONVERSATION_ITEM_NOT_FOUND
    assert [i["content"] for i in (await store.list_items(conv.id)).data] == ["b"]
    await store.add_items(conv.id, [msg("a again", id="msg_a")])  # a deleted item's id is free
    assert (await store.get_item(conv.id, "msg_a"))["content"] == "a again"
    assert [i["content"] for i in (await store.list_items(conv.id, order="asc")).data] == ["b", "a again"]


# -- paging -------------------------------------------------------------------------
@pytest.mark.parametrize("count,limit", [(0, 20), (1, 1), (20, 20), (21, 20), (40, 20), (41, 20), (45, 1),
                                         (100, 100), (101, 100), (57, 7)])
async def test_pages_cover_the_conversation_in_order_with_exact_boundaries(backend: Backend, count: int,
                                                                           limit: int) -> None:
    store = make_store(backend)
    conv, _ = await filled(store, count)
    expected = [str(n) for n in range(count)]
    asc = await walk(store, conv, limit, "asc")
    desc = await walk(store, conv, limit, "desc")
    assert [x for p in asc for x in p] == expected
    assert [x for p in desc for x in p] == expected[::-1]
    full, rest = divmod(count, limit)
    assert len(asc) == len(desc) == max(1, full + (1 if rest else 0))  # no trailing empty page
    assert (await store.list_items(conv)).data == (await store.list_items(conv, limit=20, order="desc")).data


async def test_after_a_deleted_item_pages_from_where_it_stood(backend: Backend) -> None:
    store = make_store(backend)
    conv, ids = await filled(store, 10)
    await store.delete_item(conv, ids[4])
    await store.delete_item(conv, ids[5])
    page = await store.list_items(conv, order="asc", after=ids[4], limit=3)
    assert [i["content"] for i in page.data] == ["6", "7", "8"] and page.has_more
    page = await store.list_items(conv, order="desc", after=ids[5], limit=3)
    assert [i["content"] for i in page.data] == ["3", "2", "1"] and page.has_more
    page = await store.list_items(conv, order="desc", after=ids[0])
    assert (page.data, page.has_more) == ([], False)
    await store.delete_item(conv, ids[9])
    page = await store.list_items(conv, order="asc", after=ids[8])
    assert (page.data, page.has_more) == ([], False)


async def test_bad_limit_order_or_cursor_is_400(backend: Backend) -> None:
    store = make_store(backend)
    conv, _ = await filled(store, 3)
    for limit in (0, 101, -1, True, "5", None):
        assert await code_of(store.list_items(conv, limit=limit)) is ErrorCode.INPUT_INVALID  # type: ignore[arg-type]
    for order in ("ASC", "", None, "newest"):
        assert await code_of(store.list_items(conv, order=order)) is ErrorCode.INPUT_INVALID  # type: ignore[arg-type]
    assert await code_of(store.list_items(conv, after="msg_unknown")) is ErrorCode.INPUT_INVALID
    assert await code_of(store.list_items(conv, after="a b")) is ErrorCode.ID_INVALID
    other, other_ids = await filled(store, 1)
    assert await code_of(store.list_items(conv, after=other_ids[0])) is ErrorCode.INPUT_INVALID


class Counting:
    """Counts a store's script calls by name: an edge in front of the store's own."""

    def __init__(self, store: ConversationStore) -> None:
        self.calls: dict[str, int] = {}
        self.edge = store.edge
        store.edge = self  # type: ignore[assignment]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.edge, name)

    async def run(self, lua: Any, keys: Any, args: Any, **options: Any) -> Any:
        self.calls[lua.name] = self.calls.get(lua.name, 0) + 1
        return await self.edge.run(lua, keys, args, **options)


async def test_a_page_is_one_call_and_a_run_of_deleted_items_is_skipped_whole(
        backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conv_store, "SCAN_BUDGET", 32)
    store = make_store(backend)
    conv, ids = await filled(store, 120)
    counting = Counting(store)
    page = await store.list_items(conv, limit=20, after=ids[60])
    assert [i["content"] for i in page.data] == [str(n) for n in range(59, 39, -1)]
    assert counting.calls == {"conv_list": 1}
    for item_id in ids[51:101] + ids[1:51][::-1]:  # 100 holes between "0" and "101", deleted out of order
        await store.delete_item(conv, item_id)
    for order, after, expected in (("asc", None, ["0", "101", "102"]), ("desc", None, ["119", "118", "117"]),
                                   ("desc", ids[102], ["101", "0"]), ("asc", ids[0], ["101", "102", "103"])):
        counting.calls.clear()
        page = await store.list_items(conv, limit=3, order=order, after=after)  # type: ignore[arg-type]
        assert [i["content"] for i in page.data] == expected
        assert counting.calls == {"conv_list": 1}  # the run costs one HGET, not 100 reads
    counting.calls.clear()
    page = await store.list_items(conv, limit=5, order="asc", after=ids[50])  # a deleted cursor inside the run
    assert [i["content"] for i in page.data] == ["101", "102", "103", "104", "105"] and page.has_more
    assert counting.calls == {"conv_list": 2}  # the run's other 50 positions, at most 32 per call


async def test_ten_thousand_deleted_items_before_one_live_one(backend: Backend) -> None:
    """10,000 deleted items are one run, skipped through its ends' g: fields: a page is one call."""
    store = make_store(backend)
    conv = await store.create()
    key = store.keys.conversation(conv.id)
    # What adding 10,000 items and deleting them all leaves: the header's last sequence
    # number, the x: cursors and the run's ends.
    holes = 10_000
    fields = {"h": f"1 {conv.created_at} {holes} 0 1 1", "g:1": holes, f"g:{holes}": 1,
              **{f"x:gone{n}": n + 1 for n in range(holes)}}
    await backend.client.hset(key, mapping=fields)
    live = await store.add_items(conv.id, [msg("live")])
    counting = Counting(store)
    for order in ("asc", "desc"):
        page = await store.list_items(conv.id, order=order)  # type: ignore[arg-type]
        assert [i["content"] for i in page.data] == ["live"] and not page.has_more
    page = await store.list_items(conv.id, order="desc", limit=1)  # has_more: is anything live below?
    assert page.data[0]["id"] == live.data[0]["id"] and not page.has_more
    assert counting.calls == {"conv_list": 3}
    counting.calls.clear()
    page = await store.list_items(conv.id, order="asc", after="gone5000")  # inside the run: walked, bounded
    assert [i["content"] for i in page.data] == ["live"]
    assert counting.calls == {"conv_list": 5}  # 5,000 positions, at most SCAN_BUDGET (1024) per call


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(deleted=st.lists(st.integers(0, 39), unique=True, max_size=40), limit=st.integers(1, 7),
       budget=st.sampled_from([1, 2, 5, 1024]), cursor=st.integers(0, 39))
async def test_pages_match_a_model_whatever_was_deleted_in_whatever_order(deleted: list[int], limit: int,
                                                                         budget: int, cursor: int) -> None:
    """Memory only (the differential test holds the scripts to it): the pages are the
    live items in order, from every cursor, deleted or not, at any scan budget."""
    saved = conv_store.SCAN_BUDGET
    conv_store.SCAN_BUDGET = budget
    try:
        store = MemoryConversationStore()
        conv, ids = await filled(store, 40)
        for n in deleted:
            await store.delete_item(conv, ids[n])
        live = [str(n) for n in range(40) if n not in deleted]
        assert [x for p in await walk(store, conv, limit, "asc") for x in p] == live
        assert [x for p in await walk(store, conv, limit, "desc") for x in p] == live[::-1]
        page = await store.list_items(conv, limit=limit, order="asc", after=ids[cursor])
        after = [x for x in live if int(x) > cursor]
        assert [i["content"] for i in page.data] == after[:limit] and page.has_more == (len(after) > limit)
        page = await store.list_items(conv, limit=limit, order="desc", after=ids[cursor])
        before = [x for x in live if int(x) < cursor][::-1]
        assert [i["content"] for i in page.data] == before[:limit] and page.has_more == (len(before) > limit)
    finally:
        conv_store.SCAN_BUDGET = saved


# -- re-sends (the lost reply, without a proxy) ------------------------------------------
async def test_every_write_resent_with_its_token_has_one_effect(backend: Backend) -> None:
    store = make_store(backend)
    conv = await store.create(items=[msg("a", id="msg_a"), msg("b", id="msg_b")])
    key_id = conv.id
    pair = store.turn_arguments([msg("c", id="msg_c")])
    for _ in range(2):
        assert await store._call("conv_add", key_id, 600_000, b"t_add", "", *pair, write=True) == b"ok"
    replies = [await store._call("conv_delete_item", key_id, 600_000, b"t_del", "msg_a", "", write=True) for _ in range(2)]
    assert replies[0] == replies[1] == [str(conv.created_at).encode(), codec.encode({})]
    for _ in range(2):
        reply = await store._call("conv_update", key_id, 600_000, b"t_upd", codec.encode({"u": "1"}), "", write=True)
        assert reply == str(conv.created_at).encode()
    page = await store.list_items(conv.id, order="asc")
    assert [i["content"] for i in page.data] == ["b", "c"]
    assert (await store.get(conv.id)).metadata == {"u": "1"}
    for _ in range(2):
        assert await store._call("conv_delete", key_id, b"t_gone", "", write=True) == b"ok"
    assert await code_of(store.get(conv.id)) is ErrorCode.CONVERSATION_NOT_FOUND
    assert await code_of(store.delete(conv.id)) is ErrorCode.CONVERSATION_NOT_FOUND  # a new delete: 404


async def test_the_ring_remembers_writes_by_time(clocked: Backend) -> None:
    """Defect 8: the ring kept the last 16 writes. Tokens are kept tokens.RETAIN_S of
    server time now (lua/tokens.lua), so a re-send 20 writes later is still recognised."""
    store = make_store(clocked)
    conv = await store.create()
    pair = store.turn_arguments([msg("first", id="msg_first")])
    assert await store._call("conv_add", conv.id, 600_000, b"t_first", "", *pair, write=True) == b"ok"
    for n in range(20):
        await store.add_items(conv.id, [msg(str(n))])
    assert await store._call("conv_add", conv.id, 600_000, b"t_first", "", *pair, write=True) == b"ok"  # 21 writes on
    clocked.clock.advance(tokens.RETAIN_S + 2)
    await store.add_items(conv.id, [msg("one more")])
    forgotten = store._call("conv_add", conv.id, 600_000, b"t_first", "", *pair, write=True)
    assert await code_of(forgotten) is ErrorCode.STORE_CONFLICT  # a new append of an id it holds
    ring = await clocked.client.hget(store.keys.conversation(conv.id), "ops")
    assert ring.count(b"\n") == 1 and len(ring) <= tokens.MAX_BYTES


# -- data format 1 (docs/key-layout.md) --------------------------------------------------
FIELD_KINDS = {"h", "m", "ops", "i:", "x:", "g:", "t:"}


def field_kind(field: bytes) -> str:
    name = field.decode()
    return name[:2] if name[1:2] == ":" else name


async def test_the_hash_holds_data_format_1(backend: Backend) -> None:
    """The header says the format, when the conversation was made, its last sequence
    number, its largest item and its tombstone queue; items are codec values."""
    store = make_store(backend)
    conv = await store.create(items=[msg("a", id="msg_a"), msg("b" * 100, id="msg_b")])
    await store.add_items(conv.id, [msg("c", id="msg_c")])
    await store.delete_item(conv.id, "msg_a")
    fields = await backend.client.hgetall(store.keys.conversation(conv.id))
    assert {field_kind(f) for f in fields} == FIELD_KINDS
    largest = max(len(v) for f, v in fields.items() if f.startswith(b"i:"))
    assert fields[b"h"] == f"1 {conv.created_at} 3 {largest} 1 2".encode()  # one tombstone: t:1
    assert fields[b"t:1"].split()[1:] == [b"1", b"msg_a"] and fields[b"x:msg_a"] == b"1"
    assert all(codec.is_value(v) for f, v in fields.items() if f.startswith(b"i:"))
    assert fields[b"m"] == codec.encode({})


async def refusals(store: ConversationStore, conversation_id: str) -> set[ErrorCode]:
    """What every call on the conversation raises (nothing may answer)."""
    calls = [store.get(conversation_id), store.update(conversation_id, {"k": "v"}),
             store.add_items(conversation_id, [msg("new")]), store.list_items(conversation_id),
             store.list_items(conversation_id, after="msg_old"), store.get_item(conversation_id, "msg_old"),
             store.delete_item(conversation_id, "msg_old"), store.delete(conversation_id)]
    return {await code_of(call) for call in calls}


async def test_a_conversation_of_another_data_format_is_refused_and_left_as_it_is(backend: Backend) -> None:
    """The layout earlier commits wrote (created_at in c, no header), a header of a later
    format, and a header that does not parse: every call is refused, nothing written."""
    store = make_store(backend)
    item = codec.pack(codec.encode(msg("old", id="msg_old")), 0)
    layouts = {
        ErrorCode.RECORD_UNSUPPORTED: [
            {"c": 1_700_000_000, "m": codec.encode({}), "n": 1, "b": len(item), "i:1": item, "x:msg_old": 1},
            {"h": "3 1700000000 1 40 1 1", "m": codec.encode({}), "i:1": item, "x:msg_old": 1},
        ],
        ErrorCode.RECORD_CORRUPT: [{"h": "1 1700000000 one", "m": codec.encode({}), "i:1": item, "x:msg_old": 1},
                                   # format 2 is format 1 and an owner: without one it does not parse
                                   {"h": "2 1700000000 1 40 1 1", "m": codec.encode({}), "i:1": item, "x:msg_old": 1}],
    }
    for code, hashes in layouts.items():
        for fields in hashes:
            conversation_id = conv_store.mint_id("conv")
            key = store.keys.conversation(conversation_id)
            await backend.client.hset(key, mapping=fields)
            await backend.client.expire(key, 600)
            before = (await backend.client.hgetall(key), await backend.client.pexpiretime(key))
            assert await refusals(store, conversation_id) == {code}, fields
            assert (await backend.client.hgetall(key), await backend.client.pexpiretime(key)) == before


# -- TTL ---------------------------------------------------------------------------------
async def test_writes_set_the_ttl_and_it_expires_on_the_fake_clock(clocked: Backend) -> None:
    store = make_store(clocked, ttl_seconds=10)
    conv = await store.create(items=[msg("a")])
    clocked.clock.advance(9)
    await store.get(conv.id)  # a read does not refresh (no sliding)
    await store.add_items(conv.id, [msg("b")])  # a write does
    clocked.clock.advance(9)
    assert len((await store.list_items(conv.id)).data) == 2
    clocked.clock.advance(2)
    assert await code_of(store.get(conv.id)) is ErrorCode.CONVERSATION_NOT_FOUND


async def test_sliding_ttl_refreshes_on_reads(clocked: Backend) -> None:
    store = make_store(clocked, ttl_seconds=10, sliding_ttl=True)
    conv = await store.create(items=[msg("a", id="msg_a")])
    for read in (lambda: store.get(conv.id), lambda: store.list_items(conv.id),
                 lambda: store.get_item(conv.id, "msg_a")):
        clocked.clock.advance(9)
        await read()
    clocked.clock.advance(11)
    assert await code_of(store.get(conv.id)) is ErrorCode.CONVERSATION_NOT_FOUND


async def test_a_deleted_conversation_is_changed_in_place_and_goes_once_its_tokens_do(clocked: Backend) -> None:
    """The delete drops c and keeps the key (never deletes and recreates it: Redis refuses
    that mid-migration); the ring answers a re-sent delete until the key expires."""
    store = make_store(clocked, ttl_seconds=None)
    conv = await store.create(items=[msg("a")])
    await store.delete(conv.id)
    key = store.keys.conversation(conv.id)
    fields = await clocked.client.hkeys(key)
    assert b"ops" in fields and b"c" not in fields
    assert await code_of(store.get(conv.id)) is ErrorCode.CONVERSATION_NOT_FOUND
    clocked.clock.advance(tokens.RETAIN_S - 1)
    assert await clocked.client.exists(key) == 1  # its ring still answers a re-sent delete
    clocked.clock.advance(1.001)
    assert await clocked.client.exists(key) == 0


async def test_the_default_ttl_is_the_configs(redis_backend: Backend) -> None:
    store = RedisConversationStore(redis_backend.client, key_prefix=redis_backend.prefix)
    conv = await store.create()
    ttl = await redis_backend.client.ttl(store.keys.conversation(conv.id))
    assert 30 * 86400 - 60 <= ttl <= 30 * 86400  # a minute of slack between the write and this read: not a clock test
    forever = RedisConversationStore(redis_backend.client, key_prefix=redis_backend.prefix, ttl_seconds=None)
    conv = await forever.create()
    assert await redis_backend.client.ttl(forever.keys.conversation(conv.id)) == -1


# -- the factory, clients, scripts ----------------------------------------------------
async def test_the_factory_builds_from_the_same_config(real_backend: Backend) -> None:
    memory = create_conversation_store(SessionConfig(ttl_seconds=60))
    assert isinstance(memory, MemoryConversationStore) and memory.ttl_seconds == 60
    store = create_conversation_store(SessionConfig(url=real_backend.url, key_prefix=real_backend.prefix,
                                                    ttl_seconds=120, sliding_ttl=True))
    assert isinstance(store, RedisConversationStore) and store.sliding_ttl
    try:
        conv = await store.create(items=[msg("a")])
        assert [i["content"] for i in (await store.list_items(conv.id)).data] == ["a"]
        assert 100 < await real_backend.client.ttl(store.keys.conversation(conv.id)) <= 120
    finally:
        await store.close()


async def test_every_script_runs_after_script_flush(real_backend: Backend) -> None:
    store = make_store(real_backend)
    conv = await store.create(items=[msg("a", id="msg_a")])
    calls = [lambda: store.get(conv.id), lambda: store.list_items(conv.id), lambda: store.get_item(conv.id, "msg_a"),
             lambda: store.add_items(conv.id, [msg("b")]), lambda: store.update(conv.id, {"a": "b"}),
             lambda: store.delete_item(conv.id, "msg_a"), lambda: store.create(), lambda: store.delete(conv.id)]
    for call in calls:
        await real_backend.client.script_flush()
        await call()


async def test_a_client_that_decodes_responses_works(real_backend: Backend) -> None:
    from redis.asyncio import Redis

    if real_backend.name == "cluster":
        from redis.asyncio.cluster import RedisCluster

        client: Any = RedisCluster.from_url(real_backend.url.replace("redis+cluster", "redis"), decode_responses=True)
    else:
        client = Redis.from_url(real_backend.url, decode_responses=True)
    try:
        store = RedisConversationStore(client, key_prefix=real_backend.prefix)
        conv = await store.create(items=[msg("é")], metadata={"k": "ü"})
        assert (await store.get(conv.id)).metadata == {"k": "ü"}
        assert (await store.list_items(conv.id)).data[0]["content"] == "é"
    finally:
        await client.aclose()


def test_the_conversation_api_is_exported_from_the_package() -> None:
    import redis_sessions

    for name in ("Conversation", "ConversationDeleted", "ConversationItemList", "ConversationStore",
                 "MemoryConversationStore", "RedisConversationStore", "SyncConversationStore",
                 "create_conversation_store"):
        assert name in redis_sessions.__all__ and hasattr(redis_sessions, name), name
