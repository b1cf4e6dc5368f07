"""What every item session does, written once; the backends only move bytes.

A session is an ordered list of encoded items (msgspec msgpack, oldest first)
and a small meta record, stored under one hash tag (:mod:`redis_sessions.keys`)
so every operation is one script on one Redis Cluster slot:

- ``v``, the version: bumped by every mutation (append, pop, compaction).
- ``e``, the epoch: a random value set when the session is created. Clear,
  expiry, and a pop or compaction that empties the list delete the session,
  so a recreated session always has a new epoch.
- ``g``, the rewrite count: bumped by every mutation that is not a pure
  append (pop, compaction).

Compaction reads (items, N entries, e, g) and later replaces entries
``0..N-1`` only if e and g are unchanged: appends only ever add at the tail,
so those entries are exactly what was read. The epoch is what makes this safe
across a clear: a counter alone restarts with the recreated session, and a
stale compaction could then rewrite a different history (ABA).

Meta exists iff the item list does, and every write sets the same TTL on both
keys in the same script, so a session expires as a whole.

Stored entries are bytes; items are encoded on the way in and decoded into
fresh dicts on the way out, so no caller can reach stored state through an
object it passed in or got back. An entry that does not decode (written by
something else, or damaged) is skipped by reads and dropped by pops; it never
counts toward a limit.

Subclasses implement the ``_eng_*`` primitives; :mod:`.memory` in-process,
:mod:`.redis` with the ``lua/items_*.lua`` scripts.
"""

from __future__ import annotations

import secrets
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Optional, TypeVar, Union, cast

import msgspec

from .. import validate
from ..codec import decode_item, encode
from ..errors import ErrorCode, SessionError
from ..ids import validate_id
from ..keys import DEFAULT_PREFIX, KeySpace
from ..models import Item
from ..redis_client import bounded

if TYPE_CHECKING:
    # Typing only: the public methods use the SDK's item type so a session type-checks
    # as ``agents.memory.Session``; at runtime items are plain dicts (``models.Item``).
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings

MAX_ITEM_BYTES = 1 << 20
_MAP_HEADERS = frozenset(range(0x80, 0x90)) | {0xDE, 0xDF}

S = TypeVar("S", bound="ItemSession")


class RawSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """Every stored entry of a session as read in one atomic step."""

    entries: list[bytes]
    version: int = 0
    epoch: str = ""
    rewrites: int = 0


class Snapshot(msgspec.Struct, frozen=True, kw_only=True):
    """A session's valid items plus what guards a later prefix replacement.

    ``count`` is the number of stored entries read (corrupt ones included), so
    a replacement covers exactly them.
    """

    items: list[Item]
    count: int
    version: int
    epoch: str
    rewrites: int


def new_epoch() -> str:
    return secrets.token_hex(8)


def plausible(entry: bytes) -> bool:
    """The cheap check the Lua scripts make: does the entry start like a msgpack map?"""
    return bool(entry) and entry[0] in _MAP_HEADERS


def coerce_settings(settings: Union["SessionSettings", dict[str, Any], None]) -> Optional["SessionSettings"]:
    """Accept SessionSettings or its dict form, as the SDK's own sessions do."""
    if isinstance(settings, dict):
        from agents.memory.session_settings import coerce_session_settings

        return coerce_session_settings(settings)
    return settings


def resolve_limit(limit: Optional[int], settings: Optional["SessionSettings"]) -> Optional[int]:
    """An explicit limit wins; otherwise the session settings' limit; None means all."""
    if limit is None and settings is not None:
        limit = getattr(settings, "limit", None)
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise SessionError(ErrorCode.INPUT_INVALID, f"limit must be an int or None, got {limit!r}")
    return max(0, limit)


