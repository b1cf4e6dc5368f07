"""Every stored value, in the first data format: one cached, typed decoder per type.

A stored value (a response record, an item of a session or of a conversation) is::

    0xc1 | (FORMAT << 4 | flags) | msgpack, or one zstd frame of it

Msgpack never uses the byte 0xc1, so no value of another format can be mistaken for
one of these. The second byte's high four bits are the data format's version
(:data:`FORMAT`): a value of another version, or one without the marker (written before
the first format, or not by this package), is ``session.record.unsupported``, never
read as something else; a value of this version that does not decode is
``session.record.corrupt``, naming the key it was found at. How a later format may
differ is in ``docs/key-layout.md``.
"""

from __future__ import annotations

import threading
import typing
from typing import Any, Callable, TypeVar, Union

import msgspec
import zstandard

from . import telemetry, validate
from .errors import ErrorCode, SessionError
from .models import Item, StoredResponseRequestSnapshot, StoredResponseSession, StoredResponseSnapshot

T = TypeVar("T")

MARK = 0xC1
"""The first byte of every stored value."""
FORMAT = 1
"""The data format this version writes and reads: the high four bits of the second byte."""
ID_LEFT_OUT = 1
"""A record leaves out its ``id``: the name of the field it is stored under says it."""
RESPONSE_ID_LEFT_OUT = 2
"""A record leaves out ``response.id``, which equals ``id`` (as a gateway's responses do)."""
ZSTD = 4
"""The rest is one zstd frame that says its size and carries the checksum of what it
holds (zstd's content checksum): a flipped bit, a frame made with another dictionary or
bytes after the frame are ``session.record.corrupt``, never another value."""
DICTIONARY = 8
"""With ``ZSTD``: the frame was made with :data:`ZSTD_DICTIONARY`."""
_RECORD_FLAGS = ID_LEFT_OUT | RESPONSE_ID_LEFT_OUT

COMPRESS_MIN_BYTES = 512
"""Values shorter than this are stored as they are: an item is read far more often than
it is written (every turn reads the history back), and zstd would add a couple of us to
each read of a small item for a few dozen bytes."""
DICTIONARY_BELOW = 8192
"""Values shorter than this are compressed with :data:`ZSTD_DICTIONARY`; past it the
dictionary costs more bytes than it saves (docs/benchmarks.md)."""
ZSTD_LEVEL = 2
"""Level 2 compresses a gateway's record as small as level 3 in less time; decompression
takes the same time at every level."""
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

_encoder = msgspec.msgpack.Encoder()
_session_decoder = msgspec.msgpack.Decoder(StoredResponseSession)
_item_decoder = msgspec.msgpack.Decoder(Item)


class _Contexts(threading.local):
    """zstd contexts per thread, a pair without the dictionary and a pair with it (a context
    is not safe to share between threads, and making one per call costs more than the
    decompression itself: docs/benchmarks.md#unit-costs)."""

    def __init__(self) -> None:
        self.compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_content_size=True, write_checksum=True)
        self.decompressor = zstandard.ZstdDecompressor()
        dictionary = zstandard.ZstdCompressionDict(ZSTD_DICTIONARY, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
        self.small_compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_content_size=True,
                                                         write_checksum=True, dict_data=dictionary)
        self.small_decompressor = zstandard.ZstdDecompressor(dict_data=dictionary)


_contexts = _Contexts()

Where = Union[str, Callable[[], str]]
"""Where a value was found, for the error: a string, or a function that makes it (made
only when the value does not decode: the reads that go well, nearly all, skip it)."""


def _place(where: Where) -> str:
    return where if isinstance(where, str) else where()


# -- writing ------------------------------------------------------------------------

