"""The one-key layout on every backend: lists from before headers, damaged headers,
wrong types, and calls refused before anything is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest

from conftest import Backend
from redis_sessions.codec import encode
from redis_sessions.errors import ErrorCode
from redis_sessions.items import CompactionSession, ItemSession, Snapshot
from redis_sessions.items import header as hd
from redis_sessions.keys import KeySpace
from test_items import (  # noqa: F401  (read_path is a fixture)
    GARBAGE, _summarize, expect_error, header_of, key_of, make, msgs, prefix_keys, push_raw, read_path, texts,
)

LUA = Path(__file__).resolve().parent.parent / "lua"


async def state(b: Backend) -> dict[str, Any]:
    """Every key of the test, byte for byte (DUMP), with its absolute deadline."""
    keys = await prefix_keys(b)
    return {k: (await b.client.dump(k), await b.client.pexpiretime(k)) for k in keys}


async def write_old_layout(b: Backend, sid: str, entries: list[bytes]) -> None:
    """A session as the two-key layout stored it: a list of items, and a meta hash."""
    for entry in entries:
        await push_raw(b, sid, entry)
    await b.client.hset(KeySpace(b.prefix).session_meta(sid), mapping={"v": 7, "e": "0ld", "g": 2})


def old_items(n: int, start: int = 0) -> list[bytes]:
    return [encode(m) for m in msgs(n, start)]


# -- lists from before headers ----------------------------------------------------------
async def test_old_layout_is_read_with_index_0_as_an_item(backend: Backend, read_path: str) -> None:
    await write_old_layout(backend, "s1", old_items(5))
    s = make(backend)
    assert texts(await s.get_items()) == ["m0", "m1", "m2", "m3", "m4"]
    assert texts(await s.get_items(2)) == ["m3", "m4"]
    assert texts(await s.get_items(5)) == ["m0", "m1", "m2", "m3", "m4"]
    assert texts(await s.get_items(50)) == ["m0", "m1", "m2", "m3", "m4"]
    snap = await s.snapshot()
    assert (snap.count, snap.epoch, texts(snap.items)) == (5, "", ["m0", "m1", "m2", "m3", "m4"])
    f = await s.fork("f", upto=3)
    assert texts(await f.get_items()) == ["m0", "m1", "m2"]


async def test_old_layout_with_garbage_first(backend: Backend, read_path: str) -> None:
    await write_old_layout(backend, "s1", [GARBAGE, *old_items(2)])
    s = make(backend)
    assert texts(await s.get_items()) == ["m0", "m1"]
    assert texts(await s.get_items(2)) == ["m0", "m1"]
    assert texts(await s.get_items(3)) == ["m0", "m1"]


async def test_a_write_gives_an_old_list_its_header(backend: Backend) -> None:
    await write_old_layout(backend, "s1", old_items(3))
    s = make(backend)
    assert await s.replace_prefix(await s.snapshot(), []) is False  # no epoch to guard with yet
    await s.add_items(msgs(1, start=3))
    h = await header_of(backend)
    assert (h.version, h.rewrites) == (1, 0)  # the old meta hash is not read
    assert texts(await s.get_items()) == ["m0", "m1", "m2", "m3"]
    assert await CompactionSession(s, _summarize).compact(force=True) == "compacted"
    assert await s.get_items() == [{"type": "compaction", "summary": "4 items"}]
    assert await backend.client.hget(KeySpace(backend.prefix).session_meta("s1"), "v") == b"7"


async def test_pop_and_clear_on_an_old_list(backend: Backend) -> None:
    await write_old_layout(backend, "s1", old_items(2))
    s = make(backend)
    assert texts([await s.pop_item()]) == ["m1"]
    assert hd.is_header((await _entries(backend))[0])
    assert texts([await s.pop_item()]) == ["m0"]
    assert await s.pop_item() is None
    await write_old_layout(backend, "s2", old_items(2))
    await make(backend, "s2").clear_session()
    assert await make(backend, "s2").get_items() == []


async def test_an_old_list_is_not_a_free_fork_target(backend: Backend) -> None:
    await write_old_layout(backend, "taken", old_items(1))
    s = make(backend)
    await s.add_items(msgs(2))
    with expect_error(ErrorCode.STORE_CONFLICT):
        await s.fork("taken")
    assert texts(await make(backend, "taken").get_items()) == ["m0"]


async def _entries(b: Backend, sid: str = "s1") -> list[bytes]:
    return list(await b.client.lrange(key_of(b, sid), 0, -1))


# -- damaged headers ------------------------------------------------------------------------
DAMAGED = {
    "junk": hd.MAGIC + b"junk",
    "letters_for_v": hd.MAGIC + b" abc e1 0   0 0 0 0\n",
    "empty_epoch": hd.MAGIC + b" 1  0   0 0 0 0\n",
    "sections_cut_short": hd.MAGIC + b" 1 e1 0   1 4 9 0\ntok\n",
    "too_few_fields": hd.MAGIC + b" 1 e1 0   0 0 0\n",
    "no_newline": hd.MAGIC + b" 1 e1 0   0 0 0 0",
    "counter_too_long": hd.MAGIC + b" 12345678901234 e1 0   0 0 0 0\n",
}


@pytest.mark.parametrize("damage", list(DAMAGED), ids=list(DAMAGED))
async def test_a_damaged_header_is_record_corrupt_everywhere(backend: Backend, read_path: str, damage: str) -> None:
    await push_raw(backend, "s1", DAMAGED[damage])
    for entry in old_items(3):
        await push_raw(backend, "s1", entry)
    s = make(backend)
    source = make(backend, "src")
    await source.add_items(msgs(2))
    before = await state(backend)
    ops: list[Callable[[], Awaitable[Any]]] = [
        s.get_items, lambda: s.get_items(10), lambda: s.add_items(msgs(1)), s.pop_item,
        s.snapshot, lambda: s.fork("f"), lambda: source.fork("s1"),
        lambda: CompactionSession(s, _summarize).run_compaction({"force": True}),
        lambda: s.replace_prefix(Snapshot(items=[], count=1, version=1, epoch="epoc", rewrites=0), []),
    ]
    for op in ops:
        with expect_error(ErrorCode.RECORD_CORRUPT):
            await op()
    # A limited read too: the header says how many bytes one read may take.
    with expect_error(ErrorCode.RECORD_CORRUPT):
        await s.get_items(2)
    assert await state(backend) == before  # refused before any write
    await s.clear_session()  # the one thing that works on a damaged session: it goes
    assert await s.get_items() == [] and await prefix_keys(backend) == [key_of(backend, "src")]


async def test_a_ring_of_another_format_is_forgotten_not_refused(backend: Backend, read_path: str) -> None:
    """A header's ring from before the shared one (or damaged) matches no token: the next
    write drops it and the session goes on (a retry across that upgrade applies again)."""
    await push_raw(backend, "s1", hd.MAGIC + b" 1 e1 0   1 4 0 0\ntok\n")  # the old ring: a token, no result
    await push_raw(backend, "s1", old_items(1)[0])
    s = make(backend)
    assert texts(await s.get_items()) == ["m0"]
    assert await s._eng_add(old_items(1), b"tok", b"e") == 2  # not taken for the old one
    h = await header_of(backend)
    assert h.tokens == [b"tok"] and h.rlen == 0 and h.count == 0
    assert await s._eng_add(old_items(1), b"tok", b"e") == 2  # the new entry is: a replay


async def test_later_header_fields_are_kept_by_writers(backend: Backend) -> None:
    await push_raw(backend, "s1", hd.MAGIC + b" 0 epoch 0   0 0 0 0 later=1\na later section")
    s = make(backend)
    await s.add_items(msgs(2))
    await s.pop_item()
    after = await header_of(backend)
    assert (after.rest, after.tail, after.version) == (b" later=1", b"a later section", 2)
    assert after.largest is None  # a header from before keeps not knowing its largest entry
    fresh = make(backend, "s2")
    await fresh.add_items(msgs(2))
    assert (await header_of(backend, "s2")).largest == max(len(encode(m)) for m in msgs(2))
    assert [t[:1] for t in after.results] == [b"a", b"i"]
    assert after.tlen == len(b"".join(b"%010d%s %s\n" % entry for entry in after.ring))


def test_the_header_can_never_be_taken_for_an_item() -> None:
    assert hd.MAGIC[0] not in set(range(0x80, 0x90)) | {0xDE, 0xDF, 0xC1}  # maps, and packed items
    assert hd.MAGIC == b"\x00rs1" and hd.STASH == b"\x00rsp" and hd.HINT == b"0:"
    lib = (LUA / "items_lib.lua").read_text()
    assert "string.char(0) .. 'rs1'" in lib
    assert "local MAGIC, STASH, HINT = string.char(0) .. 'rs1', string.char(0) .. 'rsp', '0:'" in lib
    line = "local POPS, POP_BYTES, SCAN_LIMIT, MAX_BATCH_ITEMS = "
    assert f"{line}{hd.POPS}, {hd.POP_BYTES}, {hd.SCAN_LIMIT}, {hd.MAX_BATCH_ITEMS}" in lib
    assert f"local READ_BYTES = {hd.READ_BYTES}\n" in lib


# -- a refused call writes nothing ----------------------------------------------------------
async def test_refused_calls_leave_every_key_byte_for_byte(backend: Backend) -> None:
    s = make(backend, ttl_seconds=600, max_item_bytes=4096, max_batch_bytes=10_000)
    await s.add_items(msgs(3))
    await s.pop_item()
    await make(backend, "taken").add_items(msgs(1))
    snap = await s.snapshot()
    deep: Any = "x"
    for _ in range(150):
        deep = [deep]
    refused: list[tuple[ErrorCode, Callable[[], Awaitable[Any]]]] = [
        (ErrorCode.INPUT_INVALID, lambda: s.add_items([{"ok": 1}, "not a dict"])),  # type: ignore[list-item]
        (ErrorCode.INPUT_INVALID, lambda: s.add_items([{"ok": 1}, {"deep": deep}])),
        (ErrorCode.INPUT_INVALID, lambda: s.add_items([{"ok": 1}, {"x": object()}])),
        (ErrorCode.RECORD_TOO_LARGE, lambda: s.add_items([{"big": "x" * 5000}])),
        (ErrorCode.RECORD_TOO_LARGE, lambda: s.add_items([{"big": "x" * 4000}] * 3)),
        (ErrorCode.ID_INVALID, lambda: s.add_items(msgs(1), idempotency_key="a b")),
        (ErrorCode.INPUT_INVALID, lambda: s.get_items("3")),  # type: ignore[arg-type]
        (ErrorCode.ID_INVALID, lambda: s.fork("a{b")),
        (ErrorCode.INPUT_INVALID, lambda: s.fork("f", upto=True)),  # type: ignore[arg-type]
        (ErrorCode.INPUT_INVALID, lambda: s.fork("f", upto=-1)),
        (ErrorCode.STORE_CONFLICT, lambda: s.fork("taken")),
        (ErrorCode.INPUT_INVALID, lambda: s.replace_prefix(snap, ["not a dict"])),
        (ErrorCode.RECORD_TOO_LARGE, lambda: s.replace_prefix(snap, [{"big": "x" * 4000}] * 3)),
        (ErrorCode.INPUT_INVALID, lambda: s.replace_prefix("snap", [])),  # type: ignore[arg-type]
        (ErrorCode.INPUT_INVALID, lambda: s.replace_prefix(Snapshot(items=[], count=True, version=1,  # type: ignore[arg-type]
                                                                    epoch=snap.epoch, rewrites=snap.rewrites), [])),
    ]
    before = await state(backend)
    for code, call in refused:
        with expect_error(code):
            await call()
        assert await state(backend) == before, code


async def test_max_batch_bytes_defaults_to_one_mib(backend: Backend) -> None:
    """One script's arguments: 4 MiB held Redis 7.0 about 5 ms before the script's first line."""
    s = make(backend)
    assert s.max_batch_bytes == 1 << 20
    with expect_error(ErrorCode.RECORD_TOO_LARGE):
        await s.add_items([{"blob": "x" * 600_000} for _ in range(2)])
    assert await prefix_keys(backend) == []
    await s.add_items([{"blob": "x" * 500_000} for _ in range(2)])
    assert len(await s.get_items()) == 2
    f = await s.fork("f")
    assert f.max_batch_bytes == s.max_batch_bytes


async def test_the_compactors_output_is_bounded_too(backend: Backend) -> None:
    s = make(backend, max_batch_bytes=2000)

    async def verbose(items: list[Any]) -> list[Any]:
        return [{"summary": "x" * 500} for _ in range(5)]

    await s.add_items(msgs(12))
    with expect_error(ErrorCode.RECORD_TOO_LARGE):
        await CompactionSession(s, verbose).compact(force=True)
    assert len(await s.get_items()) == 12


# -- one key, whatever happens ------------------------------------------------------------
async def test_every_operation_touches_one_key(backend: Backend) -> None:
    s: ItemSession = make(backend, ttl_seconds=60)
    await s.add_items(msgs(12))
    await s.get_items(3)
    await s.pop_item()
    await CompactionSession(s, _summarize).compact(force=True)
    await s.snapshot()
    await s.clear_session()
    await s.add_items(msgs(1))
    assert await prefix_keys(backend) == [key_of(backend)]
