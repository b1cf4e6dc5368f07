"""Item sessions in Redis: every primitive is one ``lua/items_*.lua`` script call on ONE key.

A session is one list, ``<prefix>:{s:<session id>}:items`` (see
:mod:`redis_sessions.keys` and :mod:`.header`), so each script touches one
key in one cluster slot: it runs atomically on a standalone server and on
Redis Cluster alike, and during a slot migration it follows ``ASK`` instead
of failing with ``TRYAGAIN`` as a two-key script would. ``fork`` is the one
operation that spans two sessions, hence two slots; see
:meth:`ItemSession.fork` for what it guarantees.

Every script is sent with ``lua/items_lib.lua`` in front of it (the header
codec and the token ring; Redis scripts cannot load one another).

Every command asks redis-py for the reply undecoded (``NEVER_DECODE``), so a
client made with ``decode_responses=True`` works too, through its own pool and
connections (no second client): the session reads the same bytes either way.

The constructor and ``from_url`` take the Agents SDK's ``RedisSession``
arguments beside this package's names, and ``close()``, ``ping()`` and the
errors behave as the SDK's do, so code written for
``agents.extensions.memory.RedisSession`` works with only the import changed
(``tests/sdk_upstream`` runs the SDK's own tests against this class).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence, Union, cast

import msgspec
from redis import exceptions as rx
from redis.client import NEVER_DECODE
from redis.utils import HIREDIS_AVAILABLE

from ..errors import ErrorCode, SessionError
from ..keys import DEFAULT_PREFIX
from ..budget import DEFAULT_TIMEOUT
from ..link import AnyRedis, RedisLink, io
from ..errors import translate_errors
from ..client import without_decode
from ..edge import Edge
from ..replication import DEFAULT_ACK_TIMEOUT, ReplicaAcks
from ..limits import UNSET
from ..scripts import Script, script
from . import header as hd
from ..limits import MAX_BATCH_BYTES, MAX_ITEM_BYTES
from .base import TTL, ItemSession, PopReply, RawSnapshot, Snapshot, TailSlice, plausible

if TYPE_CHECKING:
    from agents.memory import SessionSettings


ItemsScript = script


_ADD = ItemsScript("items_add")
_GET = ItemsScript("items_get")
_POP = ItemsScript("items_pop")
_CLEAR = ItemsScript("items_clear")
_READ = ItemsScript("items_read")
_FORK = ItemsScript("items_fork")
_COMPACT = ItemsScript("items_compact")
SCRIPTS = (_ADD, _GET, _POP, _CLEAR, _READ, _FORK, _COMPACT)
_WRITES = frozenset((_ADD, _POP, _CLEAR, _FORK, _COMPACT))
"""The scripts that replica_acks waits for (a sliding TTL's refresh on a read is not waited for)."""

# With hiredis parsing replies in C, a plain LRANGE of the newest entries beats the
# script's packed reply (measured, get_items(limit=20): 10.4k vs 7.4k ops/s); with
# redis-py's Python parser, one packed bulk reply beats 20 (7.7k vs 6.9k ops/s).
_PLAIN_READS = HIREDIS_AVAILABLE


# items_get and items_read reply with one msgpack array of bin values (see frame() in items_lib.lua).
_FRAMES = msgspec.msgpack.Decoder(list[bytes])


class RedisSession(ItemSession):
    """An Agents SDK session stored in Redis or Redis Cluster.

    ``client`` (or ``redis_client``, the SDK's name) is a redis-py asyncio
    ``Redis`` or ``RedisCluster``, ``decode_responses=True`` or not; the
    session never closes a client it was given, and ``close()`` leaves it
    usable. ``from_url`` builds its own client, one per event loop; ``close()``
    closes the running loop's one, after which the session raises
    ``session.client.closed`` (a ``RuntimeError``, as the SDK's does) on that loop.

    ``replica_acks=N`` (default 0): every write (add, pop, clear, fork, compaction)
    returns only once N replicas have it, else ``session.backend.not_replicated``
    after ``replica_ack_timeout`` seconds; see :mod:`redis_sessions.replication`.
    """

    def __init__(
        self,
        session_id: str,
        *,
        client: Optional[AnyRedis] = None,
        redis_client: Optional[AnyRedis] = None,
        key_prefix: str = DEFAULT_PREFIX,
        ttl_seconds: TTL = UNSET,
        ttl: TTL = UNSET,
        session_settings: Union["SessionSettings", dict[str, Any], None] = None,
        sliding_ttl: bool = False,
        max_item_bytes: int = MAX_ITEM_BYTES,
        max_batch_bytes: int = MAX_BATCH_BYTES,
        compression: bool = True,
        max_items: Optional[int] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        link: Optional[RedisLink] = None,
        replica_acks: int = 0,
        replica_ack_timeout: float = DEFAULT_ACK_TIMEOUT,
    ) -> None:
        if redis_client is not None:
            if client is not None:
                raise SessionError(ErrorCode.INPUT_INVALID,
                                   "pass client or redis_client (the Agents SDK's name for it), not both")
            client = redis_client
        self.link = link if link is not None else RedisLink(client, timeout=timeout, raw_replies=True)
        self.link.owner = "RedisSession"
        self.timeout = self.link.timeout
        super().__init__(
            session_id,
            key_prefix=key_prefix,
            ttl_seconds=ttl_seconds,
            ttl=ttl,
            session_settings=session_settings,
            sliding_ttl=sliding_ttl,
            max_item_bytes=max_item_bytes,
            max_batch_bytes=max_batch_bytes,
            compression=compression,
            max_items=max_items,
        )
        self._keys = (self._items_key,)
        self._acks = ReplicaAcks.of(replica_acks, replica_ack_timeout)
        self._where = f"item session {session_id!r}"

    @classmethod
    def from_url(
        cls,
        session_id: str,
        *,
        url: str,
        redis_kwargs: Optional[Mapping[str, Any]] = None,
        session_settings: Union["SessionSettings", dict[str, Any], None] = None,
        cluster: Optional[bool] = None,
        key_prefix: str = DEFAULT_PREFIX,
        ttl_seconds: TTL = UNSET,
        ttl: TTL = UNSET,
        sliding_ttl: bool = False,
        max_item_bytes: int = MAX_ITEM_BYTES,
        max_batch_bytes: int = MAX_BATCH_BYTES,
        compression: bool = True,
        max_items: Optional[int] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        replica_acks: int = 0,
        replica_ack_timeout: float = DEFAULT_ACK_TIMEOUT,
    ) -> RedisSession:
        """A session with its own client per event loop (a cluster client for
        ``redis+cluster://`` or ``cluster=True``); ``redis_kwargs`` go to redis-py,
        except ``decode_responses``, which the session has no use for (it reads
        undecoded replies either way). ``replica_acks``: see the constructor. No I/O."""
        link = RedisLink.to_url(url, cluster=cluster, timeout=timeout, redis_kwargs=without_decode(redis_kwargs))
        return cls(
            session_id,
            link=link,
            key_prefix=key_prefix,
            ttl_seconds=ttl_seconds,
            ttl=ttl,
            session_settings=session_settings,
            sliding_ttl=sliding_ttl,
            max_item_bytes=max_item_bytes,
            max_batch_bytes=max_batch_bytes,
            compression=compression,
            max_items=max_items,
            replica_acks=replica_acks,
            replica_ack_timeout=replica_ack_timeout,
        )

    @property
    def client(self) -> AnyRedis:
        """The redis-py client this session uses on the running event loop."""
        return self.link.client

    async def close(self) -> None:
        """Close the client this session built (``from_url``) for the running event
        loop; the session is then closed on this loop, as the SDK's is: every call
        raises ``session.client.closed`` (a ``RuntimeError``). A second close does
        nothing. With a client you gave it, close() does nothing and the session
        stays usable. A fork shares its parent's client: closing either closes both."""
        await self.link.close()

    def _check_open(self) -> None:
        self.link.check_open()

    def _spawn(self, session_id: str) -> RedisSession:
        # A fork shares this session's link (same client(s), same budget) and so its closing.
        fork = RedisSession(session_id, link=self.link, **self._options())
        fork._acks = self._acks
        return fork

    async def _call(self, lua: Script, args: Sequence[Any]) -> Any:
        return await Edge(self.link, self._acks).run(lua, self._keys, args, where=self._where, write=lua in _WRITES)

    def _frames(self, blob: object) -> list[bytes]:
        try:
            frames = _FRAMES.decode(cast(bytes, blob))
        except (msgspec.DecodeError, TypeError) as exc:
            raise SessionError(ErrorCode.RECORD_CORRUPT, f"{self._where}: unreadable script reply: {exc}") from None
        if len(frames) < 3:
            raise SessionError(ErrorCode.RECORD_CORRUPT, f"{self._where}: a script reply is too short")
        return frames

    async def _lrange(self, start: int, stop: int) -> list[bytes]:
        try:
            reply = self.link.client.execute_command("LRANGE", self._items_key, start, stop, **{NEVER_DECODE: []})
            # redis_client.io, inlined (a hot read): a sync client's call returned the reply
            return cast("list[bytes]", await reply if hasattr(type(reply), "__await__") else reply)
        except Exception:
            async with translate_errors(self._where):
                raise

    # -- reads without a script, when hiredis parses replies -----------------------
    async def _newest(self, want: int) -> list[bytes]:
        if _PLAIN_READS and not self._slide_ms and want < hd.SCAN_LIMIT and self._plain_fits(want + 1):
            # One LRANGE of the newest want+1 entries: if all of them came back, the
            # oldest is dropped (the header, or an item older than the newest want);
            # otherwise the list was shorter and index 0 is the header (or, in a list
            # from before headers, an item), and index 1 may be the stash. Kept if
            # every entry looks like an item; otherwise items_get skips the garbage.
            entries = await self._lrange(-(want + 1), -1)
            if len(entries) > want:
                entries = entries[1:]
            elif entries and hd.is_header(entries[0]):
                entries = self._after_header(entries)
            if all(map(plausible, entries)):
                return entries
        return await super()._newest(want)

    async def _all_entries(self) -> list[bytes]:
        if _PLAIN_READS and not self._slide_ms and self._plain_fits(hd.SCAN_LIMIT + 1):
            entries = await self._lrange(0, hd.SCAN_LIMIT)
            if len(entries) <= hd.SCAN_LIMIT:  # the whole list, in one command
                if entries and hd.is_header(entries[0]):
                    entries = self._after_header(entries)
                return entries
        return await super()._all_entries()

    def _plain_fits(self, entries: int) -> bool:
        """Whether a plain LRANGE of ``entries`` stays within a read's bytes whatever they
        hold (items of this session's max_item_bytes): else the scripts read, bounded."""
        return entries * self.max_item_bytes <= hd.READ_BYTES

    def _after_header(self, entries: list[bytes]) -> list[bytes]:
        """A list read from index 0 with a header there: the entries after the header
        (checked) and the stash (index 1, when there is one)."""
        hd.parse(entries[0], self._where)
        return entries[2:] if len(entries) > 1 and hd.is_stash(entries[1]) else entries[1:]

    async def _eng_ping(self) -> None:
        try:
            await io(self.link.client.ping())
        except Exception:
            async with translate_errors(self._where):
                raise

    # -- the scripts ------------------------------------------------------------
    async def _eng_add(self, entries: list[bytes], token: bytes, epoch: bytes) -> int:
        return int(await self._call(_ADD, [self._ttl_ms, epoch, token, self._cap, *entries]))

    async def _eng_tail(self, want: int, stop: int, budget: int) -> TailSlice:
        frames = self._frames(await self._call(_GET, [want, stop, budget, self._slide_ms]))
        return TailSlice(frames[3:], frames[0], self._int(frames[1]), self._int(frames[2]))

    async def _eng_page(self, start: int, count: int) -> RawSnapshot:
        frames = self._frames(await self._call(_READ, [start, count, self._slide_ms]))
        return RawSnapshot(entries=frames[4:], version=self._int(frames[0]), epoch=frames[1],
                           rewrites=self._int(frames[2]), more=frames[3] == b"1")

    async def _eng_pop(self, token: bytes, epoch: bytes, limit: int) -> PopReply:
        return cast(PopReply, await self._call(_POP, [self._ttl_ms, epoch, token, limit]))

    async def _eng_clear(self, token: bytes, epoch: bytes) -> int:
        return int(await self._call(_CLEAR, [self._ttl_ms, epoch, token]))

    async def _eng_create(self, entries: list[bytes], source_id: str, source_version: int, token: bytes,
                          epoch: bytes) -> bool:
        args = [self._ttl_ms, epoch, source_id, source_version, token, *entries]
        return bool(await self._call(_FORK, args))

    async def _eng_replace_prefix(self, snapshot: Snapshot, entries: list[bytes], token: bytes) -> bool:
        epoch = snapshot.epoch.encode("utf-8", "surrogateescape")
        args = [self._ttl_ms, epoch, snapshot.rewrites, snapshot.count, token, self._cap, *entries]
        return bool(await self._call(_COMPACT, args))

    @property
    def _cap(self) -> int:
        """max_items as the scripts take it: 0 for none."""
        return self.max_items or 0

    def _int(self, value: bytes) -> int:
        try:
            return int(value)
        except ValueError:
            raise SessionError(ErrorCode.RECORD_CORRUPT, f"{self._where}: a counter is not an integer: {value!r}") from None
