"""Cursor paging as the OpenAI list endpoints do it, pure (no I/O).

A page is ``{"object": "list", "data", "first_id", "last_id", "has_more"}``;
``after`` is the id of the last item the caller has seen, in the order asked for.
``input_items`` pages a response's items with :func:`page`; the conversation
store pages its own items in Redis (:mod:`redis_sessions.conversations.paging`),
and shares its limits with the query checks here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..conversations.checks import DEFAULT_LIMIT, MAX_LIMIT, Order
from .errors import ApiError


@dataclass(frozen=True)
class PageQuery:
    limit: int = DEFAULT_LIMIT
    order: Order = "desc"
    after: str | None = None


def page_query(params: Mapping[str, str], *, default_order: Order = "desc") -> PageQuery:
    """``limit`` (1..100, default 20), ``order`` (asc|desc) and ``after`` from a query string."""
    raw_limit = params.get("limit")
    limit = DEFAULT_LIMIT
    if raw_limit is not None:
        limit = query_integer(raw_limit, "limit", 1, MAX_LIMIT)
    order = params.get("order", default_order)
    if order not in ("asc", "desc"):
        raise ApiError.invalid(f"order must be 'asc' or 'desc', got {order!r}", "order")
    after = params.get("after") or None
    return PageQuery(limit=limit, order=order, after=after)  # type: ignore[arg-type]  # checked just above


def query_integer(raw: str, name: str, minimum: int, maximum: int) -> int:
    """``raw`` as an integer written in ASCII digits, in [minimum, maximum]. ``int()`` and
    ``str.isdigit()`` also take other scripts' digits ('٣'), and ``isdigit()`` takes
    superscripts ('²') that ``int()`` then refuses; a digit string too long for ``int()``
    is out of range anyway."""
    digits = raw.lstrip("0") or "0"
    if not (raw.isascii() and raw.isdigit()) or len(digits) > len(str(maximum)) or not minimum <= int(digits) <= maximum:
        raise ApiError.invalid(f"{name} must be an integer from {minimum} to {maximum}, got {raw[:20]!r}", name)
    return int(digits)


def list_page(data: list[Any], has_more: bool) -> dict[str, Any]:
    """The list envelope; an empty page has no first or last id (null)."""
    first = data[0].get("id") if data else None
    last = data[-1].get("id") if data else None
    return {"object": "list", "data": data, "first_id": first, "last_id": last, "has_more": has_more}


def page(items: Sequence[dict[str, Any]], query: PageQuery) -> dict[str, Any]:
    """One page of ``items`` (oldest first, each with an ``id``). An ``after`` that is
    not among them is refused (400), rather than silently restarting the listing."""
    ordered = list(items) if query.order == "asc" else list(reversed(items))
    start = 0
    if query.after is not None:
        at = next((i for i, item in enumerate(ordered) if item.get("id") == query.after), None)
        if at is None:
            raise ApiError.invalid(f"after {query.after!r} is not an item of this list", "after")
        start = at + 1
    data = ordered[start:start + query.limit]
    return list_page(data, start + query.limit < len(ordered))