def encode_items(items: object, max_item_bytes: int) -> list[bytes]:
    """Validate and encode a whole batch before anything is written."""
    if not isinstance(items, list):
        raise SessionError(ErrorCode.INPUT_INVALID, f"items must be a list, got {type(items).__name__}")
    out: list[bytes] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise SessionError(ErrorCode.INPUT_INVALID, f"item {index} must be a dict, got {type(item).__name__}")
        for key in item:
            if not isinstance(key, str):
                raise SessionError(ErrorCode.INPUT_INVALID, f"item {index} has a non-string key {key!r}")
        data = encode(item)
        if len(data) > max_item_bytes:
            raise SessionError(
                ErrorCode.RECORD_TOO_LARGE,
                f"item {index} encodes to {len(data)} bytes, the limit is {max_item_bytes}",
            )
        out.append(data)
    return out


def decode_entries(entries: list[bytes], where: str) -> tuple[list[Item], int]:
    """The items that decode, in order, and how many entries did not."""
    try:
        return [decode_item(entry, where) for entry in entries], 0
    except SessionError:
        pass
    items: list[Item] = []
    for entry in entries:
        try:
            items.append(decode_item(entry, where))
        except SessionError:
            continue
    return items, len(entries) - len(items)


class ItemSession(ABC):
    """The Agents SDK ``Session`` protocol over one backend's primitives."""

    session_id: str
    session_settings: Optional["SessionSettings"]
    timeout: Optional[float] = None
    """Seconds one call may take in total (Redis sessions; None: no budget)."""

    def __init__(
        self,
        session_id: str,
        *,
        key_prefix: str = DEFAULT_PREFIX,
        ttl_seconds: Optional[float] = None,
        session_settings: Union["SessionSettings", dict[str, Any], None] = None,
        sliding_ttl: bool = False,
        max_item_bytes: int = MAX_ITEM_BYTES,
    ) -> None:
        self.session_id = validate_id(session_id, "session id")
        self.session_settings = coerce_settings(session_settings)
        self.key_prefix = key_prefix
        self.ttl_seconds = ttl_seconds
        self.sliding_ttl = validate.flag(sliding_ttl, "sliding_ttl")
        self.max_item_bytes = validate.integer(max_item_bytes, "max_item_bytes", minimum=1, maximum=64 << 20)
        keys = KeySpace(key_prefix)
        self._items_key = keys.session_items(session_id)
        self._meta_key = keys.session_meta(session_id)
        self._ttl_ms = validate.ttl_ms(ttl_seconds)
        self._slide_ms = self._ttl_ms if sliding_ttl else 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.session_id!r}, key_prefix={self.key_prefix!r})"

    def _options(self) -> dict[str, Any]:
        """The settings a fork inherits."""
        return dict(key_prefix=self.key_prefix, ttl_seconds=self.ttl_seconds, session_settings=self.session_settings,
                    sliding_ttl=self.sliding_ttl, max_item_bytes=self.max_item_bytes)

    # -- the Session protocol ----------------------------------------------
    @bounded
    async def get_items(self, limit: Optional[int] = None) -> list["TResponseInputItem"]:
        """The newest ``limit`` valid items (session settings' limit if None), oldest first.

        One round trip; a second one (reading everything) only if an entry that
        looked like an item fails to decode.
        """
        want = resolve_limit(limit, self.session_settings)
        if want == 0:
            return []
        items, bad = decode_entries(await self._eng_tail(want), self._items_key)
        if bad and want is not None:
            items, _ = decode_entries(await self._eng_tail(None), self._items_key)
            items = items[-want:]
        return cast("list[TResponseInputItem]", items)

    @bounded
    async def add_items(self, items: list["TResponseInputItem"]) -> None:
        """Append ``items`` atomically (all or none) in one round trip, setting the TTL.

        Every item is validated first (a dict with string keys, encodable, at
        most ``max_item_bytes``); a bad one raises and nothing is written.
        """
        entries = encode_items(items, self.max_item_bytes)
        if entries:
            await self._eng_add(entries)

    @bounded
    async def pop_item(self) -> Optional["TResponseInputItem"]:
        """Remove and return the newest valid item (None when empty), in one script call.

        Garbage met on the way is dropped by the same call; an entry that only
        looked valid is dropped too and the pop repeats.
        """
        while True:
            entry = await self._eng_pop()
            if entry is None:
                return None
            try:
                return cast("TResponseInputItem", decode_item(entry, self._items_key))
            except SessionError:
                continue

    @bounded
    async def clear_session(self) -> None:
        """Delete the whole session (items and meta) in one atomic step."""
        await self._eng_clear()

    # -- beyond the protocol ------------------------------------------------
    @bounded
    async def fork(self: S, new_session_id: str, *, upto: Optional[int] = None) -> S:
        """Copy the first ``upto`` valid items (all if None) into a new session and return it.

        The copy is a consistent snapshot of this session at one version (read
        in one atomic step; the version is recorded as ``forked_at`` in the new
        session's meta). The new session is created in one atomic step that
        refuses (``session.store.conflict``) if a session with that id already
        exists. The two steps are separate because the two sessions live in
        different cluster slots: writes to this session after the read are not
        in the fork. The fork has the same class and settings, and is
        independent of this session afterwards.
        """
        validate_id(new_session_id, "session id")
        if upto is not None and (isinstance(upto, bool) or not isinstance(upto, int) or upto < 0):
            raise SessionError(ErrorCode.INPUT_INVALID, f"upto must be a non-negative int or None, got {upto!r}")
        if new_session_id == self.session_id:
            raise SessionError(ErrorCode.STORE_CONFLICT, f"cannot fork session {new_session_id!r} onto itself")
        target = self._spawn(new_session_id)
        raw = await self._eng_read()
        entries = [e for e in raw.entries if _decodes(e, self._items_key)]
        if upto is not None:
            entries = entries[:upto]
        if not await target._eng_create(entries, self.session_id, raw.version):
            raise SessionError(ErrorCode.STORE_CONFLICT, f"session {new_session_id!r} already exists")
        return target

    @bounded
    async def snapshot(self) -> Snapshot:
        """Every valid item plus the guard for :meth:`replace_prefix`, read atomically."""
        raw = await self._eng_read()
        items, _ = decode_entries(raw.entries, self._items_key)
        return Snapshot(
            items=items, count=len(raw.entries), version=raw.version, epoch=raw.epoch, rewrites=raw.rewrites
        )

    @bounded
    async def replace_prefix(self, snapshot: Snapshot, items: list[Any]) -> bool:
        """Replace the entries ``snapshot`` read with ``items``, keeping later appends.

        Atomic, and only if nothing but appends happened since the snapshot
        (no pop, clear, compaction or expiry); returns False and changes
        nothing otherwise. ``items`` are validated like :meth:`add_items`.
        """
        entries = encode_items(items, self.max_item_bytes)
        if not snapshot.epoch:
            return False
        return await self._eng_replace_prefix(snapshot, entries)

    # -- backend primitives (each one atomic) -------------------------------
    @abstractmethod
    def _spawn(self: S, session_id: str) -> S:
        """A session of the same class and settings on the same backend."""

    @abstractmethod
    async def _eng_add(self, entries: list[bytes]) -> None: ...

    @abstractmethod
    async def _eng_tail(self, want: Optional[int]) -> list[bytes]:
        """The newest ``want`` plausible entries (all entries if None), oldest first."""

    @abstractmethod
    async def _eng_pop(self) -> Optional[bytes]: ...

    @abstractmethod
    async def _eng_clear(self) -> None: ...

    @abstractmethod
    async def _eng_read(self) -> RawSnapshot: ...

    @abstractmethod
    async def _eng_create(self, entries: list[bytes], source_id: str, source_version: int) -> bool: ...

    @abstractmethod
    async def _eng_replace_prefix(self, snapshot: Snapshot, entries: list[bytes]) -> bool: ...


def _decodes(entry: bytes, where: str) -> bool:
    try:
        decode_item(entry, where)
    except SessionError:
        return False
    return True
