"""What the Conversations API returns: frozen msgspec Structs, shaped as OpenAI's objects.

None of these is stored as such (a conversation is a hash of fields, see
:mod:`redis_sessions.conversations`); ``msgspec.to_builtins(obj)`` gives the JSON
body an HTTP server returns. Items stay plain dicts, as everywhere in this package.
"""

from __future__ import annotations

from typing import Optional

import msgspec

from ..models import Item


class Conversation(msgspec.Struct, frozen=True, kw_only=True):
    """``GET /v1/conversations/{id}``: the conversation, without its items."""

    id: str
    object: str = "conversation"
    created_at: int
    """Unix seconds."""
    metadata: dict[str, str] = msgspec.field(default_factory=dict)


class ConversationDeleted(msgspec.Struct, frozen=True, kw_only=True):
    """``DELETE /v1/conversations/{id}``."""

    id: str
    object: str = "conversation.deleted"
    deleted: bool = True


class ConversationItemList(msgspec.Struct, frozen=True, kw_only=True):
    """One page of items (``GET /v1/conversations/{id}/items``), or the items an
    ``add_items`` stored. ``first_id``/``last_id`` are None on an empty page; pass
    ``last_id`` as ``after`` to get the next page while ``has_more``."""

    object: str = "list"
    data: list[Item]
    first_id: Optional[str] = None
    last_id: Optional[str] = None
    has_more: bool = False