def encode(value: Any) -> bytes:
    """msgpack of ``value``; what cannot be encoded is ``session.input.invalid``."""
    try:
        return _encoder.encode(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise SessionError(ErrorCode.INPUT_INVALID, f"value cannot be encoded: {exc}") from None
    except RecursionError:
        raise SessionError(ErrorCode.INPUT_INVALID, "value nests too deeply to be encoded") from None


def pack(data: bytes, flags: int, compress: bool = True) -> bytes:
    """``data`` (msgpack) as it is stored: the marker, the format and ``flags``, then
    ``data`` itself or, with ``compress``, a zstd frame of it where that is smaller
    (values under ``COMPRESS_MIN_BYTES`` are not tried)."""
    stored: bytes | None = None
    if compress and len(data) >= COMPRESS_MIN_BYTES:
        small = len(data) < DICTIONARY_BELOW
        squeezed = (_contexts.small_compressor if small else _contexts.compressor).compress(data)
        if len(squeezed) < len(data):
            stored = bytes((MARK, FORMAT << 4 | flags | ZSTD | (DICTIONARY if small else 0))) + squeezed
    if stored is None:
        stored = bytes((MARK, FORMAT << 4 | flags)) + data
    if telemetry.active is not None:
        telemetry.active.wrote(len(data), len(stored))
    return stored


def encode_items(items: object, max_item_bytes: int, max_batch_bytes: int, max_items: int) -> list[bytes]:
    """Validate and encode a whole batch of items before anything is written: a list
    of at most ``max_items`` dicts with string keys, each encoding to at most
    ``max_item_bytes``, all together to at most ``max_batch_bytes`` (counted before
    compression, so a limit means the same with it or without). Returns their msgpack:
    :func:`pack` makes each what is stored."""
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
            raise SessionError(ErrorCode.RECORD_TOO_LARGE,
                               f"item {index} encodes to {len(data)} bytes, the limit is {max_item_bytes}")
        total += len(data)
        if total > max_batch_bytes:
            raise SessionError(ErrorCode.RECORD_TOO_LARGE,
                               f"the items encode to more than {max_batch_bytes} bytes together (max_batch_bytes)")
        out.append(data)
    return out


def _nesting_fields(struct: type[msgspec.Struct]) -> tuple[str, ...]:
    """The fields of a stored type that may hold lists or dicts (so may nest)."""
    def may_nest(kind: msgspec.inspect.Type) -> bool:
        if isinstance(kind, msgspec.inspect.UnionType):
            return any(may_nest(t) for t in kind.types)
        return isinstance(kind, (msgspec.inspect.ListType, msgspec.inspect.DictType, msgspec.inspect.AnyType,
                                 msgspec.inspect.TupleType, msgspec.inspect.VarTupleType))
    info = msgspec.inspect.type_info(struct)
    assert isinstance(info, msgspec.inspect.StructType)
    return tuple(f.name for f in info.fields if may_nest(f.type))


_NESTED = tuple((path, name) for path, struct in (("", StoredResponseSession), ("request.", StoredResponseRequestSnapshot),
                                                  ("response.", StoredResponseSnapshot))
                for name in _nesting_fields(struct))
# Every list, dict or struct msgpack writes starts with one of these bytes; other
# bytes (in strings, say) may be among them too, so counting them bounds the depth.
_CONTAINER_HEADERS = bytes(range(0x80, 0xA0)) + bytes(range(0xDC, 0xE0))
_SCAN_BELOW = 4096
"""Records shorter than this are scanned for container headers, which is cheaper than the
field-by-field walk below this size (the walk costs the same whatever the record's size)."""


def _check_nesting(session: StoredResponseSession) -> None:
    """Refuse a record whose lists and dicts nest deeper than validate.MAX_NESTING, field
    by field, naming the field, before msgspec recurses into it or writes something a
    reader with less stack could not read back."""
    parts = {"": session, "request.": session.request, "response.": session.response}
    for path, name in _NESTED:
        value = getattr(parts[path], name, None)
        if isinstance(value, (dict, list, tuple)):
            validate.nesting(value, path + name)


def _shallow(kind: Any) -> Any:
    """``kind`` with every ``Any`` a ``msgspec.Raw``: decoding to it checks every typed
    field (ids, numbers, items as dicts with string keys) and skips the free-form values
    inside items, without building them (a fraction of a full decode's time). Made from the stored types, so it cannot drift from them."""
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


def encode_record(session: StoredResponseSession, compress: bool, max_bytes: int) -> bytes:
    """A record as it is stored: without the ids its field's name says, behind the marker,
    compressed with ``compress``. Refused before anything is written: a record that nests
    too deeply (``session.input.invalid`` naming the field), that encodes to more than
    ``max_bytes`` before compression (``session.record.too_large``), or whose fields do not
    have their types (msgspec does not check on construction: it would not read back)."""
    response = session.response
    flags = ID_LEFT_OUT
    if response.id == session.id:
        flags |= RESPONSE_ID_LEFT_OUT
        response = msgspec.structs.replace(response, id="")
    try:
        blob = encode(msgspec.structs.replace(session, id="", response=response))
    except SessionError:
        _check_nesting(session)  # name the field, if that is why it would not encode
        raise
    if len(blob) >= _SCAN_BELOW or len(blob) - len(blob.translate(None, _CONTAINER_HEADERS)) > validate.MAX_NESTING:
        _check_nesting(session)
    if len(blob) > max_bytes:
        raise SessionError(ErrorCode.RECORD_TOO_LARGE,
                           f"response {session.id!r} encodes to {len(blob)} bytes; the limit is {max_bytes}")
    try:
        _record_checker.decode(blob)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise SessionError(ErrorCode.INPUT_INVALID, f"response {session.id!r} is not a valid record: {exc}") from None
    return pack(blob, flags, compress)


# -- reading ------------------------------------------------------------------------

def _unpack(data: object, where: Where, limit: int) -> tuple[int, Union[bytes, memoryview]]:
    """A stored value's flags and its msgpack (decompressed if need be, to at most
    ``limit`` bytes)."""
    if type(data) is not bytes:  # bytes, what redis-py returns, go straight on
        if not isinstance(data, (bytearray, memoryview, str)):
            raise SessionError(ErrorCode.RECORD_CORRUPT, f"{_place(where)} holds {type(data).__name__}, not bytes")
        data = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else bytes(data)
    if len(data) < 2 or data[0] != MARK or data[1] >> 4 != FORMAT:
        version = f"data format {data[1] >> 4}" if len(data) > 1 and data[0] == MARK else "no data format"
        raise SessionError(ErrorCode.RECORD_UNSUPPORTED, f"{_place(where)} was written in {version}; this version "
                           f"reads data format {FORMAT} only")
    flags = data[1] & 0x0F
    if not flags & ZSTD:
        if flags & DICTIONARY:
            raise SessionError(ErrorCode.RECORD_CORRUPT, f"{_place(where)} says it uses the dictionary but is not "
                               "compressed")
        if telemetry.active is not None:
            telemetry.active.read(len(data), len(data) - 2)
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
        body = decompressor.decompress(frame, max_output_size=limit, allow_extra_data=False)
        if telemetry.active is not None:
            telemetry.active.read(len(data), len(body))
        return flags, body
    except zstandard.ZstdError as exc:
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{_place(where)} does not decompress: {exc}") from None


def _decode(decoder: msgspec.msgpack.Decoder[T], body: Union[bytes, memoryview], where: Where) -> T:
    try:
        return decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{_place(where)} does not decode: {exc}") from None
    except RecursionError:
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{_place(where)} nests too deeply to decode") from None


def decode_session(data: object, where: Where, response_id: str, limit: int = MAX_EXPANDED_BYTES) -> StoredResponseSession:
    """A stored record, read under ``response_id`` (the id its field's name says, which the
    record leaves out); ``limit``: the most it may expand to (``max_record_bytes``)."""
    flags, body = _unpack(data, where, limit)
    session = _decode(_session_decoder, body, where)
    if flags & _RECORD_FLAGS != _RECORD_FLAGS and flags & _RECORD_FLAGS != ID_LEFT_OUT:
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{_place(where)} is not stored as a record is")
    response = session.response
    if session.id or (flags & RESPONSE_ID_LEFT_OUT and response.id):
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{_place(where)} holds an id it says it leaves out")
    if flags & RESPONSE_ID_LEFT_OUT:
        response = msgspec.structs.replace(response, id=response_id)
    return msgspec.structs.replace(session, id=response_id, response=response)


def decode_item(data: object, where: Where, limit: int = MAX_EXPANDED_BYTES) -> Item:
    """A stored item; ``limit``: the most it may expand to (the store's ``max_item_bytes``)."""
    flags, body = _unpack(data, where, limit)
    if flags & _RECORD_FLAGS:
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{_place(where)} is not stored as an item is")
    return _decode(_item_decoder, body, where)


def is_value(data: bytes) -> bool:
    """Whether ``data`` starts as a value of this data format does (what a script checks
    to tell an item from anything else in a list)."""
    return len(data) > 1 and data[0] == MARK and data[1] >> 4 == FORMAT


def plain_size(data: bytes) -> int:
    """How many bytes a stored value counts for against a limit: its msgpack before
    compression (a compressed frame says it in its header), the marker aside."""
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
