"""The in-process edge of the response store: the Lua scripts, mirrored in Python.

Same thread model, same refusals, same TTL rules as Redis, with lazy expiry
against an injectable clock (no timer thread). Time is kept as Redis keeps it, in
integer milliseconds: a key set to live ``ttl_ms`` is still there at its deadline
millisecond and gone one millisecond later (Redis: expired iff now > deadline).
Records are kept as the same msgspec bytes Redis would hold, so no caller can
mutate stored state through an object it passed in or got back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from ..clock import Clock
from .protocol import SaveRequest


@dataclass
class _Entry:
    fields: dict[str, bytes | str] = field(default_factory=dict)
    expires_at: int | None = None  # the deadline in ms; None: no expiry


class MemoryChainEngine:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.round_trips = 0
        self.threads: dict[str, _Entry] = {}
        self.locators: dict[str, tuple[str, int | None]] = {}

    # -- expiry -------------------------------------------------------------
    def now_ms(self) -> int:
        """The clock in whole ms (rounded: a fake clock advanced by 0.001 s is 1 ms on)."""
        return round(self.clock() * 1000)

    def _live_thread(self, thread: str) -> _Entry | None:
        entry = self.threads.get(thread)
        if entry is not None and entry.expires_at is not None and self.now_ms() > entry.expires_at:
            del self.threads[thread]
            return None
        return entry

    def _live_locator(self, response_id: str) -> str | None:
        found = self.locators.get(response_id)
        if found is not None and found[1] is not None and self.now_ms() > found[1]:
            del self.locators[response_id]
            return None
        return None if found is None else found[0]

    def _deadline(self, ttl_ms: int) -> int | None:
        return self.now_ms() + ttl_ms if ttl_ms else None

    def _extend(self, entry: _Entry, ttl_ms: int) -> None:
        """Never shorten: a deadline only moves later (None is 'never')."""
        deadline = self._deadline(ttl_ms)
        if entry.expires_at is not None and deadline is not None and deadline > entry.expires_at:
            entry.expires_at = deadline

    # -- the engine ---------------------------------------------------------
    async def locate(self, response_id: str, slide_ms: int) -> str | None:
        self.round_trips += 1
        thread = self._live_locator(response_id)
        if thread is not None and slide_ms > 0:
            self.locators[response_id] = (thread, self._deadline(slide_ms))
        return thread

    async def point(self, response_id: str, thread: str, ttl_ms: int) -> str | None:
        self.round_trips += 1
        old = self._live_locator(response_id)
        if old is None:
            self.locators[response_id] = (thread, self._deadline(ttl_ms))
        return old

    async def unpoint(self, response_id: str) -> None:
        self.round_trips += 1
        self.locators.pop(response_id, None)

    async def save(self, thread: str, request: SaveRequest) -> tuple[str, str]:
        self.round_trips += 1
        entry = self._live_thread(thread)
        fields = entry.fields if entry else {}
        rid, parent = request.response_id, request.parent
        exists = f"d:{rid}" in fields
        if exists and not request.overwrite:
            return "exists", rid
        if request.expect:
            if parent != request.expected:
                return "expected", parent
            if exists and fields.get(f"p:{rid}", "") != request.expected:
                return "expected", str(fields.get(f"p:{rid}", ""))
        if parent:
            if f"d:{parent}" not in fields:
                return "parent_missing", parent
            if exists:
                cur, steps = parent, 0
                while cur and steps < request.walk_limit:
                    if cur == rid:
                        return "cycle", rid
                    cur = str(fields.get(f"p:{cur}", ""))
                    steps += 1
        if entry is None:
            entry = self.threads[thread] = _Entry(expires_at=self._deadline(request.ttl_ms))
        elif request.ttl_ms == 0:
            entry.expires_at = None
        else:
            self._extend(entry, request.ttl_ms)
        entry.fields[f"d:{rid}"] = request.blob
        entry.fields[f"p:{rid}"] = parent
        return "ok", rid

    async def fetch(self, thread: str, response_id: str, slide_ms: int) -> object | None:
        status, _, records = await self.walk(thread, response_id, 1, slide_ms)
        return records[0] if records else None

    async def walk(self, thread: str, start: str, limit: int, slide_ms: int) -> tuple[str, str, Sequence[object]]:
        self.round_trips += 1
        entry = self._live_thread(thread)
        if entry is None:
            return "missing", start, []
        if slide_ms > 0:
            self._extend(entry, slide_ms)
        records: list[object] = []
        cur, seen = start, set()
        while cur:
            if cur in seen:
                return "cycle", cur, records
            if len(records) >= limit:
                return "depth", cur, records
            seen.add(cur)
            blob = entry.fields.get(f"d:{cur}")
            if blob is None:
                return "missing", cur, records
            records.append(blob)
            cur = str(entry.fields.get(f"p:{cur}", ""))
        return "ok", "", records

    async def delete(self, thread: str, response_id: str) -> bool:
        self.round_trips += 1
        entry = self._live_thread(thread)
        if entry is None or f"d:{response_id}" not in entry.fields:
            return False
        del entry.fields[f"d:{response_id}"]
        entry.fields.pop(f"p:{response_id}", None)
        if not entry.fields:
            del self.threads[thread]
        return True

    async def close(self) -> None:
        return None
