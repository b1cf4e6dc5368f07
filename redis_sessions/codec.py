"""msgspec encoding of everything stored: one cached, typed decoder per type.

A value that does not decode, or decodes to the wrong shape, raises
``session.record.corrupt`` naming the key it was found at.
"""

from __future__ import annotations

import threading
import typing
from typing import Any, Callable, TypeVar, Union

import msgspec
import zstandard

from . import validate
from .errors import ErrorCode, SessionError
from .models import Item, StoredResponseSession

T = TypeVar("T")

_encoder = msgspec.msgpack.Encoder()
_session_decoder = msgspec.msgpack.Decoder(StoredResponseSession)
_item_decoder = msgspec.msgpack.Decoder(Item)


def _shallow(kind: Any) -> Any:
    """``kind`` with every ``Any`` a ``msgspec.Raw``: decoding to it checks every typed
    field (ids, numbers, items as dicts with string keys) and skips the free-form values
    inside items, without building them (about 0.9 us for a 20 KB record, against 2 to 10
    for a full decode). Made from the stored types, so it cannot drift from them."""
    if kind is Any:
        return msgspec.Raw
    if isinstance(kind, type) and issubclass(kind, msgspec.Struct):
        hints = typing.get_type_hints(kind)
        info = msgspec.inspect.type_info(kind)
        assert isinstance(info, msgspec.inspect.StructType)
        return msgspec.defstruct(f"{kind.__name__}Check", [
            (f.name, _shallow(hints[f.name])) if f.required else (f.name, _shallow(hints[f.name]), None)
            for f in info.fields], kw_only=True)
    args = typing.get_args(kind)
    if not args:
        return kind
    origin = typing.get_origin(kind)
    return Union[tuple(_shallow(a) for a in args)] if origin is Union else origin[tuple(_shallow(a) for a in args)]


_record_checker = msgspec.msgpack.Decoder(_shallow(StoredResponseSession))


def check_record(data: bytes, what: str) -> None:
    """Refuse (``session.input.invalid``) record bytes that would not decode as a record."""
    try:
        _record_checker.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise SessionError(ErrorCode.INPUT_INVALID, f"{what} is not a valid record: {exc}") from None


