"""Records and items of COMPRESS_MIN_BYTES or more are stored zstd-compressed (on by
default), behind the marker 0xc1 and the data format's byte, which Lua never needs to
open; the bytes of data format 1 are pinned, a value of another format is
``session.record.unsupported``, and a damaged, foreign or lying body is
``session.record.corrupt``."""

from __future__ import annotations

import hashlib
import random
from typing import Any

import pytest
import zstandard

from chains import make_store, plant, record
from test_items import bury
from conftest import Backend
from redis_sessions import ErrorCode, RedisConversationStore, RedisSession, SessionError
from redis_sessions.codec import (COMPRESS_MIN_BYTES, DICTIONARY, FORMAT, ID_LEFT_OUT, MARK, MAX_EXPANDED_BYTES,
                                  RESPONSE_ID_LEFT_OUT, ZSTD, ZSTD_DICTIONARY, ZSTD_LEVEL, decode_item, decode_session,
                                  encode, encode_record, is_value, pack)

F = FORMAT << 4
"""The data format's half of a value's second byte."""
BIG = 1 << 24

WORDS = ("the a of to and in that is was for it with as his on be at by had not are but from or have an they "
         "which one you were all her she there would their we him been has when who will more no if out so said "
         "what up its about into than them can only other new some could time these two may then do first any "
         "my now such like our over man me even most made after also did many before must through back years "
         "where much your way well down should because each just those people how too little state good very "
         "make world still own see men work long get here between both life being under never day same another "
         "know while last might us great old year off come since against go came right used take three").split()


def prose(size: int, seed: int = 0) -> str:
    """English-like text of about ``size`` characters (a word list, not one letter repeated)."""
    rng, out, n = random.Random(seed), [], 0
    while n < size:
        word = rng.choice(WORDS)
        out.append(word)
        n += len(word) + 1
    return " ".join(out)


def item(i: int, size: int) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": prose(size, i)}]}


@pytest.mark.parametrize("size", [200, 700, 20_000])
async def test_chains_round_trip_compressed_and_smaller(backend: Backend, size: int) -> None:
    store = make_store(backend, compression=True)
    ids, parent = [], None
    for i in range(5):
        rid = f"ext-{size}-{i}"
        await store.save(record(rid, parent, f"turn {i}", payload=prose(size, i)))
        ids.append(rid)
        parent = rid
    snap = await store.resolve_chain(ids[-1])
    assert [s.id for s in snap.sessions] == ids
    assert snap.sessions[2] == record(ids[2], ids[1], "turn 2", payload=prose(size, 2))
    assert await store.get(ids[0]) == record(ids[0], None, "turn 0", payload=prose(size, 0))
    thread = await store._thread(ids[3])
    assert thread is not None
    stored = await backend.client.hget(store.keys.thread(thread), store.keys.data_field(ids[3]))
    plain = encode_record(record(ids[3], ids[2], "turn 3", payload=prose(size, 3)), False, BIG)
    if size >= COMPRESS_MIN_BYTES:
        assert stored[0] == MARK and stored[1] >> 4 == FORMAT and stored[1] & ZSTD and len(stored) < 0.8 * len(plain)
    else:
        assert stored == plain  # small records are stored as they are


async def test_items_and_conversations_round_trip_compressed(backend: Backend) -> None:
    session = RedisSession("z", client=backend.client, key_prefix=backend.prefix)
    items = [item(i, 50 if i % 2 else 3000) for i in range(6)]
    await session.add_items(items)
    assert await session.get_items() == items
    assert await session.get_items(2) == items[-2:]
    stored = await backend.client.lrange(session._items_key, 0, -1)
    packed = [e for e in stored if is_value(e) and e[1] & ZSTD]
    assert len(packed) == 3 and all(len(e) < 1500 for e in packed)
    assert await session.pop_item() == items[-1]
    assert await session.pop_item() == items[-2]  # a packed item: pops never drop it as a non-item
    fork = await session.fork("z2")
    assert await fork.get_items() == items[:4]

    conversations = RedisConversationStore(backend.client, key_prefix=backend.prefix)
    conv = await conversations.create(items=[item(9, 5000)])
    listed = await conversations.list_items(conv.id)
    assert [i["content"] for i in listed.data] == [item(9, 5000)["content"]]


