"""JSON as the server reads and writes it: strictly, as the JSON standard has it.

A request body is decoded by msgspec, which refuses what Python's ``json`` takes
but JSON does not have: ``NaN`` and ``Infinity``, numbers that overflow to an
infinity (``1e400``), lone surrogates. Such a value would be stored, and then
every answer that carries it would fail. A body that nests lists and objects
deeper than :data:`~redis_sessions.validate.MAX_NESTING` is refused too, as the
stores refuse an item or a record that does. Either is a 400
``session.input.invalid``, before anything is read or written.

Everything the server writes as JSON is encoded by :func:`dumps` (server-sent
events) or Starlette's ``JSONResponse`` (every other body), both with
``allow_nan=False``: a number JSON cannot carry is an error, never a bare ``NaN``.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from .. import validate
from ..errors import SessionError
from .errors import ApiError

_decoder = msgspec.json.Decoder()


def request_json(raw: bytes) -> dict[str, Any]:
    """The request body as a JSON object (an empty body is ``{}``)."""
    try:
        body = _decoder.decode(raw or b"{}")
    except msgspec.DecodeError as exc:  # ValidationError too: a number out of range
        raise ApiError.invalid(f"the request body is not valid JSON: {exc}", None) from None
    except RecursionError:  # nested far past the limit: msgspec recursed as deep as Python lets it
        raise _too_deep() from None
    if not isinstance(body, dict):
        raise ApiError.invalid("the request body must be a JSON object", None)
    if raw.count(b"[") + raw.count(b"{") > validate.MAX_NESTING:  # with fewer, it cannot nest that deep
        try:
            validate.nesting(body, "the request body")
        except SessionError:
            raise _too_deep() from None
    return body


def _too_deep() -> ApiError:
    return ApiError.invalid(f"the request body nests lists and objects more than {validate.MAX_NESTING} deep", None)


def dumps(value: Any) -> bytes:
    """``value`` as JSON, as ``JSONResponse`` renders it: ValueError for a NaN, an infinity
    or a lone surrogate, TypeError for a value JSON has no type for."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
