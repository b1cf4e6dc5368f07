"""The OpenAI Conversations API's state: conversations and their items, one Redis key each.

``RedisConversationStore`` (Redis, Cluster or Sentinel; ``MemoryConversationStore`` in
:mod:`redis_sessions.memory` is the same class on an in-process server;
``SyncConversationStore`` runs its methods from synchronous code);
``create_conversation_store(config)`` builds either from a
:class:`~redis_sessions.SessionConfig`.

A conversation is ONE hash, ``<prefix>:{c:<conversation id>}:conv``, in data format 1
(docs/key-layout.md#conversations has every field): it expires, is evicted, purged and
migrated whole, under one TTL, and every call is one script on it. One call adds at most
20 items; a response's turn appends at most 256 (``MAX_ITEMS_PER_TURN``), refused before
anything is written.
"""

from .checks import ID_PREFIXES, MAX_ITEMS_PER_CALL, MAX_ITEMS_PER_TURN, MAX_LIMIT
from .models import Conversation, ConversationDeleted, ConversationItemList
from .store import ConversationOptions, RedisConversationStore
from .sync import SyncConversationStore

ConversationStore = RedisConversationStore
"""The conversation store's type, for annotations: there is one implementation (memory mode
is the same class on an in-process server)."""

__all__ = [
    "ID_PREFIXES",
    "MAX_ITEMS_PER_CALL",
    "MAX_ITEMS_PER_TURN",
    "MAX_LIMIT",
    "Conversation",
    "ConversationDeleted",
    "ConversationItemList",
    "ConversationOptions",
    "ConversationStore",
    "RedisConversationStore",
    "SyncConversationStore",
]
