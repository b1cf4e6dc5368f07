"""Item sessions: the Agents SDK's ``Session`` protocol on one Redis list per session.

A session is ONE key, ``<prefix>:{s:<id>}:items`` (:mod:`.header`, docs/key-layout.md):
its stash, its items, and its header last. Every write is one ``lua/items_*.lua`` script
on that key, through the session's edge (:mod:`..edge`): atomic on a standalone server
and on Redis Cluster alike, checks first and writes last, so a refused call writes
nothing. Reads are plain ``LRANGE``\\ s: the newest items and the header come back in one
command, so ``get_items(limit)`` is one round trip; a read checks the header's data
format and sizes itself by its largest entry (:data:`.header.READ_BYTES` a command), and
a longer read goes in pages that start over if the list was rewritten meanwhile (pops,
compactions and clears bump the header's ``g`` or ``e``; appends only add at the end).

Every write is idempotent: it carries a token in its ARGV, which the header's ring
remembers with what the write answered (lua/tokens.lua), so a script redis-py re-sends
after a lost reply answers what the first run did; a re-sent pop finds its item in the
stash. A session object also remembers, per task (per thread on the sync API), the
token of a write whose outcome is unknown, and re-uses it when that task repeats the
same call (:class:`..tokens.Pending`): a caller's retry is exactly-once too.
``add_items(..., idempotency_key=...)`` makes any caller's retry safe.

Bounded work per call, by count as well as by bytes, whatever the session's length: an
add, compaction or fork writes at most ``MAX_BATCH_ITEMS`` items and ``max_batch_bytes``
(past either it is refused before anything is written); a pop drops at most
``SCAN_LIMIT`` non-items and then calls again; reads go in pages. A session holds any
number of items, as the SDK's does, unless ``max_items`` bounds it.

Items are encoded on the way in and decoded into fresh dicts on the way out, so no
caller reaches stored state through an object it passed or got back. An entry that is
not an item of this format, or does not decode, is skipped by reads and dropped by pops.

The constructor and ``from_url`` take the SDK's names (``redis_client``, ``ttl``,
``session_settings``) beside this package's options, and ``close()``, ``ping()`` and the
errors behave as the SDK's do: code written for ``agents.extensions.memory.RedisSession``
works with only the import changed (``tests/sdk_upstream`` runs the SDK's own tests).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, TypeVar, Union, cast

import msgspec

from .. import telemetry, validate
from ..budget import bounded
from ..client import without_decode
from ..codec import FORMAT, MARK, decode_item, encode_items, is_value, pack, plain_size
from ..edge import Edge, failed
from ..errors import ErrorCode, SessionError
from ..ids import validate_id
from ..keys import KeySpace
from ..limits import UNSET, _Unset
from ..link import AnyRedis, RedisLink
from ..models import Item
from ..options import Configured, SessionOptions
from ..replication import ReplicaAcks
from ..scripts import script
from ..tokens import Pending, keyed_token, new_token
from . import header as hd
from .header import Header

if TYPE_CHECKING:
    # Typing only: the public methods use the SDK's item type so a session type-checks as
    # ``agents.memory.Session``; at runtime items are plain dicts (``models.Item``).
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings

_ADD, _POP, _CLEAR = script("items_add"), script("items_pop"), script("items_clear")
_FORK, _COMPACT = script("items_fork"), script("items_compact")
SCRIPTS = (_ADD, _POP, _CLEAR, _FORK, _COMPACT)
FIRST_ENTRIES = 16
"""The newest entries a full read takes with the header in its first command: a session
that short is read in one round trip; a longer one is then read from its start, in pages
sized by the header's largest entry."""
MAX_RESTARTS = 8
"""Times a paged read starts over because the list was rewritten under it, before giving up."""

S = TypeVar("S", bound="RedisSession")
Entries = list[bytes]
_PLAIN = bytes((MARK, FORMAT << 4))
"""How a stored item without compression starts: its body is its msgpack, decoded here at
once; any other entry goes through codec.decode_item (its checks, its errors)."""
_ITEM = msgspec.msgpack.Decoder(Item)


