"""The Redis edge of the response store: one method, one round trip.

Works unchanged on a standalone server and on Redis Cluster: every script
touches a single thread hash (one slot), and locator keys are single-key
commands that redis-py routes by key.
"""

from __future__ import annotations

import functools
from typing import Any, Awaitable, Callable, Sequence

from redis.exceptions import ClusterError, ResponseError, TryAgainError

from ..errors import ErrorCode, SessionError
from ..keys import KeySpace
from ..redis_client import CLUSTERS, RedisLink, as_text, awaitable, io, translate_errors, translated
from ..replication import ReplicaAcks, write_acked
from ..scripts import LuaScript, RawLibScript, script
from . import jumps, names
from .protocol import DEFAULT_MAX_RECORD_BYTES, INLINE_BYTES, SaveRequest


@functools.lru_cache(maxsize=256)
def _number(value: int) -> bytes:
    """A script argument as redis-py would send it, made once: every argument that
    reaches redis-py as bytes skips its encoder (a few hundred ns each, on every save)."""
    return b"%d" % value


WALK_STEPS = 256
"""Most reads one walk call makes (a parent pointer, or a jump list of up to 16 ancestors),
so no call holds the shard long (measured on a loaded machine: 365 pointer reads in 1.9
to 2.7 ms); a longer chain takes one call per 256 reads."""
READ_SLICE_BYTES = 2 * 1024 * 1024
"""Most record bytes one HMGET reads, every record counted at the size of the largest
the thread holds (the walk tells it: see :meth:`RedisChainEngine.walk`). Measured on a
machine whose page faults are slow: HMGETs of 8 MiB (eight records of 1 MiB) took
1.0-1.8 ms, but 6.3-7.2 ms in 6 of 40, and 13.7 ms inside a resolve; of 2 MiB, at most
1.9 ms."""
SLICE_RECORDS = 256
"""Most records one HMGET reads: there, 256 records of 4 KB took 1.1-1.4 ms, and 1,024
took 4.4-4.8 ms (small records cost by the record more than by the byte)."""
SLICES_PER_TRIP = 4
"""HMGETs one round trip pipelines. Redis runs the commands of one read off a socket back
to back, so every other client waits for all of a trip: while resolves of 64 records of
1 MB ran back to back, another process's PINGs waited up to 58 ms (99.9th percentile 32 ms)
with all eight 8 MiB slices in one trip, and up to 9 ms (4 ms; idle, the machine's own
stalls gave 6-10 ms) with trips of four 2 MiB slices."""
_INLINE = _number(INLINE_BYTES)
_STEPS = _number(WALK_STEPS)
THREAD_SCAN_COUNT = 64
"""Fields one HSCAN page of a thread visits at most (delete_thread). Redis copies every
field a page visits, values included, before it filters them, so a thread whose largest
record is big gets pages of THREAD_SCAN_BYTES / that size fields (one at the least):
64 records of 1 MiB held Redis 7 ms in one page of 64."""
THREAD_SCAN_BYTES = 1 << 20
THREAD_SCAN_BLIND = 16
"""Fields a page visits when the thread does not tell its largest record (m is stale):
16 records of the default 1 MiB at the most."""
LOCATOR_BATCH = 512
"""Locator DELs, or PEXPIREs, sent in one pipeline."""
COVER_CALLS = 400
"""Most calls of lua/chain_cover.lua one save makes (256 records each): a chain of 100,000,
the deepest a store reads, and then some; a loop of parent pointers (a hand edit) ends here."""


TRYAGAIN_ROUNDS = 40
"""Times a conversation's turn is sent while its slot migrates (TRYAGAIN), pauses
growing from 10 ms to 0.5 s: about 15 s in all, unless the call's budget ends first."""


def _save_args(request: SaveRequest) -> list[Any]:
    """ARGV[1..13] of a save, as lua/chain_save.lua (and chain_save_turn.lua) take them."""
    return [request.response_id, request.parent, b"=" if request.expect else b"-", request.expected,
            b"1" if request.overwrite else b"0", request.blob, _number(request.ttl_ms),
            _number(request.walk_limit), request.token, b"", b"1" if request.books else b"0",
            request.names, request.above]


