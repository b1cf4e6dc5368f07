"""The Conversations API, written once; the backends only run the scripts.

Every public call is one script call on the conversation's one key (a page
over a long run of deleted items may take more: see :mod:`.paging`), after
every argument was checked here (:mod:`.checks`). Writes carry an operation
token made here, per call and sent in the script's ARGV, so redis-py
re-sending a command whose reply was lost (or re-sending it as EVAL after
NOSCRIPT) carries the same one: the script finds it in the conversation's
ring, writes nothing and answers as the first run did. Item ids are minted
here too, before the call, so a re-send stores the ids the caller was given.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Optional, Sequence, Union

import msgspec

from .. import validate
from ..clock import Clock, system_clock
from ..codec import decode_item, encode
from ..errors import ErrorCode, SessionError
from ..ids import mint_id, validate_id
from ..keys import DEFAULT_PREFIX, KeySpace
from ..limits import DEFAULT_TTL_SECONDS, MAX_BATCH_BYTES, MAX_ITEM_BYTES, UNSET, _Unset
from ..models import Item
from ..budget import bounded
from ..tokens import new_token
from . import checks, paging
from .models import Conversation, ConversationDeleted, ConversationItemList

Reply = list[Optional[bytes]]
"""A script's reply: a status (``ok``, ``nf``...) and its values."""
Arg = Union[bytes, str, int]

_METADATA = msgspec.msgpack.Decoder(dict[str, str])


def _arg(value: Arg) -> bytes:
    if isinstance(value, bytes):
        return value
    return (value if isinstance(value, str) else str(value)).encode("utf-8")


