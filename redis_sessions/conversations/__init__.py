"""The OpenAI Conversations API's state: conversations and their items, one Redis key each.

``RedisConversationStore`` (Redis or Redis Cluster; ``MemoryConversationStore`` in
:mod:`redis_sessions.memory` is the same class on an in-process server;
``SyncConversationStore`` runs its methods from synchronous code);
``create_conversation_store(config)`` builds either from a
:class:`~redis_sessions.SessionConfig`.

A conversation is ONE hash, ``<prefix>:{c:<conversation id>}:conv``::

    c            created_at, unix seconds (the hash is a live conversation while it has c)
    m            metadata, msgpack of {str: str}
    n            the last sequence number given to an item (items are numbered 1, 2, ...)
    b            the largest item the conversation has held, in bytes: a page reads about
                 512 KiB a call at that size (lua/conv_lib.lua's READ_BYTES)
    i:<seq>      an item, msgpack; HDEL'd when the item is deleted
    x:<item id>  the item's sequence number; kept after the item is deleted while its
                 tombstone is, so a cursor (``after``) naming a recently deleted item still pages
    t            "<first> <next>": the ends of the tombstone queue
    t:<k>        a tombstone, "<deleted at, unix ms> <seq> <item id>", oldest first. A write
                 that adds or deletes items drops those older than 5 minutes and any past
                 the newest 1,000 (at most 8 per write), each with its x: field; a cursor
                 naming an item dropped so is refused as unknown (400)
    g:<seq>      at both ends of each run of deleted items [a, b]: g:a = b and g:b = a
                 (one field when a = b), kept in O(1) by each delete, so a page skips a
                 whole run with one HGET; runs are separated by live items, so these stay
                 fewer than two per live item, plus two
    ops          the ring of the last 16 writes' operation tokens: "<16 hex> <what>\\n",
                 newest first (at most 16 x 19 bytes); a re-sent write finds its token
                 there and writes nothing

So a conversation expires, is evicted, purged and migrated whole, under one
TTL. A page of ``list_items`` is one script call: HGET ``x:<after>``, then
HMGET of the next ``limit + 1`` sequence numbers (and one HGET per run of
deleted items met), so its cost does not grow with the conversation's length
or with how many items were deleted; see :mod:`.paging` for the one bounded
walk left (a cursor inside a run of deleted items). A deleted conversation loses ``c`` in
place (never deleted and created again: Redis refuses to create a key in a slot
being migrated) and expires 5 minutes later; its ring answers a re-sent delete,
every read sees it as not found, and its items' memory goes when it expires. One
call adds at most 20 items; a response's turn appends at most 256
(``MAX_ITEMS_PER_TURN``), refused before anything is written.
"""

from .base import ConversationStore
from .checks import ID_PREFIXES, MAX_ITEMS_PER_CALL, MAX_ITEMS_PER_TURN, MAX_LIMIT
from .models import Conversation, ConversationDeleted, ConversationItemList
from .redis import RedisConversationStore
from .sync import SyncConversationStore

__all__ = [
    "ID_PREFIXES",
    "MAX_ITEMS_PER_CALL",
    "MAX_ITEMS_PER_TURN",
    "MAX_LIMIT",
    "Conversation",
    "ConversationDeleted",
    "ConversationItemList",
    "ConversationStore",
    "RedisConversationStore",
    "SyncConversationStore",
]