def read_plan(count: int, record_bytes: int) -> list[list[slice]]:
    """How ``count`` records of at most ``record_bytes`` each are read after a walk: round
    trips, each a list of HMGETs (slices of the records, in order) sent together. An HMGET
    reads at most READ_SLICE_BYTES and SLICE_RECORDS of them, a trip SLICES_PER_TRIP HMGETs:
    1,024 records of up to 8 KB in one trip, 416 of 20 KB, 8 of 1 MiB."""
    per = max(1, min(SLICE_RECORDS, READ_SLICE_BYTES // max(1, record_bytes)))
    slices = [slice(at, min(count, at + per)) for at in range(0, count, per)]
    return [slices[at:at + SLICES_PER_TRIP] for at in range(0, len(slices), SLICES_PER_TRIP)]


def _saved(result: Any, request: SaveRequest) -> tuple[str, str]:
    """A save script's reply: ``ok`` alone (a plain string: a two-entry table cost the
    script 3-5 us more to reply, of 17-100 us for a whole save by the machine's load),
    or ``{reason, detail}``."""
    if isinstance(result, list):
        return as_text(result[0]), as_text(result[1])
    return as_text(result), request.response_id


def _inline(status: str, detail: str, records: Sequence[object]) -> tuple[str, str, Sequence[object]]:
    for i, record in enumerate(records):
        if record is None:  # a pointer without its record: only a hand-edited hash has that
            return "missing", "", records[:i]
    return status, detail, records


def _walked(reply: Sequence[object]) -> list[str]:
    """The ids a walk call returned, oldest last: each entry an id, or a jump list as it
    is stored, ``<how many> <where to go on> <ids>`` (jumps.parts)."""
    walked: list[str] = []
    for entry in reply:
        text = as_text(entry)
        listed = jumps.parts(text) if " " in text else None  # ids hold no whitespace (ids.validate_id)
        if listed is not None:
            walked.extend(listed[2])
        else:
            walked.append(text)
    return walked


def _largest_told(m: object, w: object) -> int | None:
    """What lua/chain_jumps.lua's largest_told reads from a thread's m and w fields: the
    largest record's size, while m's stamp is the thread's last-write stamp; else None."""
    if not isinstance(m, bytes) or not isinstance(w, bytes):
        return None
    size, _, stamp = m.partition(b" ")
    return int(size) if stamp == w and size.isdigit() else None


def _wrong_type(key: str, kind: str) -> SessionError:
    return SessionError(ErrorCode.RECORD_CORRUPT, f"thread {key!r} holds a Redis {kind}")


class RedisChainEngine:
    def __init__(self, link: RedisLink, keys: KeySpace, acks: ReplicaAcks | None = None) -> None:
        self.link = link
        self.record_limit = DEFAULT_MAX_RECORD_BYTES
        """The store's ``max_record_bytes``: what a record is counted as when the thread
        cannot tell its largest (see :meth:`limit_records`)."""
        self.keys = keys
        self.acks = acks
        """``replica_acks``: the scripts' writes and the locator's SET wait for replicas (see replication)."""
        self.round_trips = 0
        self._save = script("chain_save")
        self._save_turn = script("chain_save_turn")
        self._walk = script("chain_walk")
        self._walk_slide = script("chain_walk_slide")  # the same walk, with the books in front
        self._known = script("chain_known")
        self._delete = script("chain_delete")
        self._repoint = script("chain_repoint")
        self._cover = RawLibScript("chain_cover", "chain_lib")

    @property
    def blocking(self) -> bool:
        return self.link.blocking

    def limit_records(self, max_record_bytes: int) -> None:
        """Records may be up to ``max_record_bytes``."""
        self.record_limit = max_record_bytes

    async def locate(self, response_id: str, slide_ms: int) -> str | None:
        key, legacy = self.keys.locator(response_id), self.keys.legacy_locator(response_id)
        client = self.link.client
        self.round_trips += 1
        async with translate_errors(f"locator {key!r}"):
            if legacy is None:
                value = await io(self._get(client, key, slide_ms))
            elif isinstance(client, CLUSTERS):
                # Two slots, two nodes: the old layout's locator only on a miss.
                value = await io(self._get(client, key, slide_ms))
                if value is None:
                    value = await io(self._get(client, legacy, slide_ms))
            else:
                # The old layout's locator too, in the same request (keys.py: layout change).
                pipe = client.pipeline(transaction=False)
                self._get(pipe, key, slide_ms)
                self._get(pipe, legacy, slide_ms)
                value, old = await io(pipe.execute())
                value = old if value is None else value
        return None if value is None else as_text(value)

    @staticmethod
    def _get(client: Any, key: str, slide_ms: int) -> Any:
        return client.getex(key, px=slide_ms) if slide_ms > 0 else client.get(key)

    async def point(self, response_id: str, thread: str, ttl_ms: int) -> str | None:
        key = self.keys.locator(response_id)
        self.round_trips += 1
        async with translate_errors(f"locator {key!r}"):
            # SET NX GET: set if free, and tell what was there, in one command.
            if self.acks is not None:
                command = ("SET", key, thread, "NX", "GET", *(("PX", ttl_ms) if ttl_ms else ()))
                old = await write_acked(self.link.client, key, command, self.acks)
            else:
                old = await io(self.link.client.set(key, thread, nx=True, get=True, px=ttl_ms or None))
        return None if old is None else as_text(old)

    async def repoint(self, response_id: str, found: str, thread: str, ttl_ms: int) -> str | None:
        """Point a foreign id at ``thread`` if its locator still holds ``found`` (or nothing):
        lua/chain_repoint.lua. Returns what it held before (None: nothing)."""
        key = self.keys.locator(response_id)
        self.round_trips += 1
        async with translate_errors(f"locator {key!r}"):
            old = await self._run(self._repoint, [key], [found, thread, _number(ttl_ms)])
        return None if old is None else as_text(old)

    async def unpoint(self, response_id: str) -> None:
        # execute_command: a cluster pipeline's own delete() splits keys by slot and is not queued.
        await self._each_locator(response_id, lambda pipe, key: pipe.execute_command("DEL", key))

    async def touch_many(self, response_ids: Sequence[str], ttl_ms: int) -> None:
        await self._on_locators(response_ids, lambda pipe, key: pipe.pexpire(key, ttl_ms))

    async def _each_locator(self, response_id: str, queue: Callable[[Any, str], object]) -> None:
        """One command on the locator and on the old layout's one (if this prefix can have
        one), pipelined: one round trip, also on a cluster (two slots, sent in parallel)."""
        keys = [self.keys.locator(response_id), self.keys.legacy_locator(response_id)]
        self.round_trips += 1
        async with translate_errors(f"locator {keys[0]!r}"):
            pipe = self.link.client.pipeline(transaction=False)
            for key in keys:
                if key is not None:
                    queue(pipe, key)
            await io(pipe.execute())

    async def save(self, thread: str, request: SaveRequest) -> tuple[str, str]:
        key = self.keys.thread(thread)
        self.round_trips += 1
        async with translate_errors(f"thread {key!r}"):
            result = await self._run(self._save, [key], _save_args(request))
            if isinstance(result, list) and as_text(result[0]) == "cover":
                request.renew = await self._covered(key, result)
                return "ok", request.response_id
        return _saved(result, request)

    async def _covered(self, key: str, reply: Sequence[Any]) -> list[str]:
        """The ancestors whose locators a save must renew (lua/chain_lib.lua, l:): those its
        script named, and those lua/chain_cover.lua finds above where the script's walk
        stopped, 256 records a call."""
        renew = [as_text(rid) for rid in reply[4:]]
        frontier, need, far = as_text(reply[1]), reply[2], reply[3]
        for _ in range(COVER_CALLS):
            if not frontier:
                break
            self.round_trips += 1
            more = await self._run(self._cover, [key], [frontier, need, far])
            frontier = as_text(more[0])
            renew.extend(as_text(rid) for rid in more[1:])
        return renew

    async def save_turn(self, thread: str, request: SaveRequest, conversations: Any, conversation_id: str,
                        pairs: Sequence[bytes]) -> tuple[str, str]:
        """The save and the append of its turn's items to the conversation, one script
        on two keys of one slot (lua/chain_save_turn.lua).

        While that slot migrates, Redis answers a two-key script TRYAGAIN as long as the
        keys are not together on one node (a first turn's thread key does not exist
        yet): the script has not run, so it is sent again, with a growing pause, until
        the migration lets it through or the call's budget ends (``bounded``:
        ``session.backend.timeout``, and a retry is safe); at most TRYAGAIN_ROUNDS times."""
        key = self.keys.thread(thread)
        keys = [key, self.keys.conversation(conversation_id)]
        args = [*_save_args(request), _number(conversations.ttl_ms), *pairs]
        async with translate_errors(f"thread {key!r}"):
            for attempt in range(TRYAGAIN_ROUNDS):
                self.round_trips += 1
                try:
                    result = await self._run(self._save_turn, keys, args)
                    break
                except (TryAgainError, ClusterError) as exc:
                    if attempt == TRYAGAIN_ROUNDS - 1 or (isinstance(exc, ClusterError) and "TTL" not in str(exc)):
                        raise
                    await self.link.pause(min(0.01 * 2 ** attempt, 0.5))
        return _saved(result, request)

    def fetch(self, thread: str, response_id: str, slide_ms: int) -> Awaitable[object | None]:
        """redis-py's own HGET, not wrapped in a coroutine of ours: depth 1 is one plain
        read, where every layer shows (a ``get`` went from 0.936x to 0.942-0.945x of a
        raw HGET + decode on loopback with this and the store's trims, three runs side by
        side). Its errors come as redis-py raised them: see :meth:`failed`."""
        if slide_ms > 0:
            return self._fetch_sliding(thread, response_id, slide_ms)
        self.round_trips += 1
        return awaitable(self.link.client.hget(self.keys.thread(thread), self.keys.data_field(response_id)))

    async def _fetch_sliding(self, thread: str, response_id: str, slide_ms: int) -> object | None:
        status, detail, records, _ = await self.walk(thread, response_id, 1, slide_ms)
        if status == "wrongtype":
            raise _wrong_type(self.keys.thread(thread), detail)
        return records[0] if records else None

    def failed(self, exc: Exception, thread: str) -> Exception:
        return translated(exc, f"thread {self.keys.thread(thread)!r}")

    async def has(self, thread: str, response_id: str) -> bool:
        key = self.keys.thread(thread)
        self.round_trips += 1
        async with translate_errors(f"thread {key!r}"):
            return bool(await io(self.link.client.hexists(key, self.keys.data_field(response_id))))

    async def walk(self, thread: str, start: str, limit: int, slide_ms: int,
                   jumps: bool = True, *, named: bool = False) -> tuple[str, str, Sequence[object], Sequence[str] | None]:
        """The chain from ``start``: pointers walked by lua/chain_walk.lua, at most
        WALK_STEPS reads per call; records returned by the walk itself when the whole chain
        is at most INLINE_BYTES (one round trip; each record counted as the thread's largest,
        where its m field tells that), else read with HMGETs (:func:`read_plan`)
        sized by the largest record the thread holds, as its m field tells the walk; in a
        thread whose m does not tell (one written by a version before it), the walk sizes
        each record it passes instead, by the pointers only.

        ``jumps``: follow big records' jump lists (lua/chain_lib.lua), and take a deep
        record's names list (:mod:`.names`) for the whole chain. A walk that followed one
        and did not end well (missing, cycle, too deep, a record gone) is walked again by
        its pointers only, so that a stale list never makes an error of a good chain.

        ``named`` (an id that says its record keeps a names list, and no sliding): the list
        is read first with a plain HMGET of ``m``, ``w`` and ``n:<start>``, no script; where
        it is not there (the list moved on to a child, or the mark was chance), the walk
        follows, one round trip later."""
        key = self.keys.thread(thread)
        if named and jumps and slide_ms <= 0:
            self.round_trips += 1
            try:
                m, w, raw = await io(self.link.client.hmget(key, self.keys.LARGEST_FIELD, self.keys.LAST_WRITE_FIELD,
                                                            self.keys.names_field(start)))
            except ResponseError as exc:
                if not str(exc).startswith("WRONGTYPE"):
                    raise translated(exc, f"thread {key!r}") from None
                m = w = raw = None  # the walk tells the key's type
            except Exception as exc:
                raise translated(exc, f"thread {key!r}") from None
            size = _largest_told(m, w)
            if isinstance(raw, bytes) and size is not None and names.count(raw) + 1 <= limit:
                return await self._by_names(thread, start, limit, slide_ms, raw, size)
        entries: list[str] = []
        seen: set[str] = set()
        cur, left, jumped = start, limit, False
        flag = b"1" if jumps else b"0"
        largest, sizing = 0, False
        while True:
            first = not entries
            slides = first and slide_ms > 0
            self.round_trips += 1
            async with translate_errors(f"thread {key!r}"):
                result = await (self._walk_slide if slides else self._walk)(self.link.client, [key], [
                    cur, _number(left), _number(slide_ms) if slides else b"0", _INLINE if first else b"-1", flag,
                    _STEPS, b"1" if sizing else b"0"])
            status, detail = as_text(result[0]), as_text(result[1])
            if result[2] == b"r":
                return (*_inline(status, detail, result[4:]), None)
            if result[2] == b"n":  # the start's names list (names.py)
                return await self._by_names(thread, start, limit, slide_ms, result[4], int(as_text(result[3])[1:]))
            jumped = jumped or result[2] == b"j"
            told = as_text(result[3])
            if told:
                sizing = sizing or told[0] == "s"
                largest = max(largest, int(told[1:]))
            walked = _walked(result[4:])
            entries.extend(walked)
            left -= len(walked)
            if status != "depth" or left <= 0 or not walked:
                break
            seen.update(walked)  # a loop across calls is still a loop
            if detail in seen:
                status = "cycle"
                break
            cur = detail
        if jumped and (status != "ok" or len(set(entries)) != len(entries)):
            # An error met after a jump, or an id twice (a loop through a list): by the pointers.
            return await self.walk(thread, start, limit, slide_ms, jumps=False)
        if status not in ("ok", "depth"):
            return status, detail, [], None  # the store raises for these: reading the records would be wasted
        records = await self._read(key, entries, largest or self.record_limit)
        for i, record in enumerate(records):
            if record is None:  # deleted since the walk saw it: the chain ends there, as missing
                if jumped:  # or never there: a stale jump list named it
                    return await self.walk(thread, start, limit, slide_ms, jumps=False)
                return "missing", entries[i], records[:i], entries[:i]
        return status, detail, records, entries

    async def read_known(self, thread: str, ids: Sequence[str]) -> tuple[Sequence[object] | None, int]:
        """The records of ``ids`` (a chain the caller knows, newest first) in one call of
        lua/chain_known.lua, while the thread's m tells that they come back within
        INLINE_BYTES; else ``(None, largest)``, nothing read (largest: the thread's largest
        record by m, -1 when m does not tell or the key holds another type)."""
        key = self.keys.thread(thread)
        self.round_trips += 1
        async with translate_errors(f"thread {key!r}"):
            reply = await self._known(self.link.client, [key], [_INLINE, *map(self.keys.data_field, ids)])
        if reply[0] == b"+":
            return reply[1:], 0
        return None, int(reply[1])

    async def _by_names(self, thread: str, start: str, limit: int, slide_ms: int, raw: bytes,
                        largest: int) -> tuple[str, str, Sequence[object], Sequence[str] | None]:
        """The chain that ``start``'s names list ``raw`` names, its records read (each at
        most ``largest``, the thread's m) for the store to check that they link up; by the
        pointers when the list is not whole names (only a hand edit makes that) or names a
        record that is not there."""
        ancestors = names.unpack(raw, thread)
        if ancestors is not None:
            entries = [start, *ancestors]
            records = await self._read(self.keys.thread(thread), entries, largest)
            if all(record is not None for record in records):
                return "ok", "", records, entries
        return await self.walk(thread, start, limit, slide_ms, jumps=False)

    async def _read(self, key: str, ids: list[str], record_bytes: int) -> list[object]:
        """The records of ``ids`` (newest first), each at most ``record_bytes``, by
        :func:`read_plan`: one HMGET per slice, a trip's slices pipelined."""
        fields = [self.keys.data_field(rid) for rid in ids]
        records: list[object] = []
        async with translate_errors(f"thread {key!r}"):
            for trip in read_plan(len(fields), record_bytes):
                self.round_trips += 1
                if len(trip) == 1:
                    records.extend(await io(self.link.client.hmget(key, fields[trip[0]])))
                    continue
                pipe = self.link.client.pipeline(transaction=False)
                for part in trip:
                    pipe.hmget(key, fields[part])
                for reply in await io(pipe.execute()):
                    records.extend(reply)
        return records

    async def delete(self, thread: str, response_id: str, token: bytes, ttl_ms: int = 0, keep_books: bool = False) -> bool:
        key = self.keys.thread(thread)
        self.round_trips += 1
        async with translate_errors(f"thread {key!r}"):
            result = await self._run(self._delete, [key], [response_id, token, b"", b"", _number(ttl_ms),
                                                         b"1" if keep_books else b"0"])
        if isinstance(result, list):
            raise _wrong_type(key, as_text(result[1]))
        return bool(result)

    async def thread_ids(self, thread: str) -> list[str]:
        key = self.keys.thread(thread)
        ids: list[str] = []
        cursor = 0
        async with translate_errors(f"thread {key!r}"):
            self.round_trips += 1
            largest = _largest_told(*await io(self.link.client.hmget(key, KeySpace.LARGEST_FIELD,
                                                                     KeySpace.LAST_WRITE_FIELD)))
            count = THREAD_SCAN_BLIND if largest is None else max(1, min(THREAD_SCAN_COUNT,
                                                                         THREAD_SCAN_BYTES // max(largest, 1)))
            while True:
                self.round_trips += 1
                # Pointer fields only, a page at a time: HSCAN's COUNT bounds each call.
                cursor, page = await io(self.link.client.hscan(key, cursor, match="p:*", count=count))
                ids.extend(as_text(field)[2:] for field in page)
                if cursor == 0:
                    return list(dict.fromkeys(ids))  # HSCAN may return a field twice

    async def drop(self, thread: str) -> None:
        key = self.keys.thread(thread)
        self.round_trips += 1
        async with translate_errors(f"thread {key!r}"):
            # UNLINK: a big hash is freed by a background thread, not by the shard's one.
            await io(self.link.client.execute_command("UNLINK", key))

    async def unpoint_many(self, response_ids: Sequence[str]) -> None:
        await self._on_locators(response_ids, lambda pipe, key: pipe.execute_command("DEL", key))

    async def _on_locators(self, response_ids: Sequence[str], queue: Callable[[Any, str], object]) -> None:
        """``queue(pipe, key)`` for the locators of ``response_ids`` (and their old layout's,
        where this prefix can have written them), LOCATOR_BATCH a round trip."""
        keys = [k for rid in response_ids for k in (self.keys.locator(rid), self.keys.legacy_locator(rid)) if k]
        for at in range(0, len(keys), LOCATOR_BATCH):
            self.round_trips += 1
            async with translate_errors(f"locator {keys[at]!r}"):
                pipe = self.link.client.pipeline(transaction=False)
                for key in keys[at:at + LOCATOR_BATCH]:
                    queue(pipe, key)
                await io(pipe.execute())

    async def _run(self, lua: LuaScript, keys: list[str], args: list[Any]) -> Any:
        """A write script, waited for by replicas if ``acks`` asks so (on the node of
        ``keys[0]``: a script's keys share one slot)."""
        if self.acks is None:
            return await lua(self.link.client, keys, args)
        return await write_acked(self.link.client, keys[0], ("EVALSHA", lua.sha, len(keys), *keys, *args), self.acks,
                                 fallback=("EVAL", lua.source, len(keys), *keys, *args))

    async def close(self) -> None:
        return None
