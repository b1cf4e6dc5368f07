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
from ..keys import KeySpace
if TYPE_CHECKING:
    from ..conversations.memory import HashStore

from . import books
from .jumps import jump_list
from .protocol import DELETED, INLINE_BYTES, NOT_FOUND, OPS_FIELD, RING_TTL_MS, SAVED, SaveRequest, ring_find, ring_push


@dataclass
class _Entry:
    fields: dict[str, bytes | str] = field(default_factory=dict)
    expires_at: int | None = None  # the deadline in ms; None: no expiry


LAST_WRITE = KeySpace.LAST_WRITE_FIELD
"""The thread's last-write stamp (chain_save.lua writes the server's TIME; here, the clock's)."""
LARGEST = KeySpace.LARGEST_FIELD
"""The largest record the thread has held, ``<bytes> <stamp>`` (lua/chain_lib.lua)."""


def largest_told(fields: dict[str, bytes | str]) -> int | None:
    """The largest record's size the thread's m field tells while its stamp is the
    thread's last-write stamp (lua/chain_jumps.lua's largest_told), else None."""
    told, stamp = fields.get(LARGEST), fields.get(LAST_WRITE)
    if told is None or stamp is None:
        return None
    size, _, of = str(told).partition(" ")
    return int(size) if of and of == str(stamp) else None


