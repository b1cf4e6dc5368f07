"""What every item session does, written once; the backends only move bytes.

A session is ONE Redis list, ``<prefix>:{s:<id>}:items`` (see
:mod:`redis_sessions.keys`): a header at index 0 holding the metadata and the
token ring (:mod:`.header`), then the encoded items (msgspec msgpack), oldest
first. One key expires, is evicted, purged and migrated whole, and every
operation is one script on that one key:

- ``v``, the version: bumped by every write.
- ``e``, the epoch: a random value set when the session is created, cleared,
  or forked onto. A session that expired and is written again is created
  anew, so it has a new epoch too.
- ``g``, the rewrite count: bumped by every write that is not a pure append
  (pop, compaction, clear).

Compaction reads (items, N items, e, g) and later replaces items ``1..N``
only if e and g are unchanged: appends only ever add at the tail, so those
items are exactly what was read. The epoch is what makes this safe across a
clear or an expiry: a counter alone could come back to the same value (ABA).

Every write is idempotent. It carries a token made here, per call, and sent
in the script's ARGV, so redis-py re-sending a command whose reply was lost
(on a new connection, or as EVAL after NOSCRIPT) carries the same one; the
script finds it in the ring, writes nothing and replies what the first run
replied (:mod:`redis_sessions.tokens`: the one mechanism of every store, tokens
kept 30 s). A session object also remembers, per task, the token of a write
whose outcome is unknown (a lost reply, a timeout, a cancellation) and re-uses
it if that task's next write on the object is the same operation with the same
arguments (``add_items`` with the same encoded items, ``pop_item``, a fork to
the same id, a replacement of the same snapshot with the same items), so a
caller that retries after a ``session.backend.*`` error gets exactly-once too;
two coroutines' calls are never merged. ``add_items(..., idempotency_key=...)``
makes any caller's retry safe, and refuses the key with another body
(``session.idempotency.key_reused``). So that a late re-send still finds its
token, a session that a pop or a compaction empties keeps its header for its
TTL (30 s without one; an add with no TTL then makes it permanent again), and a
cleared one for at most 30 s.

Every argument is checked here, before anything is sent (items: dicts with
string keys, nested at most ``validate.MAX_NESTING`` deep, each at most
``max_item_bytes`` and all at most ``max_batch_bytes`` encoded); every script
checks everything before its first write, so a refused call writes nothing.

Bounded work per script call, by count as well as by bytes, whatever the
session's length: one ``add_items``, compaction or fork writes at most
``MAX_BATCH_ITEMS`` items (10,000) and ``max_batch_bytes``; past either a call is
refused (``session.input.invalid``, 400; bytes ``session.record.too_large``)
before anything is written. A session holds any number of items, as the Agents
SDK's does (``max_items`` bounds it, refused the same way): a write touches the
list's ends and its header only, a pop drops at most ``SCAN_LIMIT`` non-items per
call and the Python side calls again, reads scan or return at most ``SCAN_LIMIT``
entries per call, and long reads (everything, snapshots, forks) go page by page,
each page returning (e, g) so the read starts over if the list was rewritten
between pages. A clear or a compaction frees what it removes in its one script
(``lua/items_compact.lua`` says why): its time grows with those bytes, not their
count. A pop keeps its item in the stash at index 1, not in the header (see
:mod:`.header`), so later writes never carry it.

Stored entries are bytes; items are encoded on the way in and decoded into
fresh dicts on the way out, so no caller can reach stored state through an
object it passed in or got back. An entry that does not decode (written by
something else, or damaged) is skipped by reads and dropped by pops; it never
counts toward a limit.

Subclasses implement the ``_eng_*`` primitives; :mod:`.memory` in-process,
:mod:`.redis` with the ``lua/items_*.lua`` scripts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional, TypeVar, Union, cast

import msgspec

from .. import validate
from ..codec import decode_item, encode_items, is_value, pack, plain_size
from ..errors import ErrorCode, SessionError
from ..ids import validate_id
from ..keys import DEFAULT_PREFIX, KeySpace
from ..models import Item
from ..budget import bounded
from ..limits import DEFAULT_TTL_SECONDS, MAX_BATCH_BYTES, MAX_ITEM_BYTES, UNSET, _Unset
from ..tokens import Pending, keyed_token, new_token
from . import header as hd

if TYPE_CHECKING:
    # Typing only: the public methods use the SDK's item type so a session type-checks
    # as ``agents.memory.Session``; at runtime items are plain dicts (``models.Item``).
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings

MAX_RESTARTS = 8
"""Times a paged read starts over because the list was rewritten under it, before giving up."""

S = TypeVar("S", bound="ItemSession")
TTL = Union[float, None, _Unset]
"""A TTL argument: seconds, None (never expire) or UNSET (not given: ``DEFAULT_TTL_SECONDS``)."""

PopReply = Union[bytes, None, int]
"""A pop script's reply: the entry, None (nothing to pop), or 1 (dropped its limit of non-items; call again)."""


class RawSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """Stored entries (items, not the header) and the header's counters, as read; ``more``:
    a page that entries follow (pages are bounded by count and by bytes)."""

    entries: list[bytes]
    version: int = 0
    epoch: bytes = b""
    rewrites: int = 0
    more: bool = False


class TailSlice(NamedTuple):
    """One items_get call: plausible entries (oldest first), e and g, and where to continue (-1: done)."""

    entries: list[bytes]
    epoch: bytes
    rewrites: int
    next: int


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


new_epoch = new_token
"""A write that creates a session, clears it or forks onto it uses its token as the new
epoch too (a random value, new per write; a retry that re-uses the token is the same
write). Only a caller's idempotency key, which may come back after the session
expired, gets a fresh epoch."""


def plausible(entry: bytes) -> bool:
    """The cheap check the Lua scripts make: does the entry start as a stored value of this
    data format does (codec.MARK, then the format)?"""
    return is_value(entry)


def coerce_settings(settings: Union["SessionSettings", dict[str, Any], None]) -> Optional["SessionSettings"]:
    """Accept SessionSettings or its dict form, as the SDK's own sessions do (None stays
    None: the default, made on first access by :func:`default_settings`). A dict the SDK
    refuses (an unknown key) is ``session.input.invalid``, which is a ``TypeError`` as the
    SDK's refusal is; so is a dict without the SDK installed to read it."""
    if not isinstance(settings, dict):
        return settings
    try:
        from agents.memory.session_settings import coerce_session_settings
    except ImportError:
        raise SessionError(ErrorCode.INPUT_INVALID, "session_settings as a dict needs the Agents SDK "
                           "(openai-agents); without it, pass an object with a limit attribute") from None
    try:
        return coerce_session_settings(settings)
    except (TypeError, ValueError) as exc:
        raise SessionError(ErrorCode.INPUT_INVALID, f"session_settings: {exc}") from None


def default_settings() -> Optional["SessionSettings"]:
    """``SessionSettings()``, the SDK's default, when the SDK is installed. Made only when
    someone reads ``session_settings``: importing the SDK (and openai) takes seconds, which
    a worker that never touches the SDK should not pay on its first session."""
    try:
        from agents.memory import SessionSettings
    except ImportError:  # the SDK is optional: without it there are no settings to default to
        return None
    return SessionSettings()


def resolve_ttl(ttl_seconds: TTL, ttl: TTL) -> tuple[Optional[float], str]:
    """The TTL from this package's ``ttl_seconds`` or the Agents SDK's ``ttl`` (one of
    them), and the name it came by; neither means ``DEFAULT_TTL_SECONDS``."""
    if isinstance(ttl, _Unset):
        return (DEFAULT_TTL_SECONDS if isinstance(ttl_seconds, _Unset) else ttl_seconds), "ttl_seconds"
    if not isinstance(ttl_seconds, _Unset):
        raise SessionError(ErrorCode.INPUT_INVALID, "pass ttl_seconds or ttl (the Agents SDK's name for it), not both")
    return ttl, "ttl"