async def test_a_record_of_data_format_1_is_its_bytes_pinned(backend: Backend) -> None:
    """A record as format 1 stores it, uncompressed: the marker, the format and its flags
    (both ids left out), then msgpack of the record without them, pinned by its hash (a
    change here is a new data format: docs/key-layout.md). A value of another format, or
    of none (a bare msgpack record, as the commits before format 1 wrote), is refused by
    every read, never misread."""
    rid = "resp_00000000000000ab_" + "0" * 32
    old = record(rid, None, "the question", payload=" and a longer answer " * 40)
    blob = encode_record(old, False, BIG)
    assert blob[:2] == bytes([MARK, F | ID_LEFT_OUT | RESPONSE_ID_LEFT_OUT])
    assert hashlib.sha256(blob).hexdigest() == PINNED_RECORD
    store = make_store(backend, compression=True)
    await plant(backend, store, "00000000000000ab", {rid: ("", blob)})
    assert await store.get(rid) == old
    assert (await store.resolve_chain(rid)).sessions == [old]
    for other in (blob[2:], bytes([MARK, 2 << 4]) + blob[2:]):
        await plant(backend, store, "00000000000000ab", {rid: ("", other)})
        for read in (store.get(rid), store.resolve_chain(rid)):
            with pytest.raises(SessionError) as err:
                await read
            assert err.value.code is ErrorCode.RECORD_UNSUPPORTED


PINNED_RECORD = "7ec14716a56a25addc1ec77cf21405d15394d46541cd604f41cd08ae24f2379d"


async def test_an_item_of_data_format_1_is_its_msgpack_behind_the_marker(backend: Backend) -> None:
    """compression=False stores an item as the marker, the format, and its msgpack
    (pinned by its hash); a compressing session reads it."""
    old_item = {"type": "message", "role": "user", "content": "word " * 200}
    entry = encode(old_item)
    assert hashlib.sha256(entry).hexdigest() == "f9afc543365d45a73e54767081d1817af91982b9bbedc502d4ac32d0e7ca4ece"
    writer = RedisSession("old", client=backend.client, key_prefix=backend.prefix, compression=False)
    await writer.add_items([old_item])
    assert await backend.client.lindex(writer._items_key, -3) == bytes([MARK, FORMAT << 4]) + entry  # the newest
    reader = RedisSession("old", client=backend.client, key_prefix=backend.prefix)
    assert await reader.get_items() == [old_item]
    assert await reader.pop_item() == old_item


def test_a_damaged_or_lying_body_is_corrupt_never_raw() -> None:
    good = pack(encode(item(1, 3000)), 0)
    assert good[0] == MARK and good[1] == F | ZSTD | DICTIONARY
    bomb = bytes([MARK, F | ZSTD]) + zstandard.ZstdCompressor(write_checksum=True).compress(b"\0" * (MAX_EXPANDED_BYTES + 1))
    assert len(bomb) < 4096  # small, and says it expands past the limit
    for bad, why in ((good[:40], "does not decompress"), (good[:2] + b"\0" * 40, "does not decompress"),
                     (bytes([MARK, F | ZSTD]) + good[2:], "does not"),  # read without its dictionary
                     (bomb, "expands to"), (bytes([MARK, F | ID_LEFT_OUT]) + good[2:], "not stored as an item is"),
                     (bytes([MARK, F | DICTIONARY]) + good[2:], "is not compressed")):
        with pytest.raises(SessionError) as err:
            decode_item(bad, "here")
        assert err.value.code is ErrorCode.RECORD_CORRUPT and why in err.value.message
    for other in (bytes([MARK, 2 << 4 | ZSTD]) + good[2:], good[1:], b""):
        with pytest.raises(SessionError) as err:
            decode_item(other, "here")
        assert err.value.code is ErrorCode.RECORD_UNSUPPORTED
    assert decode_item(good, "here") == item(1, 3000)


async def test_a_corrupt_compressed_record_reads_as_corrupt(backend: Backend) -> None:
    store = make_store(backend, compression=True)
    rid = "ext-corrupt"
    await store.save(record(rid, None, payload=prose(3000)))
    thread = await store._thread(rid)
    assert thread is not None
    key, field = store.keys.thread(thread), store.keys.data_field(rid)
    stored = await backend.client.hget(key, field)
    await backend.client.hset(key, field, stored[:-20])
    with pytest.raises(SessionError) as err:
        await store.get(rid)
    assert err.value.code is ErrorCode.RECORD_CORRUPT


