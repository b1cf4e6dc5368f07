"""msgspec encoding of everything stored: one cached, typed decoder per type.

A value that does not decode, or decodes to the wrong shape, raises
``session.record.corrupt`` naming the key it was found at.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar, Union

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


Where = Union[str, Callable[[], str]]
"""Where a value was found, for the error: a string, or a function that makes it (made
only when the value does not decode: the reads that go well, nearly all, skip it)."""


def _place(where: Where) -> str:
    return where if isinstance(where, str) else where()


def _decode(decoder: msgspec.msgpack.Decoder[T], data: object, where: Where) -> T:
    if type(data) is bytes:  # what redis-py returns: straight to the decoder
        try:
            return decoder.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise SessionError(ErrorCode.RECORD_CORRUPT, f"{_place(where)} does not decode: {exc}") from None
        except RecursionError:
            raise SessionError(ErrorCode.RECORD_CORRUPT, f"{_place(where)} nests too deeply to decode") from None
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{_place(where)} holds {type(data).__name__}, not bytes")
    try:
        return decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{_place(where)} does not decode: {exc}") from None
    except RecursionError:
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{_place(where)} nests too deeply to decode") from None


def decode_session(data: object, where: Where) -> StoredResponseSession:
    return _decode(_session_decoder, data, where)


def decode_item(data: object, where: Where) -> Item:
    return _decode(_item_decoder, data, where)


def to_builtins(value: Any) -> Any:
    """Plain dicts/lists for JSON output (CLI) and for fresh copies of items."""
    return msgspec.to_builtins(value)
