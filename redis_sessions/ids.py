"""Identifier rules and the ids this package mints.

Every id (response ids, item session ids, key prefixes) is checked here: 1 to
256 characters, no whitespace, no control characters and no braces, because
braces would change a Redis Cluster hash tag and whitespace or control
characters are never part of a legitimate id.

Ids minted by :func:`new_response_id` carry their conversation's *thread tag*,
``resp_<thread:16 hex>_<random:32 hex>``; every response of a conversation
shares it, so its whole chain lives in one hash slot and the store finds it
without a lookup. Ids minted elsewhere are found through a small locator key
(see :mod:`redis_sessions.keys`). The random part is random: nothing rides in it.
"""

from __future__ import annotations

import re
import secrets
import unicodedata

from .errors import ErrorCode, SessionError

MAX_ID_LENGTH = 256
_MINTED = re.compile(r"resp_([0-9a-f]{16})_[0-9a-f]{32}")
_ASCII_BAD = re.compile(r"[\x00-\x20{}\x7f]")


def validate_id(value: object, what: str = "response id") -> str:
    """Return ``value`` if it is an acceptable id, else raise ``session.id.invalid``."""
    if not isinstance(value, str):
        raise SessionError(ErrorCode.ID_INVALID, f"{what} must be a string, got {type(value).__name__}")
    if not value:
        raise SessionError(ErrorCode.ID_INVALID, f"{what} must not be empty")
    if len(value) > MAX_ID_LENGTH:
        raise SessionError(ErrorCode.ID_INVALID, f"{what} is {len(value)} characters, the limit is {MAX_ID_LENGTH}")
    if value.isascii():  # the common case, checked at C speed
        bad = _ASCII_BAD.search(value)
        if bad is None:
            return value
        _refuse(value, what, bad.group())
    for ch in value:
        if ch in "{}" or ch.isspace() or unicodedata.category(ch)[0] == "C":
            _refuse(value, what, ch)
    return value


def _refuse(value: str, what: str, ch: str) -> None:
    raise SessionError(ErrorCode.ID_INVALID, f"{what} {value!r} contains the character {ch!r}")


def new_thread_tag() -> str:
    return secrets.token_hex(8)


def thread_of(response_id: str) -> str | None:
    """The thread tag carried by an id this package minted, or None for a foreign id."""
    match = _MINTED.fullmatch(response_id)
    return match.group(1) if match else None


def mint_response_id(thread: str) -> str:
    return f"resp_{thread}_{secrets.token_hex(16)}"


def mint_id(prefix: str) -> str:
    """``<prefix>_<48 hex>``: a conversation's (``conv``) or an item's id (``msg``, ``fc``...),
    192 random bits, shaped as the OpenAI API's own ids."""
    return f"{prefix}_{secrets.token_hex(24)}"


def new_response_id(previous_response_id: str | None = None) -> str:
    """Mint an id for a response that continues ``previous_response_id`` (or starts a thread).

    Works without a store when the parent is None or was minted here. For a parent
    minted elsewhere use ``await store.new_response_id(parent)``, which looks up
    the parent's thread.
    """
    if previous_response_id is None:
        return mint_response_id(new_thread_tag())
    thread = thread_of(validate_id(previous_response_id, "previous_response_id"))
    if thread is None:
        raise SessionError(
            ErrorCode.ID_INVALID,
            f"{previous_response_id!r} was not minted by redis_sessions; "
            "use `await store.new_response_id(previous_response_id)`",
        )
    return mint_response_id(thread)
