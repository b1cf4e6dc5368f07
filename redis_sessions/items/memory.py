"""In-process item sessions: the same behaviour as Redis, for tests and single processes.

:class:`MemoryStore` mirrors the ``lua/items_*.lua`` scripts step for step on
plain Python data under a lock, so each primitive is atomic exactly like a
script. It holds encoded bytes only. Expiry is lazy, against the injected
clock: a session past its deadline is gone the next time anything looks, and
writes sweep expired sessions now and then; there is no timer thread.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Union

from ..clock import Clock, system_clock
from ..keys import DEFAULT_PREFIX, KeySpace
from .base import MAX_ITEM_BYTES, ItemSession, RawSnapshot, Snapshot, new_epoch, plausible

if TYPE_CHECKING:
    from agents.memory import SessionSettings

_SWEEP_EVERY = 1024


@dataclass
class _Record:
    """One session: its ``items`` list and its ``meta`` hash, which expire together."""

    items: list[bytes] = field(default_factory=list)
    meta: dict[str, str] = field(default_factory=dict)
    expires_at: Optional[float] = None


class MemoryStore:
    """Sessions of one process, keyed like Redis keys. Safe to share between threads."""

    def __init__(self) -> None:
        self._records: dict[str, _Record] = {}
        self._lock = threading.Lock()
        self._writes = 0

    # -- helpers -------------------------------------------------------------
    def _live(self, key: str, now: float) -> Optional[_Record]:
        rec = self._records.get(key)
        if rec is not None and rec.expires_at is not None and rec.expires_at <= now:
            del self._records[key]
            return None
        return rec

    def _touch(self, rec: _Record, ttl_ms: int, now: float) -> None:
        if ttl_ms > 0:
            rec.expires_at = now + ttl_ms / 1000.0

    def _wrote(self, now: float) -> None:
        self._writes += 1
        if self._writes % _SWEEP_EVERY == 0:
            for key in [k for k, r in self._records.items() if r.expires_at is not None and r.expires_at <= now]:
                del self._records[key]

    # -- the scripts, mirrored ----------------------------------------------
    def add(self, key: str, entries: list[bytes], ttl_ms: int, epoch: str, now: float) -> int:
        with self._lock:
            rec = self._live(key, now)
            if rec is None:
                rec = self._records[key] = _Record()
            rec.items.extend(entries)
            version = int(rec.meta.get("v", "0")) + 1
            rec.meta["v"] = str(version)
            rec.meta.setdefault("e", epoch)
            self._touch(rec, ttl_ms, now)
            self._wrote(now)
            return version

    def tail(self, key: str, want: Optional[int], slide_ms: int, now: float) -> list[bytes]:
        with self._lock:
            rec = self._live(key, now)
            if rec is None:
                return []
            self._touch(rec, slide_ms, now)
            if want is None:
                return list(rec.items)
            found: list[bytes] = []
            for entry in reversed(rec.items):
                if len(found) == want:
                    break
                if plausible(entry):
                    found.append(entry)
            found.reverse()
            return found

    def pop(self, key: str, ttl_ms: int, now: float) -> Optional[bytes]:
        with self._lock:
            rec = self._live(key, now)
            if rec is None:
                return None
            found: Optional[bytes] = None
            while rec.items:
                entry = rec.items.pop()
                if plausible(entry):
                    found = entry
                    break
            if not rec.items:
                del self._records[key]
            else:
                _bump(rec.meta, "v", "g")
                self._touch(rec, ttl_ms, now)
            self._wrote(now)
            return found

    def clear(self, key: str) -> None:
        with self._lock:
            self._records.pop(key, None)

    def read(self, key: str, slide_ms: int, now: float) -> RawSnapshot:
        with self._lock:
            rec = self._live(key, now)
            if rec is None:
                return RawSnapshot(entries=[])
            self._touch(rec, slide_ms, now)
            meta = rec.meta
            return RawSnapshot(
                entries=list(rec.items), version=int(meta.get("v", "0")), epoch=meta.get("e", ""),
                rewrites=int(meta.get("g", "0")),
            )

    def create(self, key: str, entries: list[bytes], meta: dict[str, str], ttl_ms: int, now: float) -> bool:
        with self._lock:
            if self._live(key, now) is not None:
                return False
            if entries:
                rec = self._records[key] = _Record(items=list(entries), meta=dict(meta))
                self._touch(rec, ttl_ms, now)
                self._wrote(now)
            return True

    def replace_prefix(self, key: str, seen: Snapshot, entries: list[bytes], ttl_ms: int, now: float) -> bool:
        with self._lock:
            rec = self._live(key, now)
            if rec is None or len(rec.items) < seen.count:
                return False
            if rec.meta.get("e") != seen.epoch or rec.meta.get("g", "0") != str(seen.rewrites):
                return False
            rec.items[:seen.count] = entries
            if not rec.items:
                del self._records[key]
                return True
            _bump(rec.meta, "v", "g")
            self._touch(rec, ttl_ms, now)
            self._wrote(now)
            return True

    # -- for tests and tools ----------------------------------------------------
    def push_raw(self, key: str, data: bytes, now: float) -> None:
        """Append bytes as-is, like ``RPUSH`` by a foreign writer (tests write garbage this way)."""
        with self._lock:
            rec = self._live(key, now)
            if rec is None:
                rec = self._records[key] = _Record()
            rec.items.append(bytes(data))

    def meta(self, key: str, now: float) -> dict[str, str]:
        with self._lock:
            rec = self._live(key, now)
            return dict(rec.meta) if rec is not None else {}


def _bump(meta: dict[str, str], *fields: str) -> None:
    for name in fields:
        meta[name] = str(int(meta.get(name, "0")) + 1)


DEFAULT_STORE = MemoryStore()


class MemorySession(ItemSession):
    """An item session held in process memory, with the same guarantees as RedisSession.

    Sessions built with the same ``store`` (the process-wide default unless
    given) and the same ``key_prefix`` and id see the same data, as they would
    on one Redis. Every operation is atomic (one locked step).
    """

    def __init__(
        self,
        session_id: str,
        *,
        key_prefix: str = DEFAULT_PREFIX,
        ttl_seconds: Optional[float] = None,
        session_settings: Union["SessionSettings", dict[str, Any], None] = None,
        sliding_ttl: bool = False,
        max_item_bytes: int = MAX_ITEM_BYTES,
        clock: Clock = system_clock,
        store: Optional[MemoryStore] = None,
    ) -> None:
        super().__init__(
            session_id,
            key_prefix=key_prefix,
            ttl_seconds=ttl_seconds,
            session_settings=session_settings,
            sliding_ttl=sliding_ttl,
            max_item_bytes=max_item_bytes,
        )
        self.clock = clock
        self.store = store if store is not None else DEFAULT_STORE

    def _spawn(self, session_id: str) -> MemorySession:
        return MemorySession(session_id, clock=self.clock, store=self.store, **self._options())

    async def close(self) -> None:
        """Nothing to release; here so both backends can be used the same way."""

    async def _eng_add(self, entries: list[bytes]) -> None:
        self.store.add(self._items_key, entries, self._ttl_ms, new_epoch(), self.clock())

    async def _eng_tail(self, want: Optional[int]) -> list[bytes]:
        return self.store.tail(self._items_key, want, self._slide_ms, self.clock())

    async def _eng_pop(self) -> Optional[bytes]:
        return self.store.pop(self._items_key, self._ttl_ms, self.clock())

    async def _eng_clear(self) -> None:
        self.store.clear(self._items_key)

    async def _eng_read(self) -> RawSnapshot:
        return self.store.read(self._items_key, self._slide_ms, self.clock())

    async def _eng_create(self, entries: list[bytes], source_id: str, source_version: int) -> bool:
        meta = {"v": "1", "e": new_epoch(), "forked_from": source_id, "forked_at": str(source_version)}
        return self.store.create(self._items_key, entries, meta, self._ttl_ms, self.clock())

    async def _eng_replace_prefix(self, snapshot: Snapshot, entries: list[bytes]) -> bool:
        return self.store.replace_prefix(self._items_key, snapshot, entries, self._ttl_ms, self.clock())


def memory_key(session_id: str, key_prefix: str = DEFAULT_PREFIX) -> str:
    """The key a MemoryStore files a session under (the Redis items key)."""
    return KeySpace(key_prefix).session_items(session_id)
