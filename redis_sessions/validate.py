"""Argument checks made before anything is written, shared by every store and session.

A refused call must write nothing, so every number and every structure is
checked here, in Python, before the first command is sent: a Lua script that
writes and then fails (``PEXPIRE`` with an impossible TTL) cannot roll back.
"""

from __future__ import annotations

import math
import re
from typing import Any

from .errors import ErrorCode, SessionError

MAX_TTL_SECONDS = 100 * 365 * 24 * 3600
"""A century: far inside what Redis accepts for ``PEXPIRE`` (a 64-bit ms deadline)."""
MAX_NESTING = 100
"""How deeply lists and dicts may nest inside one item or record."""
OWNER = re.compile(r"[!-~]{1,128}")
"""An owner: 1 to 128 printable ASCII characters, no space (it ends a key's header)."""


def _refuse(what: str, value: object, must: str) -> SessionError:
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return SessionError(ErrorCode.INPUT_INVALID, f"{what} must be {must}, got {shown}")


def integer(value: object, what: str, *, minimum: int = 0, maximum: int | None = None) -> int:
    """An int (not a bool, not a str) in [minimum, maximum]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise _refuse(what, value, "an int")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"at least {minimum}" if maximum is None else f"from {minimum} to {maximum}"
        raise _refuse(what, value, f"an int {bound}")
    return value


def owner(value: object) -> str:
    """A call's owner as the scripts take it ('' for a call without one). The value is
    never echoed in an error: an owner may be derived from a credential."""
    if value is None:
        return ""
    if not isinstance(value, str) or not OWNER.fullmatch(value):
        raise SessionError(ErrorCode.INPUT_INVALID, "owner must be None or 1 to 128 printable ASCII characters "
                           f"without spaces (got a {type(value).__name__} that is not)")
    return value


def optional_integer(value: object, what: str, *, minimum: int = 0, maximum: int | None = None) -> int | None:
    return None if value is None else integer(value, what, minimum=minimum, maximum=maximum)


def ttl_ms(value: object, what: str = "ttl_seconds") -> int:
    """A TTL in seconds (int or float, positive, finite, at most a century) as
    milliseconds for the scripts; None means no expiry and becomes 0."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _refuse(what, value, "a positive number of seconds or None")
    if not math.isfinite(value) or not value > 0 or value > MAX_TTL_SECONDS:
        raise _refuse(what, value, f"a positive, finite number of seconds, at most {MAX_TTL_SECONDS}, or None")
    return max(1, int(value * 1000))


def seconds(value: object, what: str = "timeout") -> float | None:
    """A positive, finite number of seconds (a time budget), or None (no budget)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise _refuse(what, value, "a positive, finite number of seconds or None")
    return float(value)


def flag(value: object, what: str) -> bool:
    if not isinstance(value, bool):
        raise _refuse(what, value, "True or False")
    return value


_CONTAINERS = (dict, list, tuple)


def _too_deep(node: Any, budget: int) -> bool:
    """Whether ``node`` holds containers more than ``budget`` levels below it."""
    for child in node.values() if isinstance(node, dict) else node:
        if isinstance(child, _CONTAINERS) and (budget == 0 or _too_deep(child, budget - 1)):
            return True
    return False


def nesting(value: Any, what: str, limit: int = MAX_NESTING) -> None:
    """Refuse lists and dicts nested deeper than ``limit`` (msgspec would recurse
    until Python's limit and raise RecursionError, and a reader with less stack
    to spare might not manage to decode what was written)."""
    if isinstance(value, _CONTAINERS) and _too_deep(value, limit - 1):
        raise SessionError(ErrorCode.INPUT_INVALID, f"{what} nests lists and dicts more than {limit} deep")