async def test_the_size_limits_count_bytes_before_compression(backend: Backend) -> None:
    """A limit means the same with compression or without: a record or item past it is
    refused even though it would compress far below it, and nothing is written."""
    store = make_store(backend, compression=True, max_record_bytes=4096)
    with pytest.raises(SessionError) as err:
        await store.save(record("ext-big", None, payload="x" * 8000))
    assert err.value.code is ErrorCode.RECORD_TOO_LARGE
    assert await store.get("ext-big") is None
    session = RedisSession("lim", client=backend.client, key_prefix=backend.prefix, max_item_bytes=4096)
    with pytest.raises(SessionError) as err:
        await session.add_items([{"blob": "x" * 8000}])
    assert err.value.code is ErrorCode.RECORD_TOO_LARGE
    assert await session.get_items() == []


async def test_an_idempotency_key_fingerprints_the_items_not_their_compressed_bytes(backend: Backend) -> None:
    """A retry with the same key from a worker whose zstd makes other bytes (here: one that
    does not compress at all) is the same call: written once, never key_reused."""
    items = [item(i, 3000) for i in range(2)]
    squeezing = RedisSession("k", client=backend.client, key_prefix=backend.prefix)
    plain = RedisSession("k", client=backend.client, key_prefix=backend.prefix, compression=False)
    await squeezing.add_items(items, idempotency_key="turn-1")
    await plain.add_items(items, idempotency_key="turn-1")
    assert await plain.get_items() == items
    with pytest.raises(SessionError) as err:
        await plain.add_items(items[:1], idempotency_key="turn-1")
    assert err.value.code is ErrorCode.IDEMPOTENCY_KEY_REUSED


def test_the_dictionary_is_frozen_and_earns_its_place() -> None:
    """Values under DICTIONARY_BELOW are compressed with a frozen dictionary (its bytes
    pinned here: a value written with it reads only with the same bytes), and a 0.7 KB
    record of prose is stored smaller with it than without."""
    assert hashlib.sha256(ZSTD_DICTIONARY).hexdigest() == "8163d3883f761b9ca02c05b14c8caea89659cb507c8a6157c6f42c7ed1b81954"
    rid = "resp_00000000000000ac_" + "0" * 32
    old = record(rid, None, "the question", payload=prose(700, 7))
    blob = encode_record(old, False, BIG)
    without = bytes([MARK, blob[1] | ZSTD]) + zstandard.ZstdCompressor(
        level=ZSTD_LEVEL, write_content_size=True, write_checksum=True).compress(blob[2:])
    now = encode_record(old, True, BIG)
    assert now[1] & DICTIONARY and len(now) < len(without) - 40
    assert decode_session(now, "here", rid) == decode_session(without, "here", rid) == old


def _flips(value: bytes) -> list[bytes]:
    """``value`` with each bit of its zstd frame flipped, one at a time (the marker and
    flags bytes aside: those are checked apart)."""
    out = []
    for at in range(2, len(value)):
        for bit in range(8):
            copy = bytearray(value)
            copy[at] ^= 1 << bit
            out.append(bytes(copy))
    return out


@pytest.mark.parametrize("size", [700, 20_000])
def test_a_flipped_bit_is_corrupt_never_another_value(size: int) -> None:
    """Row 4 of issue 39: of 132 single-bit flips in a stored frame, 41 decoded silently to
    a different item. Every frame now carries zstd's checksum of what it holds: a flip
    anywhere is refused as corrupt (or, in a byte the decoder ignores, reads the very
    value that was written), never another value."""
    original = item(5, size)
    stored = pack(encode(original), 0)
    assert stored[1] & ZSTD
    other = 0
    for flipped in _flips(stored):
        try:
            got = decode_item(flipped, "here")
        except SessionError as exc:
            assert exc.code is ErrorCode.RECORD_CORRUPT
            continue
        other += got != original
    assert other == 0
    rid = "resp_00000000000000ad_" + "0" * 32
    kept = record(rid, None, "q", payload=prose(size, 3))
    packed = encode_record(kept, True, BIG)
    for flipped in _flips(packed)[::7]:  # a sample: a record's frame is read by the same code
        try:
            assert decode_session(flipped, "here", rid) == kept
        except SessionError as exc:
            assert exc.code is ErrorCode.RECORD_CORRUPT


