"""Item ids and shapes: every item the server stores or lists carries an ``id``.

Input items get theirs when the turn is checked (so ``input_items`` pages by stable
ids), by the conversation store's own item check, output items when the model
returns them without one. Ids follow OpenAI's prefixes (``msg_`` for messages,
``fc_`` for function calls, ...), minted exactly as the conversation store mints
the ids of the items it is given without one.
"""

from __future__ import annotations

from typing import Any

from ..conversations.checks import identified, item_prefix
from ..errors import SessionError
from ..ids import mint_id
from ..models import Item
from ..responses import canonical_item, request_input_items
from .errors import ApiError


def _output_part(part: Any) -> Any:
    if isinstance(part, dict) and part.get("type") == "output_text" and "annotations" not in part:
        return {**part, "annotations": []}
    return part


def shaped(item: Item) -> Item:
    """A copy of ``item`` in the shape OpenAI stores and lists it in: an easy message
    (``{"role": ..., "content": "..."}``) becomes a ``message`` item whose content is a
    list of parts (:func:`canonical_item`), a message gets a ``status`` and its
    ``output_text`` parts ``annotations``. Ids are left as they are."""
    copy = dict(canonical_item(item))
    if "type" not in copy and "role" in copy:
        copy["type"] = "message"
    if copy.get("type") == "message":
        copy.setdefault("status", "completed")
        content = copy.get("content")
        if isinstance(content, list):
            copy["content"] = [_output_part(part) for part in content]
    return copy


def with_id(item: Item) -> Item:
    """:func:`shaped`, with an ``id`` (kept if it has one)."""
    copy = shaped(item)
    if copy.get("id") is None:
        copy["id"] = mint_id(item_prefix(copy))
    return copy


def items_of(value: object, param: str, limit: int | None = None) -> list[Item]:
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise ApiError.invalid(f"{param} must be a list of items (objects)", param)
    if limit is not None and len(value) > limit:
        raise ApiError.invalid(f"{param} has {len(value)} items; at most {limit} in one request", param)
    return value


def input_items(value: object) -> list[Item]:
    """A request's ``input`` (a string or a list of items) as items with ids, checked by
    the conversation store's own check (:func:`identified`: ids valid and unique), so a
    turn stores only items that the conversations endpoint accepts too."""
    given = request_input_items(value) if isinstance(value, str) else items_of(value, "input")
    try:
        return identified([shaped(item) for item in given])
    except SessionError as exc:
        raise ApiError.from_session_error(exc, "input") from None
