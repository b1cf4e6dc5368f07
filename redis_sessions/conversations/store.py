"""The conversation store: OpenAI's Conversations API on Redis, on either API, and on an
in-process server in memory mode.

A conversation is one hash (``lua/conv_lib.lua`` and docs/key-layout.md have its fields),
so every call is one ``lua/conv_*.lua`` script on one key, through the store's edge
(:mod:`..edge`): atomic on a standalone server and on a cluster alike. A page over a long
run of deleted items may take more calls (:meth:`RedisConversationStore.list_items`).

Every argument is checked here first (:mod:`.checks`), and every script checks before its
first write, refusing with an error reply that :data:`..errors.REFUSALS` maps to a code.
Writes carry an operation token made here, per call, so redis-py re-sending a script whose
reply was lost (or sending it as EVAL after NOSCRIPT) carries the same one: the script
finds it in the conversation's ring, writes nothing and answers as the first run did.
Item ids are minted here too, before the call, so a re-send stores the ids the caller was
given. The store keeps no state between calls.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import msgspec

from .. import validate
from ..budget import bounded
from ..client import without_decode
from ..clock import Clock, system_clock
from ..codec import decode_item, encode
from ..edge import Edge
from ..errors import ErrorCode, SessionError
from ..ids import mint_id, validate_id
from ..keys import KeySpace
from ..link import AnyRedis, RedisLink
from ..models import Item
from ..options import Configured, ItemOptions
from ..replication import ReplicaAcks
from ..scripts import script
from ..tokens import new_token
from . import checks
from .models import Conversation, ConversationDeleted, ConversationItemList

SCRIPTS = {name: script(name) for name in ("conv_create", "conv_add", "conv_update", "conv_delete",
                                           "conv_delete_item", "conv_get", "conv_item", "conv_list")}
SCAN_BUDGET = 1024
"""Positions one ``conv_list`` call reads at most: a page that starts inside a long run of
deleted items takes one call per this many."""

_METADATA = msgspec.msgpack.Decoder(dict[str, str])


class ConversationOptions(ItemOptions, frozen=True, kw_only=True):
    """A conversation store's options: the item limits, and the clock of ``created_at``."""

    clock: Clock = system_clock
    """Where ``created_at`` comes from (unix seconds); tests give a fake one."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not callable(self.clock):
            raise SessionError(ErrorCode.INPUT_INVALID, f"clock must be callable, got {type(self.clock).__name__}")


class RedisConversationStore(Configured):
    """Conversations in Redis (standalone, Cluster or Sentinel), from a redis-py asyncio
    client (``client``, never closed here, ``decode_responses`` or not) or a URL
    (:meth:`from_url`).

    ``options``: :class:`ConversationOptions` (``key_prefix``, ``ttl_seconds``: every write
    sets it, default 30 days, None: never expire; ``sliding_ttl``: reads set it too;
    ``max_item_bytes``, ``max_batch_bytes``, ``compression``, ``timeout``, ``replica_acks``,
    ``replica_ack_timeout``, ``clock``), each also an attribute of the store.

    Errors: an unknown, deleted or expired conversation is ``session.conversation.not_found``
    (404), an unknown or deleted item ``session.conversation.item_not_found`` (404), a bad
    argument ``session.input.invalid`` or ``session.id.invalid`` (400), an item id that a
    live item of the conversation already has ``session.store.conflict`` (409), an
    oversized item ``session.record.too_large`` (413), a conversation written in another
    data format ``session.record.unsupported``.
    """

    OPTIONS = ConversationOptions

    def __init__(self, client: Optional[AnyRedis] = None, *, link: Optional[RedisLink] = None,
                 **options: Any) -> None:
        self.options = opts = ConversationOptions.of(**options)
        self.keys = KeySpace(opts.key_prefix)
        self.link = link if link is not None else RedisLink(client, timeout=opts.timeout, raw_replies=True)
        self.link.owner = "the conversation store"
        self.timeout = self.link.timeout
        self.edge = Edge(self.link, ReplicaAcks.of(opts.replica_acks, opts.replica_ack_timeout))

    @classmethod
    def from_url(cls, url: str, *, cluster: Optional[bool] = None, redis_kwargs: Optional[Mapping[str, Any]] = None,
                 **options: Any) -> "RedisConversationStore":
        """A store with its own client per event loop (closed by :meth:`close`): the URLs of
        :meth:`RedisResponseSessionStore.from_url`; ``redis_kwargs`` go to redis-py's client. No I/O."""
        timeout = ConversationOptions.of(**options).timeout
        return cls(link=RedisLink.to_url(url, cluster=cluster, timeout=timeout,
                                         redis_kwargs=without_decode(redis_kwargs)), **options)


    @property
    def client(self) -> AnyRedis:
        """The redis-py client this store uses on the running event loop."""
        return self.link.client

    @property
    def ttl_ms(self) -> int:
        """The TTL every write gives a conversation, in ms (0: none); a response's turn
        gives it too."""
        return self.options.ttl_ms

    async def close(self) -> None:
        """Close the client this store built (``from_url``, config) on the running loop; a
        caller's client is never closed."""
        await self.link.close()

    def turn_arguments(self, items: list[Item]) -> list[bytes]:
        """What a response's turn appends (lua/conv_lib.lua's append_check and append_write):
        each item's id and stored value, checked as an append's are (ids minted where
        missing), at most ``MAX_ITEMS_PER_TURN``. The response store calls it, so that it
        imports nothing of this package (responses and conversations are siblings)."""
        return self._items(items, checks.MAX_ITEMS_PER_TURN)

    def _items(self, items: object, max_items: int = checks.MAX_ITEMS_PER_CALL, allow_empty: bool = True) -> list[bytes]:
        """ARGV pairs of an append: item id, stored value, ... oldest first."""
        ids, values = checks.items(items, self.options, allow_empty=allow_empty, max_items=max_items)
        return [part for pair in zip((i.encode() for i in ids), values) for part in pair]

    async def _call(self, name: str, conversation_id: str, *args: Any, write: bool = False) -> Any:
        """The reply of ``lua/<name>.lua`` on the conversation's key: one atomic step."""
        return await self.edge.run(SCRIPTS[name], (self.keys.conversation(conversation_id),), args,
                                   where=f"conversation {conversation_id!r}", write=write)

    # -- conversations -------------------------------------------------------------
    @bounded
    async def create(self, items: Optional[list[Item]] = None,
                     metadata: Optional[dict[str, str]] = None, *, owner: Optional[str] = None) -> Conversation:
        """A new conversation (id ``conv_`` + 48 hex) holding ``items`` (at most 20).
        ``owner``: the conversation is that owner's; to every other owner it does not
        exist (docs/guarantees.md#owners). Every method takes it."""
        who = validate.owner(owner)
        meta = checks.metadata(metadata)
        pairs = self._items(items)
        conversation_id = mint_id("conv")
        created = int(self.options.clock())
        await self._call("conv_create", conversation_id, self.ttl_ms, new_token(), created, encode(meta), who, *pairs,
                         write=True)
        return Conversation(id=conversation_id, created_at=created, metadata=meta)

    @bounded
    async def get(self, conversation_id: str, *, owner: Optional[str] = None) -> Conversation:
        """The conversation: its id, creation time and metadata. An unknown, deleted or expired
        one, or another owner's, is ``session.conversation.not_found``."""
        validate_id(conversation_id, "conversation id")
        who = validate.owner(owner)
        created, meta = await self._call("conv_get", conversation_id, self.options.slide_ms, who)
        return _conversation(conversation_id, created, meta)

    @bounded
    async def update(self, conversation_id: str, metadata: dict[str, str], *,
                     owner: Optional[str] = None) -> Conversation:
        """Replace the conversation's metadata (OpenAI's update)."""
        validate_id(conversation_id, "conversation id")
        who = validate.owner(owner)
        meta = checks.metadata(metadata)
        created = await self._call("conv_update", conversation_id, self.ttl_ms, new_token(), encode(meta), who,
                                   write=True)
        return Conversation(id=conversation_id, created_at=int(created), metadata=meta)

    @bounded
    async def delete(self, conversation_id: str, *, owner: Optional[str] = None) -> ConversationDeleted:
        """Delete the conversation and its items (404 if there is none)."""
        validate_id(conversation_id, "conversation id")
        who = validate.owner(owner)
        await self._call("conv_delete", conversation_id, new_token(), who, write=True)
        return ConversationDeleted(id=conversation_id)

    # -- items -----------------------------------------------------------------------
    @bounded
    async def add_items(self, conversation_id: str, items: list[Item], *,
                        owner: Optional[str] = None) -> ConversationItemList:
        """Append 1 to 20 items, atomically; those without an ``id`` get one by type
        (``msg_``, ``fc_``, ``fco_``... see :data:`.checks.ID_PREFIXES`). Returns them as stored."""
        validate_id(conversation_id, "conversation id")
        who = validate.owner(owner)
        pairs = self._items(items, allow_empty=False)
        await self._call("conv_add", conversation_id, self.ttl_ms, new_token(), who, *pairs, write=True)
        return self._page(conversation_id, pairs[1::2], len(pairs) // 2)

    @bounded
    async def list_items(self, conversation_id: str, *, limit: int = checks.DEFAULT_LIMIT,
                         order: checks.Order = "desc", after: Optional[str] = None,
                         owner: Optional[str] = None) -> ConversationItemList:
        """A page of items: newest first (``desc``, the default) or oldest first; after the
        item ``after`` (an id from an earlier page, deleted since or not: a deleted item's
        cursor pages on from where it stood while its tombstone is kept, 5 minutes and the
        conversation's last 1,000 deletes; after that, or for an id the conversation never
        held, ``session.input.invalid``).

        One call reads ``limit + 1`` positions (the extra one says ``has_more``) and skips
        each run of deleted items through its ends. Where the page starts inside a run (a
        cursor naming a deleted item), or its items are large, the call stops early and says
        where to go on, and the store calls again from there: those calls see the
        conversation at slightly different moments, so an item deleted meanwhile may still
        be on the page."""
        validate_id(conversation_id, "conversation id")
        who = validate.owner(owner)
        limit, order, after = checks.page(limit, order, after)
        want, values = limit + 1, list[bytes]()
        at, cursor = b"", after or ""
        while True:
            reply = await self._call("conv_list", conversation_id, order, want - len(values), cursor, at,
                                     SCAN_BUDGET, self.options.slide_ms, who)
            at, cursor = reply[0], ""
            values += reply[1:]
            if len(values) >= want or not at:
                return self._page(conversation_id, values, limit)

    async def history(self, conversation_id: str, *, owner: Optional[str] = None) -> list[Item]:
        """Every item of the conversation, oldest first: the next turn's input history
        (a response saved with ``conversation_id`` appends its turn, see the response
        store's ``conversations``). Read in pages of 100, one bounded call each."""
        items: list[Item] = []
        after: Optional[str] = None
        while True:
            page = await self.list_items(conversation_id, limit=checks.MAX_LIMIT, order="asc", after=after, owner=owner)
            items.extend(page.data)
            if not page.has_more or page.last_id is None:
                return items
            after = page.last_id

    @bounded
    async def get_item(self, conversation_id: str, item_id: str, *, owner: Optional[str] = None) -> Item:
        """One item of the conversation, by its id: ``session.conversation.item_not_found`` if
        the conversation has no such item."""
        validate_id(conversation_id, "conversation id")
        validate_id(item_id, "item id")
        who = validate.owner(owner)
        value = await self._call("conv_item", conversation_id, self.options.slide_ms, item_id, who)
        return decode_item(value, f"conversation {conversation_id!r}", self.options.max_item_bytes)

    @bounded
    async def delete_item(self, conversation_id: str, item_id: str, *, owner: Optional[str] = None) -> Conversation:
        """Delete one item; returns the conversation, as OpenAI does. A cursor naming the
        deleted item keeps paging from where it stood (see :meth:`list_items`)."""
        validate_id(conversation_id, "conversation id")
        validate_id(item_id, "item id")
        who = validate.owner(owner)
        created, meta = await self._call("conv_delete_item", conversation_id, self.ttl_ms, new_token(), item_id, who,
                                         write=True)
        return _conversation(conversation_id, created, meta)

    def _page(self, conversation_id: str, values: list[bytes], limit: int) -> ConversationItemList:
        """The first ``limit`` of ``values`` decoded, as a page (``has_more``: there were more)."""
        where = f"conversation {conversation_id!r}"
        data = [decode_item(value, where, self.options.max_item_bytes) for value in values[:limit]]
        return ConversationItemList(data=data, first_id=_id(data[0]) if data else None,
                                    last_id=_id(data[-1]) if data else None, has_more=len(values) > limit)


def _conversation(conversation_id: str, created: bytes, meta: Optional[bytes]) -> Conversation:
    """A conversation from its script's reply: created_at (digits: the script parsed the
    header) and its metadata (msgpack)."""
    try:
        metadata = _METADATA.decode(meta or b"")
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise SessionError(ErrorCode.RECORD_CORRUPT,
                           f"conversation {conversation_id!r}: its metadata does not decode: {exc}") from None
    return Conversation(id=conversation_id, created_at=int(created), metadata=metadata)


def _id(item: Item) -> Optional[str]:
    value = item.get("id")
    return value if isinstance(value, str) else None
