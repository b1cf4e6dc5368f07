"""msgspec encoding of everything stored: one cached, typed decoder per type.

A value that does not decode, or decodes to the wrong shape, raises
``session.record.corrupt`` naming the key it was found at.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

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


def _decode(decoder: msgspec.msgpack.Decoder[T], data: object, where: str) -> T:
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{where} holds {type(data).__name__}, not bytes")
    try:
        return decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{where} does not decode: {exc}") from None
    except RecursionError:
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{where} nests too deeply to decode") from None


def decode_session(data: object, where: str) -> StoredResponseSession:
    return _decode(_session_decoder, data, where)


def decode_item(data: object, where: str) -> Item:
    return _decode(_item_decoder, data, where)


def to_builtins(value: Any) -> Any:
    """Plain dicts/lists for JSON output (CLI) and for fresh copies of items."""
    return msgspec.to_builtins(value)
