"""The in-process edge of the response store: the Lua scripts, mirrored in Python.

Same thread model, same refusals, same operation ring, same TTL rules as Redis,
with lazy expiry against an injectable clock (no timer thread). Time is kept as
Redis keeps it, in integer milliseconds: a key set to live ``ttl_ms`` is still
there at its deadline millisecond and gone one millisecond later (Redis: expired
iff now > deadline). Records are kept as the same msgspec bytes Redis would hold,
so no caller can mutate stored state through an object it passed in or got back.

``tests/test_chains_differential.py`` runs random operations on this engine and
on the scripts (fakeredis on the same fake clock) and compares every answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from ..clock import Clock
if TYPE_CHECKING:
    from ..conversations.memory import HashStore

from .protocol import DELETED, NOT_FOUND, OPS_FIELD, RING_TTL_MS, SAVED, SaveRequest, ring_find, ring_push


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

    # -- time and expiry ------------------------------------------------------
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

    def _pttl(self, entry: _Entry) -> int:
        return -1 if entry.expires_at is None else entry.expires_at - self.now_ms()

    def _extend(self, entry: _Entry, ttl_ms: int) -> None:
        """Never shorten: PEXPIRE only when less than ``ttl_ms`` is left (never on no expiry)."""
        left = self._pttl(entry)
        if 0 <= left < ttl_ms:
            entry.expires_at = self._deadline(ttl_ms)

    # -- locators -------------------------------------------------------------
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

    async def touch(self, response_id: str, ttl_ms: int) -> None:
        self.round_trips += 1
        thread = self._live_locator(response_id)
        if thread is not None:
            self.locators[response_id] = (thread, self._deadline(ttl_ms))

    # -- threads: chain_save.lua ------------------------------------------------
    async def save(self, thread: str, request: SaveRequest) -> tuple[str, str]:
        self.round_trips += 1
        entry = self._live_thread(thread)
        refused = self._check_save(entry, request)
        if refused is not None:
            return refused
        return self._write_save(thread, entry, request)

    # -- threads and conversations: chain_save_turn.lua -------------------------------
    async def save_turn(self, thread: str, request: SaveRequest, conversations: Any, conversation_id: str,
                        pairs: Sequence[bytes]) -> tuple[str, str]:
        """The save and the append, in one step, as the script does it: both keys'
        checks first (the thread's, then the conversation's), then both writes."""
        # Imported here: the conversations package imports the responses package.
        from ..conversations.memory import append_check, append_write
        from ..conversations.memory import expire as conv_expire

        self.round_trips += 1
        entry = self._live_thread(thread)
        refused = self._check_save(entry, request)
        if refused is not None:
            return refused
        argv = list(pairs)

        def step(r: Any) -> tuple[str, str]:
            n, reply = append_check(r, conversation_key, argv, 0)
            if n is None:
                status, detail = (list(reply) + [b""])[:2]
                return (status or b"").decode(), (detail or b"").decode()
            result = self._write_save(thread, entry, request)
            append_write(r, conversation_key, argv, 0, n, [])
            conv_expire(r, conversation_key, conversation_ttl_ms)
            return result

        hashes: HashStore = conversations.store
        conversation_key, conversation_ttl_ms = conversations.keys.conversation(conversation_id), conversations.ttl_ms
        return hashes.apply(conversations.now(), step)

    def _write_save(self, thread: str, entry: _Entry | None, request: SaveRequest) -> tuple[str, str]:
        rid, token = request.response_id, request.token
        if entry is None:
            entry = self.threads[thread] = _Entry(expires_at=self._deadline(request.ttl_ms))
        elif request.ttl_ms == 0:
            entry.expires_at = None
        else:
            self._extend(entry, request.ttl_ms)
        entry.fields[f"d:{rid}"] = request.blob
        entry.fields[f"p:{rid}"] = request.parent
        if token:
            entry.fields[OPS_FIELD] = ring_push(str(entry.fields.get(OPS_FIELD, "")), token, SAVED)
        return "ok", rid

    def _check_save(self, entry: _Entry | None, request: SaveRequest) -> tuple[str, str] | None:
        """The script's checks, in its order: None when the save should write,
        ('ok', id) when it is already done, else the refusal."""
        fields = entry.fields if entry else {}
        rid, parent, want = request.response_id, request.parent, request.expected
        if entry is not None and ring_find(str(fields.get(OPS_FIELD, "")), request.token) is not None:
            return "ok", rid
        if request.expect and parent != want:
            return "expected", parent
        stored = fields.get(f"d:{rid}")
        if stored:
            old = str(fields.get(f"p:{rid}", ""))
            if old == parent and stored == request.blob:
                return "ok", rid
            if not request.overwrite:
                return "exists", rid
            if request.expect and old != want:
                return "expected", old
        if parent:
            if f"d:{parent}" not in fields:
                return "parent_missing", parent
            if stored:
                cur, steps = parent, 0
                while cur and steps < request.walk_limit:
                    if cur == rid:
                        return "cycle", rid
                    cur = str(fields.get(f"p:{cur}", ""))
                    steps += 1
        return None

    # -- threads: chain_walk.lua, HGET, HEXISTS -------------------------------------
    async def fetch(self, thread: str, response_id: str, slide_ms: int) -> object | None:
        status, _, records = await self.walk(thread, response_id, 1, slide_ms)
        return records[0] if records else None

    async def has(self, thread: str, response_id: str) -> bool:
        self.round_trips += 1
        entry = self._live_thread(thread)
        return entry is not None and f"d:{response_id}" in entry.fields

    async def walk(self, thread: str, start: str, limit: int, slide_ms: int) -> tuple[str, str, Sequence[object]]:
        self.round_trips += 1
        entry = self._live_thread(thread)
        if entry is None:
            return "missing", start, []
        status, detail, records = self._walk(entry, start, limit)
        if slide_ms > 0 and records:
            self._extend(entry, slide_ms)
        return status, detail, records

    @staticmethod
    def _walk(entry: _Entry, start: str, limit: int) -> tuple[str, str, list[object]]:
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

    # -- delete_thread: HSCAN, UNLINK, DEL --------------------------------------------
    async def thread_ids(self, thread: str) -> list[str]:
        self.round_trips += 1
        entry = self._live_thread(thread)
        return [] if entry is None else [f[2:] for f in entry.fields if f.startswith("p:")]

    async def drop(self, thread: str) -> None:
        self.round_trips += 1
        self.threads.pop(thread, None)

    async def unpoint_many(self, response_ids: Sequence[str]) -> None:
        self.round_trips += 1
        for rid in response_ids:
            self.locators.pop(rid, None)

    # -- threads: chain_delete.lua ----------------------------------------------
    async def delete(self, thread: str, response_id: str, token: str) -> bool:
        self.round_trips += 1
        entry = self._live_thread(thread)
        if entry is None:
            return False
        ring = str(entry.fields.get(OPS_FIELD, ""))
        done = ring_find(ring, token)
        if done is not None:
            return done == DELETED
        found = entry.fields.pop(f"d:{response_id}", None) is not None
        entry.fields.pop(f"p:{response_id}", None)
        if token:
            entry.fields[OPS_FIELD] = ring_push(ring, token, DELETED if found else NOT_FOUND)
        if set(entry.fields) == {OPS_FIELD}:
            left = self._pttl(entry)  # nothing but the ring left: let it go soon
            if left < 0 or left > RING_TTL_MS:
                entry.expires_at = self._deadline(RING_TTL_MS)
        elif not entry.fields:
            del self.threads[thread]
        return found

    def clear(self) -> None:
        """Forget every thread and locator, rings included (MemoryResponseSessionStore.clear)."""
        self.threads.clear()
        self.locators.clear()

    async def close(self) -> None:
        return None