class Snapshot(msgspec.Struct, frozen=True, kw_only=True):
    """A session's valid items, and what guards a later :meth:`RedisSession.replace_prefix`:
    ``count``, the stored entries read (corrupt ones included, so a replacement covers
    exactly them), and the header's version, epoch and rewrites when they were read."""

    items: list[Item]
    count: int
    version: int
    epoch: str
    rewrites: int


def coerce_settings(settings: Union["SessionSettings", dict[str, Any], None]) -> Optional["SessionSettings"]:
    """SessionSettings or its dict form, as the SDK's own sessions take them (None stays
    None: the SDK's default, made on first access). A dict the SDK refuses (an unknown
    key) is ``session.input.invalid``, a ``TypeError`` as the SDK's refusal is; so is a
    dict without the SDK installed to read it."""
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


def resolve_limit(limit: Optional[int], settings: Optional["SessionSettings"]) -> Optional[int]:
    """An explicit limit wins; otherwise the session settings' limit; None means all."""
    if limit is None and settings is not None:
        limit = getattr(settings, "limit", None)
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise SessionError(ErrorCode.INPUT_INVALID, f"limit must be an int or None, got {limit!r}")
    return max(0, limit)


def _timeout(options: Mapping[str, Any]) -> Optional[float]:
    """The budget ``options`` give, checked: for a link built before its session."""
    return SessionOptions.of(**{k: v for k, v in options.items() if k in SessionOptions.__struct_fields__}).timeout


def _restless(where: str) -> SessionError:
    return SessionError(ErrorCode.STORE_CONFLICT,
                        f"{where} was rewritten {MAX_RESTARTS} times while it was being read; try again")


def _same(a: Header, b: Optional[Header]) -> bool:
    """Whether nothing but appends came between two reads of a header."""
    return b is not None and a.epoch == b.epoch and a.rewrites == b.rewrites


