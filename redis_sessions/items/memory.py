"""In-process item sessions: the same behaviour as Redis, for tests and single processes.

:class:`MemoryStore` holds what Redis would hold: per key, a list of bytes
(the header of :mod:`.header` at index 0, then the encoded items) and a
deadline in integer milliseconds. Each ``lua/items_*.lua`` script is mirrored
step for step by a method of the same name, over :class:`_Commands`, the few
Redis list commands the scripts call, with Redis's own rules: a list that
loses its last entry is deleted, a push creates a key without a TTL, and a
key lives through its deadline millisecond (it is gone once ``now_ms >
deadline_ms``). Every method runs under one lock, so it is atomic like a
script. Expiry is lazy, against the injected clock, and writes sweep expired
keys now and then; there is no timer thread. A differential test
(``tests/test_items_differential.py``) holds the two implementations together.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Union

from ..clock import Clock, system_clock
from ..errors import ErrorCode, SessionError
from ..keys import DEFAULT_PREFIX, KeySpace
from ..responses.protocol import UNSET
from . import header as hd
from .base import (
    MAX_BATCH_BYTES,
    MAX_ITEM_BYTES,
    TTL,
    ItemSession,
    PopReply,
    RawSnapshot,
    Snapshot,
    TailSlice,
    plausible,
)

if TYPE_CHECKING:
    from agents.memory import SessionSettings

_SWEEP_EVERY = 1024


@dataclass
class _Key:
    entries: list[bytes]
    deadline_ms: Optional[int] = None


def now_ms(seconds: float) -> int:
    """The clock in whole milliseconds, as Redis counts them."""
    return int(seconds * 1000)


class _Commands:
    """The Redis list commands the scripts use, on one store at one instant."""

    def __init__(self, keys: dict[str, _Key], now: int) -> None:
        self.keys = keys
        self.now = now

    def get(self, key: str) -> Optional[_Key]:
        rec = self.keys.get(key)
        if rec is not None and rec.deadline_ms is not None and self.now > rec.deadline_ms:
            del self.keys[key]
            return None
        return rec

    def llen(self, key: str) -> int:
        rec = self.get(key)
        return len(rec.entries) if rec else 0

    def lindex(self, key: str, index: int) -> Optional[bytes]:
        rec = self.get(key)
        if rec is None or not -len(rec.entries) <= index < len(rec.entries):
            return None
        return rec.entries[index]

    @staticmethod
    def _range(rec: _Key, start: int, stop: int) -> list[bytes]:
        n = len(rec.entries)
        start, stop = (start + n if start < 0 else start), (stop + n if stop < 0 else stop)
        start, stop = max(start, 0), min(stop, n - 1)
        return rec.entries[start:stop + 1] if start <= stop else []

    def lrange(self, key: str, start: int, stop: int) -> list[bytes]:
        rec = self.get(key)
        return [] if rec is None else self._range(rec, start, stop)

    def rpush(self, key: str, values: list[bytes]) -> None:
        rec = self.get(key)
        if rec is None:
            rec = self.keys[key] = _Key([])
        rec.entries.extend(values)

    def lpush(self, key: str, values: list[bytes]) -> None:
        rec = self.get(key)
        if rec is None:
            rec = self.keys[key] = _Key([])
        rec.entries[:0] = reversed(values)

    def lset(self, key: str, index: int, value: bytes) -> None:
        rec = self.get(key)
        assert rec is not None
        rec.entries[index] = value

    def ltrim(self, key: str, start: int, stop: int) -> None:
        rec = self.get(key)
        if rec is None:
            return
        rec.entries[:] = self._range(rec, start, stop)
        if not rec.entries:
            del self.keys[key]

    def delete(self, key: str) -> None:
        if self.get(key) is not None:
            del self.keys[key]

    def pexpire(self, key: str, ms: int) -> None:
        rec = self.get(key)
        if rec is not None:
            rec.deadline_ms = self.now + ms

    def persist(self, key: str) -> None:
        rec = self.get(key)
        if rec is not None:
            rec.deadline_ms = None


# -- items_lib.lua ---------------------------------------------------------------
def _load(r: _Commands, key: str) -> tuple[Optional[hd.Header], str]:
    first = r.lindex(key, 0)
    if first is None:
        return None, "none"
    if not hd.is_header(first):
        return None, "old"
    h = hd.try_parse(first)
    if h is None:
        return None, "corrupt"
    return h, ""


def _count(reply: PopReply) -> int:
    """An integer reply, as redis-py gives it (nil would be None; no write of these replies one)."""
    return reply if isinstance(reply, int) else 0


def _corrupt(where: str, what: str = "header") -> SessionError:
    return SessionError(ErrorCode.RECORD_CORRUPT, f"{where}: the session {what} does not parse")


def _clamp(n: int) -> int:
    return max(1, min(n, hd.SCAN_LIMIT))


def _save(r: _Commands, key: str, h: hd.Header) -> None:
    if h.new:
        r.lpush(key, [hd.dump(h)])
    else:
        r.lset(key, 0, hd.dump(h))


def _expire(r: _Commands, key: str, ttl: int, length: int, was_empty: bool) -> None:
    if ttl > 0:
        r.pexpire(key, ttl)
    elif length == 1:
        r.pexpire(key, hd.RETAIN_MS)
    elif was_empty:
        r.persist(key)


def _zero(e: bytes, where: str) -> tuple[Optional[hd.Header], int]:
    """Index 0: the header and 1, or (a list from before headers) None and 0."""
    if not hd.is_header(e):
        return None, 0
    return hd.parse(e, where), 1


class MemoryStore:
    """Sessions of one process, keyed like Redis keys. Safe to share between threads."""

    def __init__(self) -> None:
        self._keys: dict[str, _Key] = {}
        self._lock = threading.Lock()
        self._writes = 0

    def _commands(self, now: float) -> _Commands:
        return _Commands(self._keys, now_ms(now))

    def _wrote(self, r: _Commands) -> None:
        self._writes += 1
        if self._writes % _SWEEP_EVERY == 0:
            for key in list(self._keys):
                r.get(key)

    # -- the scripts, mirrored ----------------------------------------------
    def items_add(self, key: str, ttl: int, epoch: bytes, tok: bytes, entries: list[bytes], now: float,
                  where: str) -> int:
        with self._lock:
            r = self._commands(now)
            h, why = _load(r, key)
            if why == "corrupt":
                raise _corrupt(where)
            length = 0
            if h is not None:
                found = hd.find(h, tok)
                if found is False:
                    raise _corrupt(where, "token ring")
                if isinstance(found, bytes):
                    return _count(hd.replay(found, where))
                if ttl == 0:
                    length = r.llen(key)  # only a header-only key needs to know
            else:
                h = hd.fresh(epoch)
            h.version += 1
            if not hd.remember(h, tok, b"a%d" % h.version):
                raise _corrupt(where, "token ring")
            # writes
            r.rpush(key, entries)
            _save(r, key, h)
            _expire(r, key, ttl, 2, length == 1)
            self._wrote(r)
            return h.version

    def items_pop(self, key: str, ttl: int, epoch: bytes, tok: bytes, limit: int, now: float, where: str) -> PopReply:
        with self._lock:
            r = self._commands(now)
            limit = _clamp(limit)
            h, why = _load(r, key)
            if why == "corrupt":
                raise _corrupt(where)
            if why == "none":
                return None
            if h is not None:
                known = hd.find(h, tok)
                if known is False:
                    raise _corrupt(where, "token ring")
                if isinstance(known, bytes):
                    return hd.replay(known, where)
            length = r.llen(key)
            left = length - (1 if h is not None else 0)
            if left == 0:
                return None
            if h is None:
                h = hd.fresh(epoch)
            found: Optional[bytes] = None
            used, window = 0, 1
            while found is None and used < left and used < limit:
                take = min(window, left - used, limit - used)
                for e in reversed(r.lrange(key, -(used + take), -(used + 1))):
                    used += 1
                    if plausible(e):
                        found = e
                        break
                window *= 2
            result = b"i" if found is not None else (b"m" if used < left else b"n")
            h.version, h.rewrites = h.version + 1, h.rewrites + 1
            if not hd.remember(h, tok, result, found):
                raise _corrupt(where, "token ring")
            # writes
            if h.new:
                r.lpush(key, [hd.dump(h)])
                r.ltrim(key, 0, -(used + 1))
            else:
                r.ltrim(key, 0, -(used + 1))
                r.lset(key, 0, hd.dump(h))
            _expire(r, key, ttl, length - used + (1 if h.new else 0), False)
            self._wrote(r)
            if found is not None:
                return found
            return hd.replay(result, where)

    def items_clear(self, key: str, ttl: int, epoch: bytes, tok: bytes, now: float, where: str) -> int:
        with self._lock:
            r = self._commands(now)
            h, why = _load(r, key)
            if why == "none":
                return 0
            c = hd.fresh(epoch)
            if h is not None:
                known = hd.find(h, tok)
                if isinstance(known, bytes):
                    return _count(hd.replay(known, where))
                if known is False:
                    why = "corrupt"
                c.version, c.rewrites = h.version + 1, h.rewrites + 1
                hd.inherit(c, h, False)
            if why != "corrupt" and not hd.remember(c, tok, b"z"):
                why = "corrupt"
            # writes
            if why == "corrupt":
                r.delete(key)
                return 1
            r.ltrim(key, 0, 0)
            c.new = False
            _save(r, key, c)
            r.pexpire(key, ttl if 0 < ttl < hd.RETAIN_MS else hd.RETAIN_MS)
            self._wrote(r)
            return 1

    def items_compact(self, key: str, ttl: int, epoch: bytes, rewrites: int, count: int, tok: bytes,
                      entries: list[bytes], now: float, where: str) -> int:
        with self._lock:
            r = self._commands(now)
            h, why = _load(r, key)
            if why == "corrupt":
                raise _corrupt(where)
            if h is None:
                return 0
            known = hd.find(h, tok)
            if known is False:
                raise _corrupt(where, "token ring")
            if isinstance(known, bytes):
                return _count(hd.replay(known, where))
            if h.epoch != epoch or h.rewrites != rewrites:
                return 0
            length = r.llen(key)
            if length - 1 < count:
                return 0
            h.version, h.rewrites = h.version + 1, h.rewrites + 1
            if not hd.remember(h, tok, b"c"):
                raise _corrupt(where, "token ring")
            # writes
            if length - 1 > count:
                r.ltrim(key, count + 1, -1)
                if entries:
                    r.lpush(key, list(reversed(entries)))
                h.new = True
            else:
                r.ltrim(key, 0, 0)
                r.rpush(key, entries)
            _save(r, key, h)
            _expire(r, key, ttl, length - count + len(entries), length == 1)
            self._wrote(r)
            return 1

    def items_fork(self, key: str, ttl: int, epoch: bytes, source_id: bytes, source_version: int, tok: bytes,
                   entries: list[bytes], now: float, where: str) -> int:
        with self._lock:
            r = self._commands(now)
            h, why = _load(r, key)
            if why == "corrupt":
                raise _corrupt(where)
            if why == "old":
                return 0
            if h is not None:
                known = hd.find(h, tok)
                if known is False:
                    raise _corrupt(where, "token ring")
                if isinstance(known, bytes):
                    return _count(hd.replay(known, where))
                if r.llen(key) > 1:
                    return 0
            if not entries:
                return 1
            f = hd.fresh(epoch)
            f.version, f.forked_from, f.forked_at = 1, source_id, b"%d" % source_version
            if h is not None:
                hd.inherit(f, h, True)
                f.new = False
            if not hd.remember(f, tok, b"f"):
                raise _corrupt(where, "token ring")
            # writes
            r.rpush(key, entries)
            _save(r, key, f)
            _expire(r, key, ttl, 2, h is not None)
            self._wrote(r)
            return 1

    def items_get(self, key: str, want: int, stop: int, budget: int, slide: int, now: float,
                  where: str) -> TailSlice:
        with self._lock:
            r = self._commands(now)
            budget = _clamp(budget)
            found: list[bytes] = []  # newest first
            h: Optional[hd.Header] = None
            lo: Optional[int] = None
            window = want

            def take(part: list[bytes]) -> None:
                for e in reversed(part):
                    if plausible(e):
                        found.append(e)
                        if len(found) == want:
                            return

            if stop < 0:
                w = min(want, budget)
                part = r.lrange(key, -w, -1)
                budget, window = budget - len(part), want * 2
                take(part)
                if len(found) < want and part:
                    n = len(part) if len(part) < w else r.llen(key)
                    stop = n - len(part) - 1
                    if stop < 0:  # part[0] was index 0
                        h, lo = _zero(part[0], where)
            if len(found) < want and stop >= 0:
                if lo is None:
                    h, lo = _zero(r.lindex(key, 0) or b"", where)
                while len(found) < want and stop >= lo and budget > 0:
                    start = max(lo, stop - min(window, budget) + 1)
                    part = r.lrange(key, start, stop)
                    take(part)
                    budget -= len(part)
                    stop = start - 1
                    window *= 2
            if slide > 0:
                r.pexpire(key, slide)
            more = stop if len(found) < want and lo is not None and stop >= lo else -1
            found.reverse()
            return TailSlice(found, h.epoch if h else b"", h.rewrites if h else 0, more)

    def items_read(self, key: str, start: int, count: int, slide: int, now: float, where: str) -> RawSnapshot:
        with self._lock:
            r = self._commands(now)
            count = _clamp(count)
            h: Optional[hd.Header] = None
            lo: Optional[int] = None
            if start == 0:
                part = r.lrange(key, 0, count)
                if part:
                    h, lo = _zero(part[0], where)
            else:
                h, lo = _zero(r.lindex(key, 0) or b"", where)
                part = r.lrange(key, lo + start, lo + start + count - 1)
            first = 1 if start == 0 and lo == 1 else 0
            entries = part[first:first + count]
            if slide > 0:
                r.pexpire(key, slide)
            return RawSnapshot(entries=entries, version=h.version if h else 0, epoch=h.epoch if h else b"",
                               rewrites=h.rewrites if h else 0)

    # -- for tests and tools ----------------------------------------------------
    def push_raw(self, key: str, data: bytes, now: float) -> None:
        """Append bytes as-is, like ``RPUSH`` by a foreign writer (tests write garbage this way)."""
        with self._lock:
            self._commands(now).rpush(key, [bytes(data)])

    def raw(self, key: str, now: float) -> Optional[tuple[list[bytes], Optional[int]]]:
        """What the key holds: its entries (header included) and its deadline in ms, or None."""
        with self._lock:
            rec = self._commands(now).get(key)
            return (list(rec.entries), rec.deadline_ms) if rec is not None else None

    def keys(self, now: float) -> list[str]:
        with self._lock:
            r = self._commands(now)
            return [k for k in list(self._keys) if r.get(k) is not None]


DEFAULT_STORE = MemoryStore()


class MemorySession(ItemSession):
    """An item session held in process memory, with the same guarantees as RedisSession.

    Sessions built with the same ``store`` (the process-wide default unless
    given) and the same ``key_prefix`` and id see the same data, as they would
    on one Redis. Every operation is atomic (one locked step). ``close()``
    has nothing to release: the session stays usable, like a RedisSession on a
    client you gave it.
    """

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
        clock: Clock = system_clock,
        store: Optional[MemoryStore] = None,
    ) -> None:
        super().__init__(
            session_id,
            key_prefix=key_prefix,
            ttl_seconds=ttl_seconds,
            ttl=ttl,
            session_settings=session_settings,
            sliding_ttl=sliding_ttl,
            max_item_bytes=max_item_bytes,
            max_batch_bytes=max_batch_bytes,
        )
        self.clock = clock
        self.store = store if store is not None else DEFAULT_STORE
        self._where = f"item session {session_id!r}"

    def _spawn(self, session_id: str) -> MemorySession:
        return MemorySession(session_id, clock=self.clock, store=self.store, **self._options())

    async def _eng_ping(self) -> None:
        return None

    async def _eng_add(self, entries: list[bytes], token: bytes, epoch: bytes) -> int:
        return self.store.items_add(self._items_key, self._ttl_ms, epoch, token, entries, self.clock(), self._where)

    async def _eng_tail(self, want: int, stop: int, budget: int) -> TailSlice:
        return self.store.items_get(self._items_key, want, stop, budget, self._slide_ms, self.clock(), self._where)

    async def _eng_page(self, start: int, count: int) -> RawSnapshot:
        return self.store.items_read(self._items_key, start, count, self._slide_ms, self.clock(), self._where)

    async def _eng_pop(self, token: bytes, epoch: bytes, limit: int) -> PopReply:
        return self.store.items_pop(self._items_key, self._ttl_ms, epoch, token, limit, self.clock(), self._where)

    async def _eng_clear(self, token: bytes, epoch: bytes) -> int:
        return self.store.items_clear(self._items_key, self._ttl_ms, epoch, token, self.clock(), self._where)

    async def _eng_create(self, entries: list[bytes], source_id: str, source_version: int, token: bytes,
                          epoch: bytes) -> bool:
        return bool(self.store.items_fork(self._items_key, self._ttl_ms, epoch, source_id.encode(), source_version,
                                          token, entries, self.clock(), self._where))

    async def _eng_replace_prefix(self, snapshot: Snapshot, entries: list[bytes], token: bytes) -> bool:
        return bool(self.store.items_compact(self._items_key, self._ttl_ms, snapshot.epoch.encode(), snapshot.rewrites,
                                             snapshot.count, token, entries, self.clock(), self._where))


def memory_key(session_id: str, key_prefix: str = DEFAULT_PREFIX) -> str:
    """The key a MemoryStore files a session under (the Redis key)."""
    return KeySpace(key_prefix).session_items(session_id)