def resolve_limit(limit: Optional[int], settings: Optional["SessionSettings"]) -> Optional[int]:
    """An explicit limit wins; otherwise the session settings' limit; None means all."""
    if limit is None and settings is not None:
        limit = getattr(settings, "limit", None)
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise SessionError(ErrorCode.INPUT_INVALID, f"limit must be an int or None, got {limit!r}")
    return max(0, limit)


def decode_entries(entries: list[bytes], where: str, limit: int) -> tuple[list[Item], int]:
    """The items that decode (each expanding to at most ``limit`` bytes), in order, and how
    many entries did not."""
    try:
        return [decode_item(entry, where, limit) for entry in entries], 0
    except SessionError:
        pass
    items: list[Item] = []
    for entry in entries:
        try:
            items.append(decode_item(entry, where, limit))
        except SessionError:
            continue
    return items, len(entries) - len(items)


def _restless(where: str) -> SessionError:
    return SessionError(ErrorCode.STORE_CONFLICT,
                        f"{where} was rewritten {MAX_RESTARTS} times while it was being read; try again")


class ItemSession(ABC):
    """The Agents SDK ``Session`` protocol over one backend's primitives.

    The constructor takes the SDK's names beside this package's: ``ttl`` for
    ``ttl_seconds`` (one or the other; given neither, ``DEFAULT_TTL_SECONDS``,
    30 days; None: no expiry), and ``session_settings`` as ``SessionSettings``
    or its dict form (``SessionSettings()`` when not given, as in the SDK).
    Errors where the SDK raises ``TypeError``, ``ValueError`` or ``RuntimeError``
    are also of that type (see :mod:`redis_sessions.errors`).

    ``max_items``: the most items the session may hold (None, the default: no
    bound, as the SDK's sessions have none); a write that would take it past them
    is ``session.input.invalid`` and writes nothing (a compaction only if it grows
    the session).
    """

    session_id: str
    _session_settings: Optional["SessionSettings"]
    timeout: Optional[float] = None
    """Seconds one call may take in total (Redis sessions; None: no budget)."""

    def __init__(
        self,
        session_id: str,
        *,
        key_prefix: str = DEFAULT_PREFIX,
        ttl_seconds: TTL = UNSET,
        ttl: TTL = UNSET,
        session_settings: Union["SessionSettings", dict[str, Any], None] = None,
        sliding_ttl: bool = False,
        max_item_bytes: int = MAX_ITEM_BYTES,
        max_batch_bytes: int = MAX_BATCH_BYTES,
        compression: bool = True,
        max_items: Optional[int] = None,
    ) -> None:
        self.session_id = validate_id(session_id, "session id")
        ttl_value, ttl_name = resolve_ttl(ttl_seconds, ttl)
        self._ttl_ms = validate.ttl_ms(ttl_value, ttl_name)
        self._session_settings = coerce_settings(session_settings)
        self.key_prefix = key_prefix
        self.ttl_seconds = ttl_value
        self.sliding_ttl = validate.flag(sliding_ttl, "sliding_ttl")
        self.max_item_bytes = validate.integer(max_item_bytes, "max_item_bytes", minimum=1, maximum=64 << 20)
        self.max_batch_bytes = validate.integer(max_batch_bytes, "max_batch_bytes", minimum=1, maximum=256 << 20)
        self.compression = validate.flag(compression, "compression")
        """Items of ``codec.COMPRESS_MIN_BYTES`` or more are stored zstd-compressed where that
        makes them smaller; a build before this one skips them: while one still reads the
        store, pass False."""
        self.max_items = validate.optional_integer(max_items, "max_items", minimum=1)
        """The most items the session may hold; None: any number, as the SDK's sessions."""
        self._items_key = KeySpace(key_prefix).session_items(session_id)
        self._slide_ms = self._ttl_ms if sliding_ttl else 0
        # Per task, its last write on this object whose outcome is unknown.
        self._pending = Pending()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.session_id!r}, key_prefix={self.key_prefix!r})"

    @property
    def session_settings(self) -> Optional["SessionSettings"]:
        """``SessionSettings`` as the SDK's sessions have them (``SessionSettings()`` by default)."""
        if self._session_settings is None:
            self._session_settings = default_settings()
        return self._session_settings

    @session_settings.setter
    def session_settings(self, value: Union["SessionSettings", dict[str, Any], None]) -> None:
        self._session_settings = coerce_settings(value)

    async def __aenter__(self: S) -> S:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Release what this session built (see the backend); a no-op here."""

    def _check_open(self) -> None:
        """Raise ``session.client.closed`` if the session was closed (a backend that can be)."""

    def _options(self) -> dict[str, Any]:
        """The settings a fork inherits."""
        return dict(key_prefix=self.key_prefix, ttl_seconds=self.ttl_seconds, session_settings=self._session_settings,
                    sliding_ttl=self.sliding_ttl, max_item_bytes=self.max_item_bytes,
                    max_batch_bytes=self.max_batch_bytes, compression=self.compression, max_items=self.max_items)

    def _token(self, operation: str, what: object) -> bytes:
        """The token for a write: the failed one's if this task repeats it, else a new one."""
        return self._pending.token(operation, what)

    # -- the Session protocol ----------------------------------------------
    @bounded
    async def get_items(self, limit: Optional[int] = None) -> list["TResponseInputItem"]:
        """The newest ``limit`` valid items (session settings' limit if None), oldest first.

        One round trip for a limit (more only past ``SCAN_LIMIT`` non-items,
        or for more than ``SCAN_LIMIT`` items), and a full read if an entry
        that looked like an item fails to decode. Without a limit, one round
        trip per ``SCAN_LIMIT`` entries.
        """
        self._check_open()
        want = resolve_limit(limit, self._session_settings)  # the default's limit is None: no import for it
        if want == 0:
            return []
        if want is None:
            items, _ = decode_entries(await self._all_entries(), self._items_key, self.max_item_bytes)
            return cast("list[TResponseInputItem]", items)
        items, bad = decode_entries(await self._newest(want), self._items_key, self.max_item_bytes)
        if bad:
            items, _ = decode_entries(await self._all_entries(), self._items_key, self.max_item_bytes)
            items = items[-want:]
        return cast("list[TResponseInputItem]", items)

    @bounded
    async def add_items(self, items: list["TResponseInputItem"], *, idempotency_key: Optional[str] = None) -> None:
        """Append ``items`` atomically (all or none) in one round trip, setting the TTL.

        Every item is validated first (a dict with string keys, nested at most
        ``validate.MAX_NESTING`` deep, encodable, at most ``max_item_bytes``,
        and at most ``max_batch_bytes`` together); a bad one raises and nothing
        is written. At most ``MAX_BATCH_ITEMS`` items per call, and the session's
        ``max_items`` (if set) in all: past either, ``session.input.invalid`` and
        nothing is written. Exactly once under re-sends and caller retries (see the
        module); ``idempotency_key`` (an id: no whitespace, control characters
        or braces) makes a retry from another process exactly-once too, while
        the session remembers it (at least 30 s of server time; :mod:`..tokens`).
        """
        self._check_open()
        key = None if idempotency_key is None else validate_id(idempotency_key, "idempotency key")
        plain = encode_items(items, self.max_item_bytes, self.max_batch_bytes, hd.MAX_BATCH_ITEMS)
        if not plain:
            return
        if key is None:
            token = epoch = self._token("add", plain)
        else:  # the body's fingerprint is of the items, not of one zstd build's bytes for them
            token, epoch = keyed_token(key, plain), new_epoch()
        entries = [pack(e, 0, self.compression) for e in plain]
        try:
            await self._eng_add(entries, token, epoch)
        except BaseException as exc:
            if key is None:
                self._pending.failed("add", token, plain, exc)
            raise

    @bounded
    async def pop_item(self) -> Optional["TResponseInputItem"]:
        """Remove and return the newest valid item (None when empty).

        One script call, unless it first meets more than ``SCAN_LIMIT``
        non-items (each call drops at most that many, then this calls again),
        or an entry that only looked valid (dropped; the pop repeats).
        Exactly once under re-sends and caller retries: a re-sent or retried
        pop returns the item the first one removed, and removes nothing more.
        """
        self._check_open()
        token = self._token("pop", None)
        while True:
            try:
                got = await self._eng_pop(token, token, hd.SCAN_LIMIT)
            except BaseException as exc:
                self._pending.failed("pop", token, None, exc)
                raise
            if got is None:
                return None
            if isinstance(got, bytes):
                try:
                    return cast("TResponseInputItem", decode_item(got, self._items_key, self.max_item_bytes))
                except SessionError:
                    pass
            token = new_token()

    @bounded
    async def clear_session(self) -> None:
        """Remove every item in one atomic step.

        The session's key stays behind as a header (a new epoch, the token
        ring without popped items) for at most ten minutes (``RETAIN_MS``, or
        the TTL if shorter), so that a write re-sent after the clear is still
        recognised instead of landing in the cleared session.
        """
        self._check_open()
        token = self._token("clear", None)
        try:
            await self._eng_clear(token, token)
        except BaseException as exc:
            self._pending.failed("clear", token, None, exc)
            raise

    async def ping(self) -> bool:
        """Whether the backend answers (within the time budget), as the SDK's ``ping()``:
        False rather than an error, except on a closed session, which raises."""
        self._check_open()
        try:
            await self._ping()
        except Exception as exc:  # the SDK's contract: any failure to reach Redis is False
            if isinstance(exc, SessionError) and exc.code is ErrorCode.CLIENT_CLOSED:
                raise
            return False
        return True

    @bounded
    async def _ping(self) -> None:
        await self._eng_ping()

    # -- beyond the protocol ------------------------------------------------
    @bounded
    async def fork(self: S, new_session_id: str, *, upto: Optional[int] = None) -> S:
        """Copy the first ``upto`` valid items (all if None) into a new session and return it.

        The copy is a consistent snapshot of this session at one version (read
        page by page, starting over if the session is rewritten meanwhile; the
        version is recorded as ``forked_at`` in the new session's header). The
        new session is created in one atomic step that refuses
        (``session.store.conflict``) if a session with that id holds items.
        A fork copies at most ``MAX_BATCH_ITEMS`` items (and ``max_items``) and
        ``max_batch_bytes``, as one ``add_items`` writes (``session.input.invalid`` /
        ``session.record.too_large`` past them: fork a prefix with ``upto``); it
        reads no further than it copies, or than it takes to refuse.
        The two steps are separate because the two sessions live in different
        cluster slots: writes to this session after the read are not in the
        fork. The fork has the same class and settings, and its items are
        independent of this session's afterwards (a Redis fork shares this
        session's client, and so its ``close()``).
        """
        self._check_open()
        validate_id(new_session_id, "session id")
        validate.optional_integer(upto, "upto")
        if new_session_id == self.session_id:
            raise SessionError(ErrorCode.STORE_CONFLICT, f"cannot fork session {new_session_id!r} onto itself")
        target = self._spawn(new_session_id)
        # One script carries the copy, as add_items does: read until it holds upto items,
        # or one past what it may copy, or more than max_batch_bytes (then it is refused).
        most = min(hd.MAX_BATCH_ITEMS, self.max_items or hd.MAX_BATCH_ITEMS)
        want = most + 1 if upto is None else min(upto, most + 1)
        entries: list[bytes] = []

        def enough(read: list[bytes], start: int) -> bool:
            if start == 0:  # a read that starts (over)
                entries.clear()
            for e in read[start:]:
                if len(entries) == want:
                    break
                if _decodes(e, self._items_key, self.max_item_bytes):
                    entries.append(e)
            return len(entries) == want or sum(map(plain_size, entries)) > self.max_batch_bytes

        raw = await self._read_all(enough)
        if len(entries) > most:
            bound = "in one call" if most == hd.MAX_BATCH_ITEMS else f"in a session of max_items={self.max_items}"
            raise SessionError(ErrorCode.INPUT_INVALID, f"a fork of {self._items_key} copies more than {most} "
                               f"items, at most {most} {bound}; fork a prefix with upto")
        if sum(map(plain_size, entries)) > self.max_batch_bytes:  # before compression, as every limit counts
            raise SessionError(ErrorCode.RECORD_TOO_LARGE, f"a fork of {self._items_key} copies more than "
                               f"{self.max_batch_bytes} bytes (max_batch_bytes); fork a prefix with upto")
        token = self._token("fork", new_session_id)
        try:
            created = await target._eng_create(entries, self.session_id, raw.version, token, token)
        except BaseException as exc:
            self._pending.failed("fork", token, new_session_id, exc)
            raise
        if not created:
            raise SessionError(ErrorCode.STORE_CONFLICT, f"session {new_session_id!r} already exists")
        return target

    @bounded
    async def snapshot(self) -> Snapshot:
        """Every valid item plus the guard for :meth:`replace_prefix`, read consistently."""
        self._check_open()
        raw = await self._read_all()
        items, _ = decode_entries(raw.entries, self._items_key, self.max_item_bytes)
        return Snapshot(items=items, count=len(raw.entries), version=raw.version,
                        epoch=raw.epoch.decode("utf-8", "surrogateescape"), rewrites=raw.rewrites)

    @bounded
    async def replace_prefix(self, snapshot: Snapshot, items: list[Any]) -> bool:
        """Replace the entries ``snapshot`` read with ``items``, keeping later appends.

        Atomic, and only if nothing but appends happened since the snapshot
        (no pop, clear, compaction or expiry); returns False and changes
        nothing otherwise. ``items`` are validated like :meth:`add_items`.
        """
        self._check_open()
        if not isinstance(snapshot, Snapshot):
            raise SessionError(ErrorCode.INPUT_INVALID, f"snapshot must be a Snapshot, got {type(snapshot).__name__}")
        validate.integer(snapshot.count, "snapshot.count")
        validate.integer(snapshot.rewrites, "snapshot.rewrites")
        if not isinstance(snapshot.epoch, str):
            raise SessionError(ErrorCode.INPUT_INVALID, f"snapshot.epoch must be a str, got {snapshot.epoch!r}")
        entries = [pack(e, 0, self.compression) for e in encode_items(items, self.max_item_bytes, self.max_batch_bytes, hd.MAX_BATCH_ITEMS)]
        if not snapshot.epoch or not _was_stored(snapshot.epoch):
            return False
        what = (snapshot.epoch, snapshot.rewrites, snapshot.count, entries)
        token = self._token("compact", what)
        try:
            return await self._eng_replace_prefix(snapshot, entries, token)
        except BaseException as exc:
            self._pending.failed("compact", token, what, exc)
            raise

    @bounded
    async def _atomic_replace_items(self, items: list["TResponseInputItem"]) -> bool:
        """Replace the whole history with ``items`` in one step: the hook the Agents
        SDK's ``OpenAIResponsesCompactionSession`` calls (as on the SDK's own
        ``RedisSession``) instead of a clear and an add with a gap between them.

        Like the SDK's, False (the caller then clears and adds through the
        subclass) when a subclass overrides a ``Session`` method, whose storage
        this must not bypass. Items are validated before anything is written.
        The entries read are replaced by :meth:`replace_prefix`, so an append
        that lands meanwhile stays after ``items``; a pop, clear or compaction
        meanwhile makes it read again (``MAX_RESTARTS`` times at most).
        """
        if _overrides_storage(type(self)):
            return False
        self._check_open()
        encode_items(items, self.max_item_bytes, self.max_batch_bytes, hd.MAX_BATCH_ITEMS)  # checks only: nothing to compress
        for _ in range(MAX_RESTARTS):
            snapshot = await self.snapshot()
            if not snapshot.epoch:
                if snapshot.count:  # a list from before headers: the caller's clear and add
                    return False
                await self.add_items(items)  # no session: nothing to replace
                return True
            if await self.replace_prefix(snapshot, items):
                return True
        raise _restless(self._items_key)

    # -- reads, page by page ----------------------------------------------------
    async def _newest(self, want: int) -> list[bytes]:
        """The newest ``want`` plausible entries, oldest first."""
        for _ in range(MAX_RESTARTS):
            first = await self._eng_tail(want, -1, hd.SCAN_LIMIT)
            if first.next < 0:
                return first.entries
            parts, have, more = [first.entries], len(first.entries), first
            while more.next >= 0 and have < want:
                more = await self._eng_tail(want - have, more.next, hd.SCAN_LIMIT)
                if (more.epoch, more.rewrites) != (first.epoch, first.rewrites):
                    break
                parts.append(more.entries)
                have += len(more.entries)
            else:
                return [entry for part in reversed(parts) for entry in part]
        raise _restless(self._items_key)

    async def _all_entries(self) -> list[bytes]:
        return (await self._read_all()).entries

    async def _read_all(self, enough: Optional[Callable[[list[bytes], int], bool]] = None) -> RawSnapshot:
        """Every stored item entry and the counters, consistent: pages from the oldest,
        starting over if e or g changed between pages. The version is the last page's:
        the entries read are exactly the list at that version (the first of them, when
        ``enough(entries, start)``, called after each page with where that page starts
        in them, 0 for a read's first, says so: ``more`` is then True)."""
        page = hd.SCAN_LIMIT
        for _ in range(MAX_RESTARTS):
            first = last = await self._eng_page(0, page)
            entries = list(first.entries)
            stop = enough is not None and enough(entries, 0)
            while last.more and not stop:
                last = await self._eng_page(len(entries), page)
                if (last.epoch, last.rewrites) != (first.epoch, first.rewrites):
                    break
                entries.extend(last.entries)
                stop = enough is not None and enough(entries, len(entries) - len(last.entries))
            else:
                return RawSnapshot(entries=entries, version=last.version, epoch=first.epoch, rewrites=first.rewrites,
                                   more=last.more)
        raise _restless(self._items_key)

    # -- backend primitives (each one atomic: one script) -------------------------
    @abstractmethod
    def _spawn(self: S, session_id: str) -> S:
        """A session of the same class and settings on the same backend."""

    @abstractmethod
    async def _eng_add(self, entries: list[bytes], token: bytes, epoch: bytes) -> int:
        """items_add: the version after the append (or after the first run, for a re-send)."""

    @abstractmethod
    async def _eng_tail(self, want: int, stop: int, budget: int) -> TailSlice:
        """items_get: up to ``want`` plausible entries from index ``stop`` back (-1: the newest)."""

    @abstractmethod
    async def _eng_page(self, start: int, count: int) -> RawSnapshot:
        """items_read: ``count`` entries from item ``start`` (0: the oldest)."""

    @abstractmethod
    async def _eng_pop(self, token: bytes, epoch: bytes, limit: int) -> PopReply: ...

    @abstractmethod
    async def _eng_clear(self, token: bytes, epoch: bytes) -> int: ...

    @abstractmethod
    async def _eng_create(self, entries: list[bytes], source_id: str, source_version: int, token: bytes,
                          epoch: bytes) -> bool: ...

    @abstractmethod
    async def _eng_replace_prefix(self, snapshot: Snapshot, entries: list[bytes], token: bytes) -> bool: ...

    @abstractmethod
    async def _eng_ping(self) -> None:
        """Reach the backend once (raises if it cannot)."""


_STORAGE_METHODS = ("get_items", "add_items", "pop_item", "clear_session")


def _was_stored(epoch: str) -> bool:
    """Could ``epoch`` have been read from a header? Snapshots decode stored bytes with
    surrogateescape, so any other lone surrogate never was: such a snapshot matches nothing."""
    try:
        epoch.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return False
    return True


def _overrides_storage(cls: type[ItemSession]) -> bool:
    return any(getattr(cls, name) is not getattr(ItemSession, name) for name in _STORAGE_METHODS)


def _decodes(entry: bytes, where: str, limit: int) -> bool:
    try:
        decode_item(entry, where, limit)
    except SessionError:
        return False
    return True
