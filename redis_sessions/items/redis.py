"""Item sessions in Redis: every primitive is one ``lua/items_*.lua`` script call.

Both keys of a session share the hash tag ``{s:<session id>}`` (see
:mod:`redis_sessions.keys`), so each script touches one cluster slot and runs
atomically on a standalone server and on Redis Cluster alike. ``fork`` is the
one operation that spans two sessions, hence two slots; see
:meth:`ItemSession.fork` for what it guarantees.

The client must return bytes (the default; not ``decode_responses=True``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence, Union, cast

import msgspec
from redis.utils import HIREDIS_AVAILABLE

from ..errors import ErrorCode, SessionError
from ..keys import DEFAULT_PREFIX
from ..redis_client import DEFAULT_TIMEOUT, AnyRedis, RedisLink, as_text, translate_errors
from ..scripts import LuaScript, script
from .base import MAX_ITEM_BYTES, ItemSession, RawSnapshot, Snapshot, new_epoch

if TYPE_CHECKING:
    from agents.memory import SessionSettings

_ADD = script("items_add")
_GET = script("items_get")
_POP = script("items_pop")
_CLEAR = script("items_clear")
_READ = script("items_read")
_FORK = script("items_fork")
_COMPACT = script("items_compact")

# With hiredis parsing replies in C, a plain LRANGE of the newest entries beats the
# script's packed reply (measured, get_items(limit=20): 10.4k vs 7.4k ops/s); with
# redis-py's Python parser, one packed bulk reply beats 20 (7.7k vs 6.9k ops/s).
_PLAIN_READS = HIREDIS_AVAILABLE

# The first byte of a msgpack map (fixmap, map16, map32): what an encoded item starts with.
_MAP_STARTS = frozenset(bytes([b]) for b in (*range(0x80, 0x90), 0xDE, 0xDF))

# items_get replies with one msgpack array of bin values (see the script).
_FRAMES = msgspec.msgpack.Decoder(list[bytes])


class RedisSession(ItemSession):
    """An Agents SDK session stored in Redis or Redis Cluster.

    ``client`` is a redis-py asyncio ``Redis`` or ``RedisCluster``; the
    session never closes a client it was given. ``from_url`` builds (and
    ``close`` then closes) its own.
    """

    def __init__(
        self,
        session_id: str,
        *,
        client: Optional[AnyRedis] = None,
        key_prefix: str = DEFAULT_PREFIX,
        ttl_seconds: Optional[float] = None,
        session_settings: Union["SessionSettings", dict[str, Any], None] = None,
        sliding_ttl: bool = False,
        max_item_bytes: int = MAX_ITEM_BYTES,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        link: Optional[RedisLink] = None,
    ) -> None:
        self.link = link if link is not None else RedisLink(client, timeout=timeout)
        self.timeout = self.link.timeout
        super().__init__(
            session_id,
            key_prefix=key_prefix,
            ttl_seconds=ttl_seconds,
            session_settings=session_settings,
            sliding_ttl=sliding_ttl,
            max_item_bytes=max_item_bytes,
        )
        self._keys = (self._items_key, self._meta_key)
        self._where = f"item session {session_id!r}"
        self._pop_args = [self._ttl_ms] if self._ttl_ms else []

    @classmethod
    def from_url(
        cls,
        session_id: str,
        *,
        url: str,
        cluster: Optional[bool] = None,
        key_prefix: str = DEFAULT_PREFIX,
        ttl_seconds: Optional[float] = None,
        session_settings: Union["SessionSettings", dict[str, Any], None] = None,
        sliding_ttl: bool = False,
        max_item_bytes: int = MAX_ITEM_BYTES,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        redis_kwargs: Optional[Mapping[str, Any]] = None,
    ) -> RedisSession:
        """A session with its own client per event loop (a cluster client for
        ``redis+cluster://`` or ``cluster=True``); ``redis_kwargs`` go to redis-py. No I/O."""
        link = RedisLink.to_url(url, cluster=cluster, timeout=timeout, redis_kwargs=redis_kwargs)
        return cls(
            session_id,
            link=link,
            key_prefix=key_prefix,
            ttl_seconds=ttl_seconds,
            session_settings=session_settings,
            sliding_ttl=sliding_ttl,
            max_item_bytes=max_item_bytes,
        )

    @property
    def client(self) -> AnyRedis:
        """The redis-py client this session uses on the running event loop."""
        return self.link.client

    async def close(self) -> None:
        """Close the client if this session built it (``from_url``); otherwise do nothing."""
        await self.link.close()

    def _spawn(self, session_id: str) -> RedisSession:
        # A fork shares this session's link: same client(s), same budget; closing either closes it.
        return RedisSession(session_id, link=self.link, **self._options())

    async def _call(self, lua: LuaScript, args: Sequence[Any]) -> Any:
        try:
            return await lua(self.link.client, self._keys, args)
        except Exception:
            # Only the failure path pays for the context manager.
            async with translate_errors(self._where):
                raise

    async def _eng_add(self, entries: list[bytes]) -> None:
        await self._call(_ADD, [self._ttl_ms, new_epoch(), *entries])

    async def _eng_tail(self, want: Optional[int]) -> list[bytes]:
        if _PLAIN_READS and not self._slide_ms:
            # The usual case needs no script: one plain LRANGE, kept if every entry
            # looks like an encoded item. Otherwise items_get skips the garbage and
            # reads further back, in one call.
            try:
                entries = cast("list[bytes]", await self.link.client.lrange(self._items_key, 0 if want is None else -want, -1))
            except Exception:
                async with translate_errors(self._where):
                    raise
            if want is None or all(e[:1] in _MAP_STARTS for e in entries):
                return entries
        args = [-1 if want is None else want]
        if self._slide_ms:
            args.append(self._slide_ms)
        blob = await self._call(_GET, args)
        try:
            return _FRAMES.decode(blob)
        except (msgspec.DecodeError, TypeError) as exc:
            raise SessionError(ErrorCode.RECORD_CORRUPT, f"{self._where}: unreadable reply from items_get: {exc}") from None

    async def _eng_pop(self) -> Optional[bytes]:
        result: Optional[bytes] = await self._call(_POP, self._pop_args)
        return result

    async def _eng_clear(self) -> None:
        await self._call(_CLEAR, [])

    async def _eng_read(self) -> RawSnapshot:
        reply = await self._call(_READ, [self._slide_ms])
        return RawSnapshot(entries=reply[3:], version=int(reply[0]), epoch=as_text(reply[1]), rewrites=int(reply[2]))

    async def _eng_create(self, entries: list[bytes], source_id: str, source_version: int) -> bool:
        return bool(await self._call(_FORK, [self._ttl_ms, new_epoch(), source_id, source_version, *entries]))

    async def _eng_replace_prefix(self, snapshot: Snapshot, entries: list[bytes]) -> bool:
        args = [self._ttl_ms, snapshot.epoch, snapshot.rewrites, snapshot.count, *entries]
        return bool(await self._call(_COMPACT, args))