def test_a_foreign_frame_or_trailing_bytes_are_corrupt() -> None:
    """A frame made with another dictionary decoded to other words, and bytes after a frame
    were accepted: both are corrupt now."""
    plain = encode(item(6, 1500))
    # a dictionary the frame refers to all along (the item itself): read with ours, other words
    other_dictionary = zstandard.ZstdCompressionDict(plain, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
    foreign = bytes([MARK, F | ZSTD | DICTIONARY]) + zstandard.ZstdCompressor(
        level=ZSTD_LEVEL, write_content_size=True, write_checksum=True, dict_data=other_dictionary).compress(plain)
    good = pack(plain, 0)
    for bad in (foreign, good + b"\x00", good + good[2:]):
        with pytest.raises(SessionError) as err:
            decode_item(bad, "here")
        assert err.value.code is ErrorCode.RECORD_CORRUPT
    unchecked = bytes([MARK, F | ZSTD]) + zstandard.ZstdCompressor(write_content_size=True).compress(plain)
    with pytest.raises(SessionError) as err:
        decode_item(unchecked, "here")  # what the commits before checksums wrote: refused, never misread
    assert err.value.code is ErrorCode.RECORD_CORRUPT and "checksum" in err.value.message


def _bomb(size: int) -> bytes:
    return bytes([MARK, FORMAT << 4 | ZSTD]) + zstandard.ZstdCompressor(write_content_size=True, write_checksum=True).compress(
        encode({"blob": "\0" * size}))


async def test_a_body_that_would_inflate_past_the_stores_limit_is_refused_before_it_is(backend: Backend) -> None:
    """Row 5: the decompression cap was a fixed 64 MiB, not the store's limits: a 1,968-byte
    stored item inflated to 60 MiB. A store reads at most its own max_item_bytes or
    max_record_bytes from a frame, and refuses a frame that says more before inflating."""
    bomb = _bomb(60 << 20)
    assert len(bomb) < 8192
    session = RedisSession("bomb", client=backend.client, key_prefix=backend.prefix, max_item_bytes=1 << 20)
    await session.add_items([item(1, 100)])
    await bury(backend.client, session._items_key, [bomb])
    assert await session.get_items() == [item(1, 100)]  # an entry that does not decode is no item
    with pytest.raises(SessionError) as err:
        decode_item(bomb, "here", 1 << 20)
    assert err.value.code is ErrorCode.RECORD_CORRUPT and "expands to" in err.value.message
    just_over = _bomb(4096)
    assert decode_item(just_over, "here")["blob"] == "\0" * 4096  # under the default cap it reads
    with pytest.raises(SessionError):
        decode_item(just_over, "here", 4096)  # its msgpack is a few bytes over 4,096

    store = make_store(backend, compression=True, max_record_bytes=4096)
    rid = "ext-bomb"
    await store.save(record(rid, None, payload=prose(600)))
    thread = await store._thread(rid)
    assert thread is not None
    big = encode_record(record(rid, None, payload=prose(6000)), True, BIG)
    await backend.client.hset(store.keys.thread(thread), store.keys.data_field(rid), big)
    for call in (lambda: store.get(rid), lambda: store.resolve_chain(rid)):
        with pytest.raises(SessionError) as err:
            await call()
        assert err.value.code is ErrorCode.RECORD_CORRUPT and "at most 4096" in err.value.message


@pytest.mark.parametrize("compression", [False, True])
async def test_a_fork_counts_bytes_before_compression(backend: Backend, compression: bool) -> None:
    """Row 6: fork() counted stored (compressed) bytes against max_batch_bytes: the same
    session was refused with compression off and forked with it on. Now both refuse, and
    a fork of a prefix within the limit works on both."""
    session = RedisSession(f"f{compression}", client=backend.client, key_prefix=backend.prefix,
                           compression=compression, max_batch_bytes=64 << 10)
    items = [item(i, 4000) for i in range(24)]  # about 96 KB of msgpack, under half of it compressed
    for at in range(0, len(items), 8):
        await session.add_items(items[at:at + 8])
    with pytest.raises(SessionError) as err:
        await session.fork(f"f{compression}-all")
    assert err.value.code is ErrorCode.RECORD_TOO_LARGE
    fork = await session.fork(f"f{compression}-some", upto=8)
    assert await fork.get_items() == items[:8]