def names_of(fields: dict[str, bytes | str], request: SaveRequest) -> bytes | None:
    """The names list a record saved by ``request`` keeps (lua/chain_lib.lua's names_of)."""
    if not request.names or not request.parent:
        return None
    above = request.above or fields.get(f"n:{request.parent}")
    if not above:
        return None
    return request.names + (above if isinstance(above, bytes) else above.encode("utf-8", "surrogateescape"))


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
        rid, token, parent, ttl = request.response_id, request.token, request.parent, request.ttl_ms
        fields_before = entry.fields if entry is not None else {}
        exists = f"d:{rid}" in fields_before
        old = str(fields_before.get(f"p:{rid}", "")) if exists else ""
        mode = books.mode(fields_before)
        largest = largest_told(fields_before)
        if largest is None and (mode == "new" or (mode == "on" and (books.number(fields_before.get("c")) or 0) == 0)):
            largest = 0  # no record: nothing larger than this one
        now = self.now_ms()
        if entry is None:
            entry = self.threads[thread] = _Entry(expires_at=self._deadline(ttl))
        elif ttl == 0:
            entry.expires_at = None
        else:
            self._extend(entry, ttl)
        fields = entry.fields
        jumps = jump_list(fields, parent, len(request.blob))
        if jumps is None and exists:
            fields.pop(f"j:{rid}", None)
        fields[f"d:{rid}"] = request.blob
        fields[f"p:{rid}"] = parent
        if jumps is not None:
            fields[f"j:{rid}"] = jumps
        listed = names_of(fields, request)
        if listed is not None:
            fields[f"n:{rid}"] = listed
            fields.pop(f"n:{parent}", None)  # one list per branch: the child carries it on
        elif exists:
            fields.pop(f"n:{rid}", None)
        if token:
            fields[OPS_FIELD] = ring_push(str(fields.get(OPS_FIELD, "")), token, SAVED)
        fields[LAST_WRITE] = str(now)
        if largest is not None:
            fields[LARGEST] = f"{max(largest, len(request.blob))} {now}"
        else:
            fields.pop(LARGEST, None)  # no longer tells
        if not request.books or mode in ("taint", "off"):
            if mode not in ("off", "new"):
                books.off(fields)
            return "ok", rid
        leaves, count = str(fields.get("L", "")), books.number(fields.get("c")) or 0
        deadline = now + ttl if ttl > 0 else None
        if not exists:
            count += 1
            if parent:
                leaves = books.child_added(fields, parent, leaves)
            if deadline is not None:
                fields[f"e:{rid}"] = str(deadline)
                leaves = books.leaves_insert(leaves, rid, deadline)
        else:
            if old != parent:
                if old:
                    leaves = books.child_removed(fields, old, deadline if deadline is not None else now, leaves)
                if parent:
                    leaves = books.child_added(fields, parent, leaves)
            if deadline is not None:  # a leaf saved again: needed from now
                leaves, _ = books.leaf_renewed(fields, leaves, rid, deadline)
        leaves, gone = books.prune(fields, leaves, now)
        books.close(fields, leaves, count - gone)
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
        _, _, records, _ = await self.walk(thread, response_id, 1, slide_ms)
        return records[0] if records else None

    def failed(self, exc: Exception, thread: str) -> Exception:
        return exc  # this engine raises only SessionErrors, and bugs as themselves

    async def has(self, thread: str, response_id: str) -> bool:
        self.round_trips += 1
        entry = self._live_thread(thread)
        return entry is not None and f"d:{response_id}" in entry.fields

    async def walk(self, thread: str, start: str, limit: int, slide_ms: int,
                   jumps: bool = True, *, named: bool = False) -> tuple[str, str, Sequence[object], Sequence[str] | None]:
        """One step, by the pointers: the jump and names lists only save Redis calls."""
        self.round_trips += 1
        entry = self._live_thread(thread)
        if entry is None:
            return "missing", start, [], None
        status, detail, records, ids = self._walk(entry, start, limit)
        if slide_ms > 0 and records:
            mode = books.mode(entry.fields)
            self._extend(entry, slide_ms)
            fields = entry.fields
            if mode == "on":
                deadline = self.now_ms() + slide_ms
                leaves, leaf = books.leaf_renewed(fields, str(fields.get("L", "")), start, deadline)
                if not leaf:
                    fields[f"s:{start}"] = str(deadline)
                books.close(fields, leaves, books.number(fields.get("c")) or 0)
            elif mode == "taint":
                books.off(fields)
        # As the Redis walk tells it: records come back with it (None) while, counted at the
        # thread's largest record (m), they fit the inline budget, or by their own sizes
        # where m does not tell; else it returns their ids, to be read apart.
        told = largest_told(entry.fields)
        size = told * len(records) if told is not None else sum(map(len, records))  # type: ignore[arg-type]
        return status, detail, records, ids if status in ("ok", "depth") and size > INLINE_BYTES else None

    async def read_known(self, thread: str, ids: Sequence[str]) -> tuple[Sequence[object] | None, int]:
        """lua/chain_known.lua's: the records, while the thread's m tells they fit the inline budget."""
        self.round_trips += 1
        entry = self._live_thread(thread)
        if entry is None:
            return None, -1  # a missing key has no m
        told = largest_told(entry.fields)
        if told is None:
            return None, -1
        if told * len(ids) > INLINE_BYTES:
            return None, told
        return [entry.fields.get(f"d:{rid}") for rid in ids], 0

    @staticmethod
    def _walk(entry: _Entry, start: str, limit: int) -> tuple[str, str, list[object], list[str]]:
        records: list[object] = []
        ids: list[str] = []
        cur, seen = start, set()
        while cur:
            if cur in seen:
                return "cycle", cur, records, ids
            if len(records) >= limit:
                return "depth", cur, records, ids
            seen.add(cur)
            blob = entry.fields.get(f"d:{cur}")
            if blob is None:
                return "missing", cur, records, ids
            records.append(blob)
            ids.append(cur)
            cur = str(entry.fields.get(f"p:{cur}", ""))
        return "ok", "", records, ids

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
    async def delete(self, thread: str, response_id: str, token: str, ttl_ms: int = 0, keep_books: bool = False) -> bool:
        self.round_trips += 1
        entry = self._live_thread(thread)
        if entry is None:
            return False
        fields = entry.fields
        ring = str(fields.get(OPS_FIELD, ""))
        done = ring_find(ring, token)
        if done is not None:
            return done == DELETED
        mode = books.mode(fields)
        found = f"d:{response_id}" in fields
        parent = fields.get(f"p:{response_id}")
        linked = parent is not None
        jumped = f"j:{response_id}" in fields
        named = f"n:{response_id}" in fields
        leaf_deadline = books.number(fields.get(f"e:{response_id}"))
        has_ring = bool(ring or token)
        stamped = LAST_WRITE in fields
        sized = LARGEST in fields
        records = books.number(fields.get("c"))
        if mode == "on" and records is not None:
            left = records - found
        else:
            left = len(fields) - found - linked - jumped - named - (1 if ring else 0) - stamped - sized
        pttl = self._pttl(entry)
        for name in (f"d:{response_id}", f"p:{response_id}", f"j:{response_id}", f"n:{response_id}"):
            fields.pop(name, None)
        if token:
            fields[OPS_FIELD] = ring_push(ring, token, DELETED if found else NOT_FOUND)
        if left == 0:
            fields.pop(LAST_WRITE, None)
            fields.pop(LARGEST, None)
        if mode == "on" and keep_books:
            leaves = str(fields.get("L", ""))
            if found:
                for name in (f"e:{response_id}", f"k:{response_id}", f"s:{response_id}"):
                    fields.pop(name, None)
                leaves = books.leaves_remove(leaves, response_id)
                if parent:
                    deadline = leaf_deadline if leaf_deadline is not None else self.now_ms() + ttl_ms
                    leaves = books.child_removed(fields, str(parent), deadline, leaves)
            if left > 0:
                books.close(fields, leaves, left)
            else:
                books.off(fields)
        elif mode in ("on", "taint"):
            books.off(fields)
        if left == 0 and has_ring and (pttl < 0 or pttl > RING_TTL_MS):
            entry.expires_at = self._deadline(RING_TTL_MS)
        if not fields:
            del self.threads[thread]
        return found

    def clear(self) -> None:
        """Forget every thread and locator, rings included (MemoryResponseSessionStore.clear)."""
        self.threads.clear()
        self.locators.clear()

    async def close(self) -> None:
        return None