class ConversationStore(ABC):
    """Conversations as OpenAI's Conversations API keeps them, one key each.

    ``ttl_seconds``: every write sets it on the conversation (default
    ``DEFAULT_TTL_SECONDS``, 30 days; None: never expire); ``sliding_ttl``: reads
    set it too. Errors: an unknown, deleted or expired conversation is
    ``session.conversation.not_found`` (404), an unknown or deleted item
    ``session.conversation.item_not_found`` (404), a bad argument
    ``session.input.invalid`` or ``session.id.invalid`` (400), an item id that a
    live item of the conversation already has ``session.store.conflict`` (409),
    an oversized item ``session.record.too_large`` (413).
    """

    timeout: Optional[float] = None
    """Seconds one call may take in total (Redis; None: no budget)."""

    def __init__(
        self,
        *,
        key_prefix: str = DEFAULT_PREFIX,
        ttl_seconds: Union[float, None, _Unset] = UNSET,
        sliding_ttl: bool = False,
        max_item_bytes: int = MAX_ITEM_BYTES,
        max_batch_bytes: int = MAX_BATCH_BYTES,
        compression: bool = True,
        clock: Clock = system_clock,
    ) -> None:
        self.keys = KeySpace(key_prefix)
        self.ttl_seconds = DEFAULT_TTL_SECONDS if isinstance(ttl_seconds, _Unset) else ttl_seconds
        self._ttl_ms = validate.ttl_ms(self.ttl_seconds)
        self.sliding_ttl = validate.flag(sliding_ttl, "sliding_ttl")
        self._slide_ms = self._ttl_ms if sliding_ttl else 0
        self.max_item_bytes = validate.integer(max_item_bytes, "max_item_bytes", minimum=1, maximum=64 << 20)
        self.max_batch_bytes = validate.integer(max_batch_bytes, "max_batch_bytes", minimum=1, maximum=256 << 20)
        self.compression = validate.flag(compression, "compression")
        """Items of ``codec.COMPRESS_MIN_BYTES`` or more are stored zstd-compressed where that
        makes them smaller; a build before this one cannot read them: while one still reads
        the store, pass False."""
        self._clock = clock

    @property
    def ttl_ms(self) -> int:
        """The TTL every write gives a conversation, in ms (0: none)."""
        return self._ttl_ms

    def now(self) -> float:
        """This store's clock."""
        return self._clock()

    async def close(self) -> None:
        """Release what this store built (see the backend); a no-op here."""

    def turn_arguments(self, items: list[Item]) -> list[bytes]:
        """What a response's turn appends (lua/conv_lib.lua's append): each item's id and
        encoding, checked as an append's are (ids minted where missing), at most
        ``MAX_ITEMS_PER_TURN``. The response store calls it, so it needs no import of this
        package (responses and conversations are siblings)."""
        _, ids, entries = checks.items(items, self.max_item_bytes, self.max_batch_bytes, self.compression, allow_empty=True,
                                       max_items=checks.MAX_ITEMS_PER_TURN)
        return [part for pair in zip((i.encode() for i in ids), entries) for part in pair]

    # -- conversations -------------------------------------------------------------
    @bounded
    async def create(self, items: Optional[list[Item]] = None,
                     metadata: Optional[dict[str, str]] = None) -> Conversation:
        """A new conversation (id ``conv_`` + 48 hex) holding ``items`` (at most 20)."""
        meta = checks.metadata(metadata)
        _, ids, entries = checks.items(items, self.max_item_bytes, self.max_batch_bytes, self.compression, allow_empty=True)
        conversation_id = mint_id("conv")
        created = int(self._clock())
        reply = await self._write("conv_create", conversation_id,
                                  [self._ttl_ms, new_token(), created, encode(meta), *_pairs(ids, entries)])
        self._check(reply, conversation_id)
        return Conversation(id=conversation_id, created_at=created, metadata=meta)

    @bounded
    async def get(self, conversation_id: str) -> Conversation:
        validate_id(conversation_id, "conversation id")
        reply = await self._read("conv_get", conversation_id, [self._slide_ms])
        self._check(reply, conversation_id)
        return self._conversation(conversation_id, reply[1], reply[2])

    @bounded
    async def update(self, conversation_id: str, metadata: dict[str, str]) -> Conversation:
        """Replace the conversation's metadata (OpenAI's update)."""
        validate_id(conversation_id, "conversation id")
        meta = checks.metadata(metadata)
        reply = await self._write("conv_update", conversation_id, [self._ttl_ms, new_token(), encode(meta)])
        self._check(reply, conversation_id)
        return Conversation(id=conversation_id, created_at=self._int(reply[1], conversation_id), metadata=meta)

    @bounded
    async def delete(self, conversation_id: str) -> ConversationDeleted:
        """Delete the conversation and its items (404 if there is none)."""
        validate_id(conversation_id, "conversation id")
        reply = await self._write("conv_delete", conversation_id, [new_token()])
        self._check(reply, conversation_id)
        return ConversationDeleted(id=conversation_id)

    # -- items -----------------------------------------------------------------------
    @bounded
    async def add_items(self, conversation_id: str, items: list[Item]) -> ConversationItemList:
        """Append 1 to 20 items, atomically; those without an ``id`` get one by type
        (``msg_``, ``fc_``, ``fco_``... see :data:`.checks.ID_PREFIXES`). Returns them as stored."""
        validate_id(conversation_id, "conversation id")
        _, ids, entries = checks.items(items, self.max_item_bytes, self.max_batch_bytes, self.compression, allow_empty=False)
        reply = await self._write("conv_add", conversation_id,
                                  [self._ttl_ms, new_token(), *_pairs(ids, entries)])
        self._check(reply, conversation_id)
        stored = [decode_item(e, self._where(conversation_id), self.max_item_bytes) for e in entries]
        return paging.page_of(stored, len(stored))

    @bounded
    async def list_items(self, conversation_id: str, *, limit: int = checks.DEFAULT_LIMIT,
                         order: checks.Order = "desc", after: Optional[str] = None) -> ConversationItemList:
        """A page of items: newest first (``desc``, the default) or oldest first; after
        the item ``after`` (an id from an earlier page, deleted since or not)."""
        validate_id(conversation_id, "conversation id")
        limit, order, after = checks.page(limit, order, after)

        async def call(want: int, cursor: Optional[str], start: Optional[int]) -> paging.Slice:
            args: list[Arg] = [order, want, cursor or "", "" if start is None else start, paging.SCAN_BUDGET,
                               self._slide_ms]
            reply = await self._read("conv_list", conversation_id, args)
            self._check(reply, conversation_id)
            nxt = reply[1]
            return paging.Slice([e for e in reply[2:] if e is not None],
                                self._int(nxt, conversation_id) if nxt else None)

        entries = await paging.collect(call, limit, after)
        where = self._where(conversation_id)
        return paging.page_of([decode_item(e, where, self.max_item_bytes) for e in entries], limit)

    async def history(self, conversation_id: str) -> list[Item]:
        """Every item of the conversation, oldest first: the next turn's input history
        (a response saved with ``conversation_id`` appends its turn, see the response
        store's ``conversations``). Read in pages of 100, one bounded call each."""
        items: list[Item] = []
        after: Optional[str] = None
        while True:
            page = await self.list_items(conversation_id, limit=checks.MAX_LIMIT, order="asc", after=after)
            items.extend(page.data)
            if not page.has_more or page.last_id is None:
                return items
            after = page.last_id

    @bounded
    async def get_item(self, conversation_id: str, item_id: str) -> Item:
        validate_id(conversation_id, "conversation id")
        validate_id(item_id, "item id")
        reply = await self._read("conv_item", conversation_id, [self._slide_ms, item_id])
        self._check(reply, conversation_id, item_id)
        return decode_item(reply[1], self._where(conversation_id), self.max_item_bytes)

    @bounded
    async def delete_item(self, conversation_id: str, item_id: str) -> Conversation:
        """Delete one item; returns the conversation, as OpenAI does. A cursor naming
        the deleted item keeps paging from where it stood for 5 minutes, while it is
        among the conversation's last 1,000 deleted items; after that it is refused as
        an id the conversation never held (``session.input.invalid``)."""
        validate_id(conversation_id, "conversation id")
        validate_id(item_id, "item id")
        reply = await self._write("conv_delete_item", conversation_id,
                                  [self._ttl_ms, new_token(), item_id])
        self._check(reply, conversation_id, item_id)
        return self._conversation(conversation_id, reply[1], reply[2])

    # -- replies ---------------------------------------------------------------------
    def _where(self, conversation_id: str) -> str:
        return f"conversation {conversation_id!r}"

    def _check(self, reply: Reply, conversation_id: str, item_id: Optional[str] = None) -> None:
        status = reply[0] if reply else None
        if status == b"ok":
            return
        where = self._where(conversation_id)
        if status == b"nf":
            raise SessionError(ErrorCode.CONVERSATION_NOT_FOUND, f"{where} does not exist")
        if status == b"inf":
            raise SessionError(ErrorCode.CONVERSATION_ITEM_NOT_FOUND, f"{where} has no item {item_id!r}")
        if status == b"nc":
            raise SessionError(ErrorCode.INPUT_INVALID, f"after: {where} never held that item")
        if status == b"dup":
            taken = (reply[1] or b"").decode("utf-8", "replace")
            raise SessionError(ErrorCode.STORE_CONFLICT, f"{where} already has an item {taken!r}")
        if status == b"exists":
            raise SessionError(ErrorCode.STORE_CONFLICT, f"{where} already exists")
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{where} does not parse (script replied {status!r})")

    def _int(self, value: Optional[bytes], conversation_id: str) -> int:
        try:
            return int(value or b"")
        except ValueError:
            raise SessionError(ErrorCode.RECORD_CORRUPT,
                               f"{self._where(conversation_id)}: {value!r} is not an integer") from None

    def _conversation(self, conversation_id: str, created: Optional[bytes], meta: Optional[bytes]) -> Conversation:
        try:
            metadata = _METADATA.decode(meta or b"")
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise SessionError(ErrorCode.RECORD_CORRUPT,
                               f"{self._where(conversation_id)}: its metadata does not decode: {exc}") from None
        return Conversation(id=conversation_id, created_at=self._int(created, conversation_id), metadata=metadata)

    # -- the backend ---------------------------------------------------------------
    async def _write(self, name: str, conversation_id: str, args: Sequence[Arg]) -> Reply:
        return await self._run(name, self.keys.conversation(conversation_id), [_arg(a) for a in args], True)

    async def _read(self, name: str, conversation_id: str, args: Sequence[Arg]) -> Reply:
        return await self._run(name, self.keys.conversation(conversation_id), [_arg(a) for a in args], False)

    @abstractmethod
    async def _run(self, name: str, key: str, args: list[bytes], write: bool) -> Reply:
        """Run ``lua/<name>.lua`` on ``key``: one atomic step."""


def _pairs(ids: list[str], entries: list[bytes]) -> list[Arg]:
    out: list[Arg] = []
    for item_id, entry in zip(ids, entries):
        out += [item_id, entry]
    return out