def encode(value: Any) -> bytes:
    try:
        return _encoder.encode(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise SessionError(ErrorCode.INPUT_INVALID, f"value cannot be encoded: {exc}") from None
    except RecursionError:
        raise SessionError(ErrorCode.INPUT_INVALID, "value nests too deeply to be encoded") from None


def encode_items(items: object, max_item_bytes: int, max_batch_bytes: int, max_items: int,
                 compress: bool = False) -> list[bytes]:
    """Validate and encode a whole batch of items before anything is written: a list
    of at most ``max_items`` dicts with string keys, each encoding to at most
    ``max_item_bytes``, all together to at most ``max_batch_bytes`` (both counted before
    compression, so a limit means the same with it or without). ``compress``: each item
    of ``COMPRESS_MIN_BYTES`` or more is stored compressed where that makes it smaller."""
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
        out.append(pack(data, 0) if compress else data)
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


PACKED = 0xC1
"""The first byte of a packed value: a record that leaves out ids (``compact_records``)
or a record or item stored compressed. Msgpack never uses 0xc1, so a reader that does
not know this form (a version before it) refuses such a record as corrupt rather than
reading it wrong. A byte of flags follows, then the value (msgpack, or a zstd frame of
it), with the ids that repeat what the reader knows left empty:"""
ID_LEFT_OUT = 1
"""``id``, which is the name of the record's field (``d:<id>``)."""
RESPONSE_ID_LEFT_OUT = 2
"""``response.id``, when it equals ``id`` (as a gateway's responses do)."""
ZSTD = 4
"""The rest is one zstd frame that says its size and carries the checksum of what it
holds (zstd's content checksum): a flipped bit, a frame made with another dictionary or
bytes after the frame are ``session.record.corrupt``, never another value."""
DICTIONARY = 8
"""With ``ZSTD``: the frame was made with :data:`ZSTD_DICTIONARY`."""
_FLAGS = ID_LEFT_OUT | RESPONSE_ID_LEFT_OUT | ZSTD | DICTIONARY

COMPRESS_MIN_BYTES = 512
"""Values shorter than this are stored as they are: an item is read far more often than
it is written (every turn reads the history back), and at 0.3 KB zstd would add about
2 us to each read of each item for about 80 bytes."""
DICTIONARY_BELOW = 8192
"""Values shorter than this are compressed with :data:`ZSTD_DICTIONARY`. Measured on
bench_peers' records (English prose, zstd level 2): 751 B of msgpack packs to 405 B with
it and 511 B without; 4 KB to 1,920 B against 2,007; 8 KB to 3,629 against 3,675; at
20 KB it costs 170 B (8,545 against 8,377), so larger values go without."""
ZSTD_LEVEL = 2
"""Level 2 compresses a 20 KB record as small as level 3 (2.39x against 2.39x on
bench_peers' prose) in 68 us against 89; level 1 takes 54 us for 2.28x. Decompression
takes the same time at every level (about 20 us at 20 KB, 2.5 us at 0.7 KB)."""
_USAGE = {"input_tokens": 0, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 0,
          "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 0}
_SHAPES = [
    {"type": "function", "name": "", "description": "", "parameters": {
        "type": "object", "properties": {}, "required": [], "additionalProperties": False}, "strict": True},
    {"tool_choice": "auto", "parallel_tool_calls": True, "reasoning": {"effort": "medium", "summary": "auto"},
     "text": {"format": {"type": "text"}, "verbosity": "medium"}, "truncation": "disabled"},
    {"type": "reasoning", "id": "rs_", "summary": [{"type": "summary_text", "text": ""}], "encrypted_content": ""},
    {"type": "function_call", "id": "fc_", "call_id": "call_", "name": "", "arguments": "", "status": "completed"},
    {"type": "function_call_output", "call_id": "call_", "output": ""},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ""}]},
    {"id": "", "previous_response_id": "resp_", "created_at": 0, "status": "completed",
     "request": {"input": "", "instructions": "", "model": ""},
     "response": {"id": "", "output": [{"type": "message", "role": "assistant", "id": "msg_", "status": "completed",
                                        "content": [{"type": "output_text", "annotations": [], "logprobs": [],
                                                     "text": ""}]}],
                  "output_text": "", "usage": _USAGE}},
]
ZSTD_DICTIONARY = msgspec.msgpack.encode(_SHAPES)
"""A raw-content zstd dictionary (876 bytes): the msgpack shapes of the Responses API's
requests, output items and usage, with every value left empty, so that a small record
or item does not spend its own bytes on the names every record repeats. Frozen: a value
written with it reads only with the same bytes (tests/test_compression.py pins their
hash); another dictionary would take another flag."""
MAX_EXPANDED_BYTES = 64 << 20
"""The most a compressed value may expand to where its reader has no limit of its own
(the command line): the largest record or item any store may be configured to accept.
A store reads with its own ``max_record_bytes`` or ``max_item_bytes``: a body that says
it expands past that (a decompression bomb, or a value no writer with this limit could
have written) is refused as corrupt before anything is allocated for it."""


class _Contexts(threading.local):
    """zstd contexts per thread, a pair without the dictionary and a pair with it (a context
    is not safe to share between threads; making one per call costs about 20 us, reusing it
    nothing)."""

    def __init__(self) -> None:
        self.compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_content_size=True, write_checksum=True)
        self.decompressor = zstandard.ZstdDecompressor()
        dictionary = zstandard.ZstdCompressionDict(ZSTD_DICTIONARY, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
        self.small_compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_content_size=True,
                                                         write_checksum=True, dict_data=dictionary)
        self.small_decompressor = zstandard.ZstdDecompressor(dict_data=dictionary)


_contexts = _Contexts()


def pack(data: bytes, flags: int, compress: bool = True) -> bytes:
    """``data`` behind the packed marker with ``flags``, compressed (with ``compress``)
    when that is smaller (values under ``COMPRESS_MIN_BYTES`` are not tried); ``data``
    itself when there is nothing to mark."""
    if compress and len(data) >= COMPRESS_MIN_BYTES:
        small = len(data) < DICTIONARY_BELOW
        squeezed = (_contexts.small_compressor if small else _contexts.compressor).compress(data)
        if len(squeezed) + 2 < len(data):
            return bytes((PACKED, flags | ZSTD | (DICTIONARY if small else 0))) + squeezed
    return bytes((PACKED, flags)) + data if flags else data