class RedisSession(Configured):
    """An Agents SDK session stored in Redis or Redis Cluster (``MemorySession``: the same
    on an in-process server).

    ``client`` (or ``redis_client``, the SDK's name) is a redis-py asyncio ``Redis`` or
    ``RedisCluster``, ``decode_responses=True`` or not; the session never closes a client
    it was given. ``from_url`` builds its own, one per event loop, which ``close()``
    closes (the session then raises ``session.client.closed``, a ``RuntimeError``, as the
    SDK's does). ``ttl`` is the SDK's name for ``ttl_seconds`` (one or the other; neither:
    30 days; None: no expiry); ``session_settings`` is ``SessionSettings`` or its dict form.

    ``options``: :class:`..options.SessionOptions` (``key_prefix``, ``ttl_seconds``,
    ``sliding_ttl``, ``compression``, ``max_item_bytes``, ``max_batch_bytes``,
    ``max_items``, ``timeout``, ``replica_acks``, ``replica_ack_timeout``), each also an
    attribute of the session. ``max_items``: the most items the session may hold (None,
    the default: no bound, as the SDK's sessions have none); a write that would pass it
    is ``session.input.invalid`` and writes nothing (a compaction only if it grows the
    session). ``replica_acks=N``: every write returns once N replicas have it.
    """

    OPTIONS = SessionOptions

    def __init__(self, session_id: str, *, client: Optional[AnyRedis] = None, redis_client: Optional[AnyRedis] = None,
                 link: Optional[RedisLink] = None, session_settings: Union["SessionSettings", dict[str, Any], None] = None,
                 ttl: Union[float, None, _Unset] = UNSET, **options: Any) -> None:
        self.session_id = validate_id(session_id, "session id")
        if not isinstance(ttl, _Unset):
            if "ttl_seconds" in options:
                raise SessionError(ErrorCode.INPUT_INVALID, "pass ttl_seconds or ttl (the Agents SDK's name for it), "
                                   "not both")
            validate.ttl_ms(ttl, "ttl")
            options["ttl_seconds"] = ttl
        self.options = opts = SessionOptions.of(**options)
        if redis_client is not None:
            if client is not None:
                raise SessionError(ErrorCode.INPUT_INVALID, "pass client or redis_client (the Agents SDK's name for "
                                   "it), not both")
            client = redis_client
        self.link = link if link is not None else RedisLink(client, timeout=opts.timeout, raw_replies=True)
        self.link.owner = "RedisSession"
        self.timeout = self.link.timeout
        """Seconds one call may take in total (None: no budget)."""
        self.edge = Edge(self.link, ReplicaAcks.of(opts.replica_acks, opts.replica_ack_timeout))
        self._session_settings = coerce_settings(session_settings)
        self._ttl_ms, self._slide_ms = opts.ttl_ms, opts.slide_ms
        self._blind = max(1, min(hd.READ_ENTRIES, hd.READ_BYTES // (opts.max_item_bytes + 2)))
        """Entries a read takes before it knows the largest: each at most max_item_bytes."""
        self._name(self.session_id)

    def _name(self, session_id: str) -> None:
        self.session_id = session_id
        self._items_key = KeySpace(self.options.key_prefix).session_items(session_id)
        self._where = f"item session {self._items_key!r}"
        self._pending = Pending()
        """Per task, its last write on this object whose outcome is unknown."""

    @classmethod
    def from_url(cls: type[S], session_id: str, *, url: str, redis_kwargs: Optional[Mapping[str, Any]] = None,
                 cluster: Optional[bool] = None, **options: Any) -> S:
        """A session with its own client per event loop (a cluster client for
        ``redis+cluster://`` or ``cluster=True``); ``redis_kwargs`` go to redis-py, except
        ``decode_responses``, which the session has no use for (it reads undecoded replies
        either way). ``options``: the constructor's. No I/O."""
        link = RedisLink.to_url(url, cluster=cluster, timeout=_timeout(options), redis_kwargs=without_decode(redis_kwargs))
        return cls(session_id, link=link, **options)


    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.session_id!r}, key_prefix={self.options.key_prefix!r})"

    @property
    def client(self) -> AnyRedis:
        """The redis-py client this session uses on the running event loop."""
        return self.link.client

    @property
    def round_trips(self) -> int:
        """Calls made to Redis so far (each is one round trip); a fork shares its parent's count."""
        return self.edge.trips

    @property
    def session_settings(self) -> Optional["SessionSettings"]:
        """``SessionSettings`` as the SDK's sessions have them (``SessionSettings()`` by default,
        made on first access: importing the SDK takes a while)."""
        if self._session_settings is None:
            try:
                from agents.memory import SessionSettings
            except ImportError:  # the SDK is optional: without it there is no default to make
                return None
            self._session_settings = SessionSettings()
        return self._session_settings

    @session_settings.setter
    def session_settings(self, value: Union["SessionSettings", dict[str, Any], None]) -> None:
        self._session_settings = coerce_settings(value)

    async def close(self) -> None:
        """Close the client this session built (``from_url``) for the running event loop;
        the session is then closed on this loop, as the SDK's is: every call raises
        ``session.client.closed`` (a ``RuntimeError``). A second close does nothing. With a
        client you gave it, close() does nothing and the session stays usable. A fork
        shares its parent's client: closing either closes both."""
        await self.link.close()

    async def __aenter__(self: S) -> S:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- the Session protocol ----------------------------------------------------------
    @bounded
    async def get_items(self, limit: Optional[int] = None) -> list["TResponseInputItem"]:
        """The newest ``limit`` valid items (the session settings' limit if None; all if
        that is None too), oldest first. One round trip for a limit of up to 24 items at
        the default ``max_item_bytes`` (1 MiB); a full read takes one for a short session,
        two for a longer one whose entries fit ``READ_BYTES``, and one per page beyond."""
        want = resolve_limit(limit, self._session_settings)
        if want == 0:
            return []
        if want is None:
            head, entries = await self._everything()
            items = self._decode(entries)
        else:
            head, items = await self._newest(want)
        if self._slide_ms:
            await self._slide(head)
        return cast("list[TResponseInputItem]", items)

    @bounded
    async def add_items(self, items: list["TResponseInputItem"], *, idempotency_key: Optional[str] = None) -> None:
        """Append ``items`` atomically (all or none) in one round trip, setting the TTL.

        Every item is checked first (a dict with string keys, nested at most
        ``validate.MAX_NESTING`` deep, encodable, at most ``max_item_bytes``, and at most
        ``max_batch_bytes`` together, counted before compression); at most
        ``MAX_BATCH_ITEMS`` items per call, and ``max_items`` in the session: past any of
        them nothing is written. Exactly once under re-sends and caller retries;
        ``idempotency_key`` (an id) makes a retry from another process exactly-once too,
        while the session remembers it (at least 30 s of server time: :mod:`..tokens`)."""
        key = None if idempotency_key is None else validate_id(idempotency_key, "idempotency key")
        opts = self.options
        plain = encode_items(items, opts.max_item_bytes, opts.max_batch_bytes, hd.MAX_BATCH_ITEMS)
        if not plain:
            return
        if key is None:
            token = epoch = self._pending.token("add", plain)
        else:  # the body's fingerprint is of the items, not of one zstd build's bytes for them
            token, epoch = keyed_token(key, plain), new_token()
        entries = [pack(e, 0, opts.compression) for e in plain]
        await self._write("add", token, plain if key is None else None, _ADD,
                          [self._ttl_ms, epoch, token, opts.max_items or 0, *entries])

    @bounded
    async def pop_item(self) -> Optional["TResponseInputItem"]:
        """Remove and return the newest valid item (None when empty): one script call,
        unless it first meets more than ``SCAN_LIMIT`` non-items (each call drops at most
        that many) or an entry that only looked like an item (dropped; the pop repeats).
        Exactly once under re-sends and caller retries: a re-sent or retried pop returns
        the item the first one removed, and removes nothing more."""
        token = self._pending.token("pop", None)
        while True:
            got = await self._write("pop", token, None, _POP, [self._ttl_ms, token, hd.SCAN_LIMIT])
            if got is None:
                return None
            if isinstance(got, bytes):
                try:
                    return cast("TResponseInputItem", decode_item(got, self._where, self.options.max_item_bytes))
                except SessionError:
                    pass
            token = new_token()

    @bounded
    async def clear_session(self) -> None:
        """Remove every item in one atomic step. The key stays behind as a header (a new
        epoch, the token ring, no stash) for at most 30 s (``tokens.RETAIN_MS``, or the TTL
        if shorter), so that a write re-sent after the clear is still recognised instead of
        landing in the cleared session. A damaged session is deleted whole."""
        token = self._pending.token("clear", None)
        await self._write("clear", token, None, _CLEAR, [self._ttl_ms, token, token])

    async def ping(self) -> bool:
        """Whether Redis answers within the time budget, as the SDK's ``ping()``: False
        rather than an error, except on a closed session, which raises. What is asked is
        the node that holds the session (a cluster's ``PING`` would ask every node)."""
        self.link.check_open()
        try:
            await self._ping()
        except Exception as exc:  # the SDK's contract: any failure to reach Redis is False
            if isinstance(exc, SessionError) and exc.code is ErrorCode.CLIENT_CLOSED:
                raise
            return False
        return True

    @bounded
    async def _ping(self) -> None:
        await self.edge.command("EXISTS", self._items_key, where=self._where)

    # -- beyond the protocol -----------------------------------------------------------
    @bounded
    async def fork(self: S, new_session_id: str, *, upto: Optional[int] = None) -> S:
        """Copy the first ``upto`` valid items (all if None) into a new session and return it.

        The copy is read consistently, at one version of this session (recorded as the new
        session's ``forked_at``); the new session is created by one script that refuses
        (``session.store.conflict``) if its id holds items. It copies what one
        ``add_items`` may write, at most ``MAX_BATCH_ITEMS`` items (and ``max_items``) and
        ``max_batch_bytes`` (``session.input.invalid`` / ``session.record.too_large`` past
        them: fork a prefix with ``upto``), and reads no further than that. Two sessions
        are two cluster slots, so the read and the write are two steps: writes to this
        session after the read are not in the fork. The fork has this session's class and
        settings, and shares its client (and so its ``close()``)."""
        validate_id(new_session_id, "session id")
        validate.optional_integer(upto, "upto")
        if new_session_id == self.session_id:
            raise SessionError(ErrorCode.STORE_CONFLICT, f"cannot fork session {new_session_id!r} onto itself")
        opts = self.options
        most = min(hd.MAX_BATCH_ITEMS, opts.max_items or hd.MAX_BATCH_ITEMS)
        want = most + 1 if upto is None else min(upto, most + 1)
        copied: Entries = []
        size = [0]

        def enough(entries: Entries, start: int) -> bool:
            if start == 0:  # a read that starts (over)
                copied.clear()
                size[0] = 0
            for entry in entries[start:]:
                if len(copied) == want or size[0] > opts.max_batch_bytes:
                    break
                if self._decode([entry]):
                    copied.append(entry)
                    size[0] += plain_size(entry)
            return len(copied) == want or size[0] > opts.max_batch_bytes

        head, _ = await self._everything(enough, want)
        await self._slide(head)
        if len(copied) > most:
            bound = "in one call" if most == hd.MAX_BATCH_ITEMS else f"in a session of max_items={opts.max_items}"
            raise SessionError(ErrorCode.INPUT_INVALID, f"a fork of {self._where} copies more than {most} items, at "
                               f"most {most} {bound}; fork a prefix with upto")
        if size[0] > opts.max_batch_bytes:  # before compression, as every limit counts
            raise SessionError(ErrorCode.RECORD_TOO_LARGE, f"a fork of {self._where} copies more than "
                               f"{opts.max_batch_bytes} bytes (max_batch_bytes); fork a prefix with upto")
        target = copy.copy(self)
        target._name(new_session_id)
        token = self._pending.token("fork", new_session_id)
        version = head.version if head is not None else 0
        created = await target._write("fork", token, new_session_id, _FORK,
                                      [self._ttl_ms, token, self.session_id, version, token, *copied], self)
        if not created:
            raise SessionError(ErrorCode.STORE_CONFLICT, f"session {new_session_id!r} already exists")
        return target

    @bounded
    async def snapshot(self) -> Snapshot:
        """Every valid item and the guard for :meth:`replace_prefix`, read consistently."""
        head, entries = await self._everything()
        await self._slide(head)
        if head is None:
            return Snapshot(items=[], count=0, version=0, epoch="", rewrites=0)
        return Snapshot(items=self._decode(entries), count=len(entries), version=head.version,
                        epoch=head.epoch.decode("utf-8", "surrogateescape"), rewrites=head.rewrites)

    @bounded
    async def replace_prefix(self, snapshot: Snapshot, items: list[Any]) -> bool:
        """Replace the entries ``snapshot`` read with ``items``, keeping later appends.

        Atomic, and only if nothing but appends happened since the snapshot (no pop,
        clear, compaction or expiry); returns False and changes nothing otherwise.
        ``items`` are checked as :meth:`add_items` checks them."""
        if not isinstance(snapshot, Snapshot):
            raise SessionError(ErrorCode.INPUT_INVALID, f"snapshot must be a Snapshot, got {type(snapshot).__name__}")
        validate.integer(snapshot.count, "snapshot.count")
        validate.integer(snapshot.rewrites, "snapshot.rewrites")
        if not isinstance(snapshot.epoch, str):
            raise SessionError(ErrorCode.INPUT_INVALID, f"snapshot.epoch must be a str, got {snapshot.epoch!r}")
        opts = self.options
        entries = [pack(e, 0, opts.compression)
                   for e in encode_items(items, opts.max_item_bytes, opts.max_batch_bytes, hd.MAX_BATCH_ITEMS)]
        try:  # snapshots decode the stored epoch with surrogateescape: any other lone surrogate never was one
            epoch = snapshot.epoch.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            return False
        if not epoch:
            return False
        what = (snapshot.epoch, snapshot.rewrites, snapshot.count, entries)
        token = self._pending.token("compact", what)
        return bool(await self._write("compact", token, what, _COMPACT, [self._ttl_ms, epoch, snapshot.rewrites,
                                                                         snapshot.count, token, opts.max_items or 0,
                                                                         *entries]))

    @bounded
    async def _atomic_replace_items(self, items: list["TResponseInputItem"]) -> bool:
        """Replace the whole history with ``items`` in one step: the hook the Agents SDK's
        ``OpenAIResponsesCompactionSession`` calls (as on the SDK's own ``RedisSession``)
        instead of a clear and an add with a gap between them.

        Like the SDK's, False (the caller then clears and adds through the subclass) when
        a subclass overrides a ``Session`` method, whose storage this must not bypass.
        Items are checked before anything is written. The entries read are replaced by
        :meth:`replace_prefix`, so an append that lands meanwhile stays after ``items``; a
        pop, clear or compaction meanwhile makes it read again (``MAX_RESTARTS`` times)."""
        if any(getattr(type(self), name) is not getattr(RedisSession, name) for name in _STORAGE_METHODS):
            return False
        opts = self.options
        encode_items(items, opts.max_item_bytes, opts.max_batch_bytes, hd.MAX_BATCH_ITEMS)  # checks only
        for _ in range(MAX_RESTARTS):
            snapshot = await self.snapshot()
            if not snapshot.epoch:  # no session: nothing to replace
                await self.add_items(items)
                return True
            if await self.replace_prefix(snapshot, items):
                return True
        raise _restless(self._where)

    # -- writes ------------------------------------------------------------------------
    async def _write(self, operation: str, token: bytes, what: object, lua: Any, args: list[Any],
                     caller: Optional["RedisSession"] = None) -> Any:
        """One write script on this session's key; a call whose outcome is unknown is
        remembered for the same task's retry (by ``caller``'s record: a fork's source's)."""
        try:
            return await self.edge.run(lua, (self._items_key,), args, where=self._where, write=True)
        except BaseException as exc:
            (caller or self)._pending.failed(operation, token, what, exc)
            raise

    # -- reads -------------------------------------------------------------------------
    def _decode(self, entries: Entries) -> list[Item]:
        """The entries that are items of this format and decode, in order (the usual
        entries, whole and plain, decoded in one comprehension: a read's hot loop)."""
        where, limit = self._where, self.options.max_item_bytes
        if telemetry.active is not None:  # the plain entries skip codec.decode_item, which counts the others
            for entry in entries:
                if entry[:2] == _PLAIN:
                    telemetry.active.read(len(entry), len(entry) - 2)
        try:
            return [_ITEM.decode(memoryview(entry)[2:]) if entry[:2] == _PLAIN else decode_item(entry, where, limit)
                    for entry in entries]
        except (SessionError, msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            pass
        items = []
        for entry in entries:
            if is_value(entry):
                try:
                    items.append(decode_item(entry, where, limit))
                except SessionError:
                    continue
        return items

    async def _lrange(self, start: int, stop: int) -> Entries:
        try:
            return cast(Entries, await self.edge.call("LRANGE", self._items_key, start, stop))
        except Exception as exc:
            raise failed(exc, self._where) from None

    async def _check(self, last: Any, first: Any = None) -> Header:
        """The header ``last`` (the list's last entry), or the refusal (:func:`.header.parse`;
        ``first``, the list's first entry, read here when it is needed and not given)."""
        if not hd.is_header(last) and first is None:
            first = await self._lrange(0, 0)
            first = first[0] if first else None
        return hd.parse(last, self._where, first)

    async def _last(self) -> Optional[Header]:
        """The header as it is now (None: no session)."""
        last = await self._lrange(-1, -1)
        return await self._check(last[0]) if last else None

    async def _tail(self, count: int) -> tuple[Optional[Header], Entries, bool]:
        """One LRANGE of the header and the ``count`` entries before the ring (oldest
        first), and whether they are all the session's items."""
        part = await self._lrange(-(count + 2), -1)
        if not part:
            return None, [], True
        last = part[-1]
        head = hd.try_parse(last) if type(last) is bytes else None
        if head is None:  # the refusal, which may need the first entry to say which
            head = await self._check(last, part[0] if len(part) < count + 2 else None)
        entries = part[:-2]
        if len(entries) >= head.count:
            return head, entries[len(entries) - head.count:], True
        return head, entries, False

    async def _newest(self, want: int) -> tuple[Optional[Header], list[Item]]:
        """The newest ``want`` valid items: one LRANGE, unless the session holds more than
        that many entries of which too few are items, or ``want`` is past what one read
        takes before it knows the largest entry; then page by page from the newest back."""
        head, entries, whole = await self._tail(min(want, self._blind))
        items = self._decode(entries)
        if head is None or whole or len(items) >= want:
            return head, items[-want:]
        for _ in range(MAX_RESTARTS):
            # The items the header counted, by index from the newest back: appends after it
            # move none of them; anything else changes e or g, as the header read after says.
            pages: list[list[Item]] = []
            end, found = head.count + 1, 0
            while end >= 2 and found < want:
                start = max(2, end - self._page(head.largest) + 1)
                pages.append(self._decode(await self._lrange(start, end)))
                found += len(pages[-1])
                end = start - 1
            now = await self._last()
            if now is None or _same(head, now):
                return now, [item for page in reversed(pages) for item in page][-want:]
            head = now
        raise _restless(self._where)

    async def _everything(self, enough: Optional[Callable[[Entries, int], bool]] = None, want: int = 0
                          ) -> tuple[Optional[Header], Entries]:
        """Every entry of the session, oldest first, read consistently, and the header last
        read; or, with ``enough(entries, start)`` (called after each part with where it
        starts in them, 0 for a read that starts over), the entries up to where it says,
        read ``want`` at a time at most (what it will likely need)."""
        head, entries, whole = await self._tail(min(FIRST_ENTRIES, self._blind))
        if whole or head is None:
            if enough is not None:
                enough(entries, 0)
            return head, entries
        for _ in range(MAX_RESTARTS):
            # Pages by index from the first item; the last one reads on through the ring and
            # the header, which say whether anything but appends came meanwhile.
            entries = []
            while True:
                count, start = self._page(head.largest), len(entries)
                if want:
                    count = min(count, max(FIRST_ENTRIES, want - start))
                last = start + count >= head.count
                part = await self._lrange(start + 2, -1 if last else start + count + 1)
                now: Optional[Header] = None
                if last and part:
                    now = await self._check(part[-1])
                    part = part[:-2]
                entries.extend(part)
                stop = enough is not None and enough(entries, start)
                if not last and not stop and len(part) == count:
                    continue
                if not last:  # stopped early, or the list got shorter under the read
                    now = await self._last()
                if now is None or _same(head, now):
                    return now, entries if now is not None else []
                head = now
                break
        raise _restless(self._where)

    async def _slide(self, head: Optional[Header]) -> None:
        """``sliding_ttl``: give a session that was read its TTL again. A command of its own,
        sent once the read found a session of this format: a refused read writes nothing."""
        if head is not None and self._slide_ms:
            await self.edge.command("PEXPIRE", self._items_key, self._slide_ms, where=self._where)

    def _page(self, largest: int) -> int:
        """Entries one LRANGE of a paged read takes, the session's largest entry being ``largest``."""
        return max(1, min(hd.READ_ENTRIES, hd.READ_BYTES // max(largest, 1)))


_STORAGE_METHODS = ("get_items", "add_items", "pop_item", "clear_session")
