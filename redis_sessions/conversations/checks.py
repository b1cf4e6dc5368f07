"""The Conversations API's limits, checked in Python before anything is sent, and item ids.

OpenAI's limits: metadata holds at most 16 pairs, keys of at most 64
characters, string values of at most 512; one call adds at most 20 items; a
page holds 1 to 100 items (20 by default), ``order`` is ``asc`` or ``desc``
(default ``desc``, newest first). A refused call writes nothing.

Ours: a response's turn (its input and output items, appended as it is saved)
holds at most ``MAX_ITEMS_PER_TURN`` items, so that its one script stays under a
few milliseconds however small the items are (the bytes are bounded apart).
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from ..errors import ErrorCode, SessionError
from ..ids import mint_id, validate_id
from ..codec import encode_items, pack
from ..models import Item
from ..options import ItemOptions

MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512
MAX_ITEMS_PER_CALL = 20
MAX_ITEMS_PER_TURN = 256
DEFAULT_LIMIT = 20
MAX_LIMIT = 100
ORDERS = ("asc", "desc")
Order = Literal["asc", "desc"]

ID_PREFIXES: dict[str, str] = {
    "message": "msg",
    "function_call": "fc",
    "function_call_output": "fco",
    "reasoning": "rs",
    "file_search_call": "fs",
    "web_search_call": "ws",
    "computer_call": "cu",
    "computer_call_output": "cuo",
    "image_generation_call": "ig",
    "code_interpreter_call": "ci",
    "local_shell_call": "lsh",
    "local_shell_call_output": "lsho",
    "mcp_list_tools": "mcpl",
    "mcp_approval_request": "mcpr",
    "mcp_approval_response": "mcpa",
    "mcp_call": "mcp",
    "custom_tool_call": "ctc",
    "custom_tool_call_output": "ctco",
    "compaction": "cmp",
}
"""The id prefix minted for an item without an ``id``, by its ``type`` (a dict
without a type but with a role is a message, as the API reads it); ``item``
for any other type."""


def _bad(message: str) -> SessionError:
    return SessionError(ErrorCode.INPUT_INVALID, message)


def metadata(value: object) -> dict[str, str]:
    """A copy of ``value`` if it is valid metadata (None: empty)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _bad(f"metadata must be a dict of strings, got {type(value).__name__}")
    if len(value) > MAX_METADATA_PAIRS:
        raise _bad(f"metadata holds {len(value)} pairs, the limit is {MAX_METADATA_PAIRS}")
    for key, val in value.items():
        if not isinstance(key, str) or not isinstance(val, str):
            raise _bad(f"metadata keys and values must be strings, got {key!r}: {val!r}"[:200])
        if len(key) > MAX_METADATA_KEY:
            raise _bad(f"metadata key {key[:70]!r}... is {len(key)} characters, the limit is {MAX_METADATA_KEY}")
        if len(val) > MAX_METADATA_VALUE:
            raise _bad(f"metadata value of {key!r} is {len(val)} characters, the limit is {MAX_METADATA_VALUE}")
    return dict(value)


def item_prefix(item: Item) -> str:
    kind = item.get("type")
    if kind is None and "role" in item:
        kind = "message"
    return ID_PREFIXES.get(kind, "item") if isinstance(kind, str) else "item"


def items(value: object, options: ItemOptions, *, allow_empty: bool,
          max_items: int = MAX_ITEMS_PER_CALL) -> tuple[list[str], list[bytes]]:
    """The items' ids (minted where missing; unique within the call) and their stored
    values, within ``options``' limits. ``max_items``: OpenAI's 20 for an add; a response's
    turn asks for more, and no call gets past ``MAX_ITEMS_PER_TURN``."""
    if value is None and allow_empty:
        value = []
    if not isinstance(value, list):
        raise _bad(f"items must be a list, got {type(value).__name__}")
    if not value and not allow_empty:
        raise _bad("items must not be empty")
    limit = min(max_items, MAX_ITEMS_PER_TURN)
    if len(value) > limit:
        raise _bad(f"{len(value)} items in one call, the limit is {limit}")
    out = identified(value)
    encoded = encode_items(out, options.max_item_bytes, options.max_batch_bytes, len(out))
    return [str(item["id"]) for item in out], [pack(data, 0, options.compression) for data in encoded]


def identified(value: list[Any]) -> list[Item]:
    """Copies of the items, each with an ``id`` (minted where missing, else checked as
    any id is), no two alike: the part of :func:`items` that needs no store. The
    reference server runs it on a response's input too, so its responses endpoint
    takes the items its conversations endpoint takes."""
    out: list[Item] = []
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise _bad(f"item {index} must be a dict, got {type(item).__name__}")
        copy: dict[str, Any] = dict(item)
        if copy.get("id") is None:
            copy["id"] = mint_id(item_prefix(copy))
        else:
            validate_id(copy["id"], f"item {index}'s id")
        out.append(copy)
    if len({item["id"] for item in out}) != len(out):
        raise _bad("two items of one call have the same id")
    return out


def page(limit: object, order: object, after: object) -> tuple[int, Order, Optional[str]]:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise _bad(f"limit must be an int from 1 to {MAX_LIMIT}, got {limit!r}"[:200])
    if order not in ORDERS:
        raise _bad(f"order must be 'asc' or 'desc', got {order!r}"[:200])
    if after is not None:
        validate_id(after, "after")
    return limit, order, after  # type: ignore[return-value]
