"""msgspec encoding of everything stored: one cached, typed decoder per type.

A value that does not decode, or decodes to the wrong shape, raises
``session.record.corrupt`` naming the key it was found at.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar, Union

import msgspec

from . import validate
from .errors import ErrorCode, SessionError
from .models import Item, StoredResponseSession

T = TypeVar("T")

_encoder = msgspec.msgpack.Encoder()
_session_decoder = msgspec.msgpack.Decoder(StoredResponseSession)
_item_decoder = msgspec.msgpack.Decoder(Item)


def encode(value: Any) -> bytes:
    try:
        return _encoder.encode(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise SessionError(ErrorCode.INPUT_INVALID, f"value cannot be encoded: {exc}") from None
    except RecursionError:
        raise SessionError(ErrorCode.INPUT_INVALID, "value nests too deeply to be encoded") from None


def encode_items(items: object, max_item_bytes: int, max_batch_bytes: int, max_items: int) -> list[bytes]:
    """Validate and encode a whole batch of items before anything is written: a list
    of at most ``max_items`` dicts with string keys, each encoding to at most
    ``max_item_bytes``, all together to at most ``max_batch_bytes``."""
    if not isinstance(items, list):
        raise SessionError(ErrorCode.INPUT_INVALID, f"items must be a list, got {type(items).__name__}")
    if len(items) > max_items:
        raise SessionError(ErrorCode.INPUT_INVALID, f"{len(items)} items in one call, at most {max_items}")
    out: list[bytes] = []
    total = 0
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise SessionError(ErrorCode.INPUT_INVALID, f"item {index} must be a dict, got {type(item).__name__}")
        for key in item:
            if not isinstance(key, str):
                raise SessionError(ErrorCode.INPUT_INVALID, f"item {index} has a non-string key {key!r}")
        validate.nesting(item, f"item {index}")
        data = encode(item)
        if len(data) > max_item_bytes:
            raise SessionError(
                ErrorCode.RECORD_TOO_LARGE,
                f"item {index} encodes to {len(data)} bytes, the limit is {max_item_bytes}",
            )
        total += len(data)
        if total > max_batch_bytes:
            raise SessionError(
                ErrorCode.RECORD_TOO_LARGE,
                f"the items encode to more than {max_batch_bytes} bytes together (max_batch_bytes)",
            )
        out.append(data)
    return out


Where = Union[str, Callable[[], str]]
"""Where a value was found, for the error: a string, or a function that makes it (made
only when the value does not decode: the reads that go well, nearly all, skip it)."""


def _place(where: Where) -> str:
    return where if isinstance(where, str) else where()


def _decode(decoder: msgspec.msgpack.Decoder[T], data: object, where: Where) -> T:
    if type(data) is not bytes:  # bytes, what redis-py returns, go straight to the decoder
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogateescape")
        elif not isinstance(data, (bytearray, memoryview)):
            raise SessionError(ErrorCode.RECORD_CORRUPT, f"{_place(where)} holds {type(data).__name__}, not bytes")
    try:
        return decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{_place(where)} does not decode: {exc}") from None
    except RecursionError:
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{_place(where)} nests too deeply to decode") from None


COMPACT = 0xC1
"""The first byte of a compact record (``compact_records=True``). Msgpack never uses
0xc1, so a reader that does not know this form (a version before it) refuses such a
record as corrupt rather than reading it wrong. A byte of flags follows, then the
record in msgpack with the ids that repeat what the reader knows left empty:"""
ID_LEFT_OUT = 1
"""``id``, which is the name of the record's field (``d:<id>``)."""
RESPONSE_ID_LEFT_OUT = 2
"""``response.id``, when it equals ``id`` (as a gateway's responses do)."""
_FLAGS = ID_LEFT_OUT | RESPONSE_ID_LEFT_OUT


def decode_session(data: object, where: Where, response_id: str | None = None) -> StoredResponseSession:
    """A stored record. ``response_id``: the id it is stored under, which a compact
    record leaves out (without it a compact record is refused as corrupt)."""
    if type(data) is bytes and data[:1] == b"\xc1":
        return _expand(data, where, response_id)
    return _decode(_session_decoder, data, where)


def _expand(data: bytes, where: Where, response_id: str | None) -> StoredResponseSession:
    flags = data[1] if len(data) > 1 else 0
    if not flags & ID_LEFT_OUT or flags & ~_FLAGS:
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{_place(where)} is a compact record of a form this "
                           f"version does not know (flags {flags:#x})")
    if response_id is None:
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{_place(where)} is a compact record read without its id")
    session = _decode(_session_decoder, memoryview(data)[2:], where)
    response = session.response
    if session.id or (flags & RESPONSE_ID_LEFT_OUT and response.id):
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{_place(where)} is a compact record that holds an id it "
                           "says it leaves out")
    if flags & RESPONSE_ID_LEFT_OUT:
        response = msgspec.structs.replace(response, id=response_id)
    return msgspec.structs.replace(session, id=response_id, response=response)


def decode_item(data: object, where: Where) -> Item:
    return _decode(_item_decoder, data, where)


def to_builtins(value: Any) -> Any:
    """Plain dicts/lists for JSON output (CLI) and for fresh copies of items."""
    return msgspec.to_builtins(value)
