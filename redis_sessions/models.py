"""Stored snapshots: frozen msgspec Structs that must outlive deploys.

Schema evolution rules: a new field always gets a default; readers ignore
fields they do not know (``forbid_unknown_fields`` is never set); a field name
is never reused for a new meaning. Stored Structs set ``omit_defaults``: a field
still at its default is not written (a small response shrank from 838 to about 690
bytes), and every reader, old or new, fills it back from the same default, so
records written before and after read the same. Items stay plain dicts because the
Responses API keeps adding item types. Change a snapshot with
``msgspec.structs.replace``.
"""

from __future__ import annotations

from typing import Any, Union

import msgspec

Item = dict[str, Any]


class StoredResponseRequestSnapshot(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What the caller asked for in one turn."""

    input: Union[str, list[Item]] = ""
    instructions: Union[str, None] = None
    model: Union[str, None] = None
    tools: Union[list[Item], None] = None
    tool_choice: Union[str, Item, None] = None
    parallel_tool_calls: Union[bool, None] = None
    reasoning: Union[Item, None] = None
    text: Union[Item, None] = None
    truncation: Union[str, None] = None


class StoredResponseSnapshot(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What the model produced in one turn."""

    id: str
    output: list[Item] = msgspec.field(default_factory=list)
    output_text: Union[str, None] = None
    usage: Union[Item, None] = None
    error: Union[Item, None] = None
    incomplete_details: Union[Item, None] = None


class StoredResponseSession(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One stored response with the snapshot of the request that produced it."""

    id: str
    previous_response_id: Union[str, None] = None
    conversation_id: Union[str, None] = None
    created_at: int
    completed_at: Union[int, None] = None
    status: str = "completed"
    request: StoredResponseRequestSnapshot
    response: StoredResponseSnapshot
    metadata: Union[dict[str, Any], None] = None


class ResponseSessionSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """A resolved chain: the turns oldest first and the input items they rebuild.

    Not stored: made by ``resolve_chain``. ``input_items`` holds each turn's
    instructions (with ``replay_instructions``), its input and its output, every
    message in the shape OpenAI's ``input_items`` lists it in: content is a list of
    parts, e.g. ``{"type": "message", "role": "user", "content": [{"type":
    "input_text", "text": "hi"}]}`` (:func:`redis_sessions.responses.canonical_item`)."""

    previous_response_id: Union[str, None]
    sessions: list[StoredResponseSession]
    input_items: list[Item]