def _unpack(data: bytes, where: Where, limit: int) -> tuple[int, Union[bytes, memoryview]]:
    """A packed value's flags and its msgpack bytes (decompressed if need be, to at most
    ``limit`` bytes)."""
    flags = data[1] if len(data) > 1 else 0
    if flags & ~_FLAGS or flags == 0 or flags & (ZSTD | DICTIONARY) == DICTIONARY:
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{_place(where)} is a packed value of a form this "
                           f"version does not know (flags {flags:#x})")
    if not flags & ZSTD:
        return flags, memoryview(data)[2:]
    frame = memoryview(data)[2:]
    try:
        header = zstandard.get_frame_parameters(frame)
        if not header.has_checksum:
            raise SessionError(ErrorCode.RECORD_CORRUPT, f"{_place(where)} is compressed without a checksum")
        size = header.content_size
        if not 0 <= size <= limit:
            raise SessionError(ErrorCode.RECORD_CORRUPT, f"{_place(where)} is compressed and says it expands "
                               f"to {size} bytes; this store reads at most {limit}")
        decompressor = _contexts.small_decompressor if flags & DICTIONARY else _contexts.decompressor
        return flags, decompressor.decompress(frame, max_output_size=limit, allow_extra_data=False)
    except zstandard.ZstdError as exc:
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{_place(where)} does not decompress: {exc}") from None


def decode_session(data: object, where: Where, response_id: str | None = None,
                   limit: int = MAX_EXPANDED_BYTES) -> StoredResponseSession:
    """A stored record. ``response_id``: the id it is stored under, which a compact
    record leaves out (without it a compact record is refused as corrupt); ``limit``: the
    most it may expand to (the store's ``max_record_bytes``)."""
    if type(data) is bytes and data[:1] == b"\xc1":
        return _expand(data, where, response_id, limit)
    return _decode(_session_decoder, data, where)


def _expand(data: bytes, where: Where, response_id: str | None, limit: int) -> StoredResponseSession:
    flags, body = _unpack(data, where, limit)
    session = _decode(_session_decoder, body, where)
    if not flags & ID_LEFT_OUT:
        if flags & RESPONSE_ID_LEFT_OUT:
            raise SessionError(ErrorCode.RECORD_CORRUPT, f"{_place(where)} leaves out response.id but not id")
        return session
    if response_id is None:
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{_place(where)} is a compact record read without its id")
    response = session.response
    if session.id or (flags & RESPONSE_ID_LEFT_OUT and response.id):
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{_place(where)} is a compact record that holds an id it "
                           "says it leaves out")
    if flags & RESPONSE_ID_LEFT_OUT:
        response = msgspec.structs.replace(response, id=response_id)
    return msgspec.structs.replace(session, id=response_id, response=response)


def decode_item(data: object, where: Where, limit: int = MAX_EXPANDED_BYTES) -> Item:
    """A stored item; ``limit``: the most it may expand to (the store's ``max_item_bytes``)."""
    if type(data) is bytes and data[:1] == b"\xc1":
        flags, body = _unpack(data, where, limit)
        if flags & ~(ZSTD | DICTIONARY):
            raise SessionError(ErrorCode.RECORD_CORRUPT, f"{_place(where)} is a packed item of a form this "
                               f"version does not know (flags {flags:#x})")
        return _decode(_item_decoder, body, where)
    return _decode(_item_decoder, data, where)


def plain_size(data: bytes) -> int:
    """How many bytes a stored value counts for against a limit: its msgpack before
    compression (a compressed frame says it in its header), the marker aside."""
    if data[:1] != b"\xc1":
        return len(data)
    if len(data) > 1 and data[1] & ZSTD:
        try:
            size = zstandard.frame_content_size(memoryview(data)[2:])
        except zstandard.ZstdError:
            return len(data)
        return size if size >= 0 else len(data)
    return len(data) - 2


def to_builtins(value: Any) -> Any:
    """Plain dicts/lists for JSON output (CLI) and for fresh copies of items."""
    return msgspec.to_builtins(value)
