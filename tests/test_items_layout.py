"""Data format 1 of an item session on every backend: the layout, what earlier commits
wrote (refused, never read), damaged headers, wrong types, and calls refused before
anything is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest

from conftest import Backend
from redis_sessions import tokens
from redis_sessions.codec import encode, pack
from redis_sessions.errors import ErrorCode
from redis_sessions.items import CompactionSession, RedisSession, Snapshot
from redis_sessions.items import header as hd
from redis_sessions.keys import KeySpace
from test_items import (
    _summarize, expect_error, header_of, key_of, make, msgs, prefix_keys, ring_of, texts,
)

LUA = Path(__file__).resolve().parent.parent / "lua"


async def state(b: Backend) -> dict[str, Any]:
    """Every key of the test, byte for byte (DUMP), with its absolute deadline."""
    keys = await prefix_keys(b)
    return {k: (await b.client.dump(k), await b.client.pexpiretime(k)) for k in keys}


def items(n: int, start: int = 0) -> list[bytes]:
    return [pack(encode(m), 0) for m in msgs(n, start)]


async def write(b: Backend, sid: str, entries: list[bytes]) -> None:
    await b.client.rpush(KeySpace(b.prefix).session_items(sid), *entries)


def operations(s: RedisSession, source: RedisSession) -> list[Callable[[], Awaitable[Any]]]:
    """Every call that reads or writes the session ``s`` (``source`` forks onto it)."""
    return [
        s.get_items, lambda: s.get_items(2), lambda: s.get_items(10), lambda: s.add_items(msgs(1)), s.pop_item,
        s.snapshot, lambda: s.fork("f"), lambda: source.fork(s.session_id),
        lambda: CompactionSession(s, _summarize).run_compaction({"force": True}),
        lambda: s.replace_prefix(Snapshot(items=[], count=1, version=1, epoch="epoc", rewrites=0), []),
    ]


# -- the layout -----------------------------------------------------------------------------
async def test_a_session_is_its_stash_its_items_its_ring_and_its_header(backend: Backend) -> None:
    s = make(backend, compression=False)
    await s.add_items(msgs(3))
    assert await s.pop_item() == msgs(3)[2]
    stored = await backend.client.lrange(key_of(backend), 0, -1)
    assert len(stored) == 2 + 2 + 2 and stored[2:4] == items(2)
    h = await header_of(backend)
    assert (h.version, h.rewrites, h.count, h.largest) == (2, 1, 2, len(items(1, 2)[0]))
    token = (await ring_of(backend))[-1][1]
    assert stored[h.newest] == hd.STASH + token + b"\n" + items(1, 2)[0] and h.popped == len(stored[h.newest]) - 2
    assert stored[1 - h.newest] == hd.STASH
    assert [outcome for _, _, outcome in await ring_of(backend)] == [b"a1", b"i"]
    assert hd.is_header(stored[-1]) and not any(map(hd.is_header, stored[:-1]))


# -- what earlier commits wrote, and other formats: refused, never read ------------------------
EARLIER = {
    "no_header": [encode(m) for m in msgs(3)],  # the first layout: a list of items
    "old_header": [b"\x00rs1 3 e1 0   0 0 0 0 b40\n", *items(3)],  # headers before format 1
    "old_header_stash": [b"\x00rs1 3 e1 1   0 0 0 2 b40\n0:", b"\x00rsp", *items(3)],
    "format_2": [hd.STASH, hd.STASH, *items(3), b"", b"\x00h2 3 0 3 0 0 40 e1  "],
}


@pytest.mark.parametrize("layout", list(EARLIER), ids=list(EARLIER))
async def test_what_earlier_commits_wrote_is_refused_everywhere(backend: Backend, layout: str) -> None:
    await write(backend, "s1", EARLIER[layout])
    s, source = make(backend), make(backend, "src")
    await source.add_items(msgs(2))
    before = await state(backend)
    for op in [*operations(s, source), s.clear_session]:
        with expect_error(ErrorCode.RECORD_UNSUPPORTED):
            await op()
    assert await state(backend) == before  # refused before any write


# -- damaged headers ------------------------------------------------------------------------
DAMAGED = {
    "junk": hd.MAGIC + b"junk",
    "letters_for_v": hd.MAGIC + b"1 abc 0 3 0 0 40 e1  ",
    "empty_epoch": hd.MAGIC + b"1 1 0 3 0 0 40   ",
    "bad_slot": hd.MAGIC + b"1 1 0 3 2 0 40 e1  ",
    "too_few_fields": hd.MAGIC + b"1 1 0 3 0 0 40",
    "counter_too_long": hd.MAGIC + b"1 12345678901234 0 3 0 0 40 e1  ",
    "not_last": None,  # something pushed after the header
}


@pytest.mark.parametrize("damage", list(DAMAGED), ids=list(DAMAGED))
async def test_a_damaged_header_is_record_corrupt_everywhere(backend: Backend, damage: str) -> None:
    last = DAMAGED[damage]
    tail = [b"", b"\x00h1 1 0 3 0 0 40 e1  ", b"junk after it"] if last is None else [b"", last]
    await write(backend, "s1", [hd.STASH, hd.STASH, *items(3), *tail])
    s, source = make(backend), make(backend, "src")
    await source.add_items(msgs(2))
    before = await state(backend)
    for op in operations(s, source):
        with expect_error(ErrorCode.RECORD_CORRUPT):
            await op()
    assert await state(backend) == before  # refused before any write
    await s.clear_session()  # the one thing that works on a damaged session: it goes
    assert await s.get_items() == [] and await prefix_keys(backend) == [key_of(backend, "src")]


async def test_a_ring_of_another_format_is_forgotten_not_refused(backend: Backend) -> None:
    """A ring that does not parse (damaged) matches no token: the next write drops it and
    the session goes on."""
    await write(backend, "s1", [hd.STASH, hd.STASH, *items(1), b"tok", b"\x00h1 1 0 1 0 0 40 e1  "])
    s = make(backend, compression=False)
    assert texts(await s.get_items()) == ["m0"]
    await s.add_items(msgs(1, start=1))
    assert [t for _, t, _ in await ring_of(backend)] != [b"tok"] and len(await ring_of(backend)) == 1
    assert texts(await s.get_items()) == ["m0", "m1"]


async def test_later_header_fields_are_ignored_by_readers_and_dropped_by_writers(backend: Backend) -> None:
    """Rule 2 of docs/key-layout.md: a field a later version adds after the ones here is
    one a format-1 reader may ignore; a format-1 writer does not keep what it cannot keep
    up to date, so a newer reader never finds it stale."""
    await write(backend, "s1", [hd.STASH, hd.STASH, *items(2), b"", b"\x00h1 2 0 2 0 0 40 e1 src 3 later=1"])
    s = make(backend, compression=False)
    assert texts(await s.get_items()) == ["m0", "m1"] and texts(await s.get_items(1)) == ["m1"]
    h = await header_of(backend)
    assert (h.forked_from, h.forked_at) == (b"src", b"3")
    await s.add_items(msgs(1, start=2))
    last = await backend.client.lindex(key_of(backend), -1)
    assert last.endswith(b" e1 src 3") and b"later" not in last
    assert (await header_of(backend)).count == 3


def test_the_header_and_the_stash_can_never_be_taken_for_an_item() -> None:
    assert hd.MAGIC[0] != 0xC1 and hd.STASH[0] != 0xC1  # every stored value starts with 0xc1
    assert hd.MAGIC == b"\x00h" and hd.STASH == b"\x00p"
    lib = (LUA / "items_lib.lua").read_text()
    assert "local MAGIC, STASH, FORMAT = '\\0h', '\\0p', '1'\n" in lib
    assert f"local POP_BYTES, SCAN_LIMIT, MAX_BATCH_ITEMS = {hd.POP_BYTES}, {hd.SCAN_LIMIT}, {hd.MAX_BATCH_ITEMS}\n" in lib
    assert tokens.RETAIN_S == 30


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
    s = make(backend, ttl_seconds=60)
    await s.add_items(msgs(12))
    await s.get_items(3)
    await s.pop_item()
    await CompactionSession(s, _summarize).compact(force=True)
    await s.snapshot()
    await s.clear_session()
    await s.add_items(msgs(1))
    assert await prefix_keys(backend) == [key_of(backend)]
