"""Item ids and shapes: every item the server stores or lists carries an ``id``.

Input items get theirs when the turn is saved (so ``input_items`` pages by stable
ids), output items when the model returns them without one. Ids follow OpenAI's
prefixes (``msg_`` for messages, ``fc_`` for function calls, ...), minted as the
conversation store mints the ids of the items it is given without one.
"""

from __future__ import annotations

from typing import Any

from ..ids import mint_id
from ..models import Item
from ..responses import canonical_item, request_input_items
from .errors import ApiError

ID_PREFIX = {"message": "msg", "function_call": "fc", "function_call_output": "fco", "reasoning": "rs",
             "custom_tool_call": "ctc", "custom_tool_call_output": "ctco", "compaction": "cmp"}


def new_item_id(kind: object) -> str:
    prefix = ID_PREFIX.get(kind, "item") if isinstance(kind, str) else "item"
    return mint_id(prefix)


def with_id(item: Item) -> Item:
    """A copy of ``item`` with an ``id`` (kept if it has one), and a message's ``status``."""
    shaped = dict(canonical_item(item))
    shaped.setdefault("id", new_item_id(shaped.get("type")))
    if shaped.get("type") == "message":
        shaped.setdefault("status", "completed")
    return shaped


def input_items(value: object) -> list[Item]:
    """A request's ``input`` (a string or a list of items) as items with ids."""
    if isinstance(value, str):
        return [with_id(item) for item in request_input_items(value)]
    if isinstance(value, list) and all(isinstance(item, dict) for item in value):
        return [with_id(item) for item in request_input_items(value)]
    raise ApiError.invalid("input must be a string or a list of items (objects)", "input")


def _output_part(part: Any) -> Any:
    if isinstance(part, dict) and part.get("type") == "output_text" and "annotations" not in part:
        return {**part, "annotations": []}
    return part


def output_item(item: Item) -> Item:
    """A model output item as OpenAI returns one: an assistant message's text parts
    carry ``annotations``, every item an ``id``."""
    shaped = with_id({"type": "message", **item} if "role" in item and "type" not in item else item)
    content = shaped.get("content")
    if shaped.get("type") == "message" and isinstance(content, list):
        shaped["content"] = [_output_part(part) for part in content]
    return shaped
