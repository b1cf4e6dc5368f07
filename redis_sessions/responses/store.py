"""The response-chain store, written once over a :class:`ChainEngine`.

``RedisResponseSessionStore`` builds it on a redis-py client; the memory store
(:mod:`redis_sessions.memory`) is the same class on an in-process fakeredis
server. Round trips (each engine call is one):

- ids minted here (``resp_<thread>_<random>``): ``get``, ``save``,
  ``resolve_chain`` and ``delete`` are one round trip each, at any depth;
- ids minted elsewhere add one locator read (``resolve_chain``: 2). A save of
  one takes 3 round trips' time: its locator read (alongside its foreign parent's,
  if any) so an id already in another thread is refused before anything is
  written, the script, and its locator write (alongside the refresh of a foreign
  parent's locator). A delete removes the locator, then checks the record is
  still gone (see ``_unpoint``).

Every write is idempotent. Each save and delete carries a random operation token
in its script's ARGV; the thread hash remembers the last few in a ring
(:mod:`.protocol`), so a script that redis-py re-sends after a lost reply has no
second effect and answers what the first copy did. The locator steps are
idempotent by construction (SET NX GET, PEXPIRE, DEL followed by a re-check).
Every argument is checked before the first command is sent.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any, Awaitable, Iterable, Mapping, Sequence, TypeVar

import msgspec

from .. import validate
from ..codec import ID_LEFT_OUT, RESPONSE_ID_LEFT_OUT, check_record, decode_session, encode, pack
from ..errors import ErrorCode, SessionError
from ..ids import marks_names, mint_id, mint_named_id, mint_response_id, mint_root_id, roots_thread, thread_of, validate_id
from ..keys import DEFAULT_PREFIX, KeySpace
from ..models import (
    ResponseSessionSnapshot,
    StoredResponseRequestSnapshot,
    StoredResponseSession,
    StoredResponseSnapshot,
)
from ..redis_client import DEFAULT_TIMEOUT, AnyRedis, RedisLink, bounded
from ..replication import DEFAULT_ACK_TIMEOUT, ReplicaAcks
from .chain import build_snapshot, check_walk, decode_chain, linked, request_input_items
from . import names
from ..limits import DEFAULT_MAX_RECORD_BYTES, DEFAULT_TTL_SECONDS, UNSET, _Unset
from ..tokens import new_token
from .protocol import ChainEngine, SaveRequest
from .redis_engine import RedisChainEngine

DEFAULT_MAX_DEPTH = 64
READ_ATTEMPTS = 3
"""How often resolve_chain reads a chain that changed between its walk and its read."""
OVERWRITE_CYCLE_WALK_LIMIT = 2_048
"""Most parent pointers an overwrite that moves a record under a new parent reads, to
check the record would not become its own ancestor (one HGET each: about 2 ms at the
most); a new parent deeper than that is refused (``session.chain.depth_exceeded``)."""
MAX_DEPTH_LIMIT = 100_000
MAX_RECORD_BYTES_LIMIT = 64 * 1024 * 1024
CLAIM_ATTEMPTS = 3
"""How often a save takes over a locator that points at a thread not holding its id, when
others keep taking it over first (each attempt reads that thread: one round trip)."""
A = TypeVar("A")
B = TypeVar("B")


async def _together(first: Awaitable[A], second: Awaitable[B], blocking: bool = False) -> tuple[A, B]:
    """Two independent calls (two keys, two slots) in one round trip's time; the
    first error, if any, is raised once both have finished. ``blocking`` (a sync
    client): one after the other, each already done when it returns (no loop)."""
    if blocking:
        outcomes: list[Any] = []
        for call in (first, second):
            try:
                outcomes.append(await call)
            except Exception as exc:
                outcomes.append(exc)
        one, two = outcomes
    else:
        one, two = await asyncio.gather(first, second, return_exceptions=True)
    for outcome in (one, two):
        if isinstance(outcome, BaseException):
            raise outcome
    return one, two


def _check_conversations(conversations: Any, keys: KeySpace, server: object) -> None:
    """The conversation store a response store appends to: a conversation store (it has
    ``turn_arguments``; not imported here, the two packages are siblings) with this
    store's prefix (the save script builds the conversation's key from the response
    store's own prefix), and for memory mode on the same in-process ``server`` (None:
    not in process)."""
    if conversations is None:
        return
    if not callable(getattr(conversations, "turn_arguments", None)) or getattr(conversations, "server", None) is not server:
        where = "on this store's in-process server" if server is not None else "on Redis"
        raise SessionError(ErrorCode.INPUT_INVALID, f"conversations must be a RedisConversationStore {where}, "
                           f"not {type(conversations).__name__}")
    theirs = getattr(conversations, "keys").prefix
    if theirs != keys.prefix:
        raise SessionError(ErrorCode.INPUT_INVALID, f"conversations use the prefix {theirs!r}, "
                           f"this store {keys.prefix!r}: they must share one")


def _both_chains() -> SessionError:
    return SessionError(ErrorCode.INPUT_INVALID, "Mutually exclusive parameters: a response continues either a "
                        "previous_response_id or a conversation, not both (as OpenAI refuses them)")


def _expected_mismatch(parent: str | None) -> SessionError:
    return SessionError(
        ErrorCode.STORE_CONFLICT,
        f"expected previous_response_id does not match: the record's parent is {parent!r}",
    )


def _nesting_fields(struct: type[msgspec.Struct]) -> tuple[str, ...]:
    """The fields of a stored type that may hold lists or dicts (so may nest)."""
    def may_nest(kind: msgspec.inspect.Type) -> bool:
        if isinstance(kind, msgspec.inspect.UnionType):
            return any(may_nest(t) for t in kind.types)
        return isinstance(kind, (msgspec.inspect.ListType, msgspec.inspect.DictType, msgspec.inspect.AnyType,
                                 msgspec.inspect.TupleType, msgspec.inspect.VarTupleType))
    info = msgspec.inspect.type_info(struct)
    assert isinstance(info, msgspec.inspect.StructType)
    return tuple(f.name for f in info.fields if may_nest(f.type))


_NESTED = tuple(
    (path, name)
    for path, struct in (("", StoredResponseSession), ("request.", StoredResponseRequestSnapshot),
                         ("response.", StoredResponseSnapshot))
    for name in _nesting_fields(struct)
)


def check_nesting(session: StoredResponseSession) -> None:
    """Refuse a record whose lists and dicts nest deeper than validate.MAX_NESTING,
    field by field, before msgspec recurses into it (RecursionError) or writes
    something a reader with less stack could not read back."""
    parts = {"": session, "request.": session.request, "response.": session.response}
    for path, name in _NESTED:
        value = getattr(parts[path], name, None)
        if isinstance(value, (dict, list, tuple)):
            validate.nesting(value, path + name)


# Every list, dict or struct msgpack writes starts with one of these bytes; other
# bytes (in strings, say) may be among them too, so counting them bounds the depth.
_CONTAINER_HEADERS = bytes(range(0x80, 0xA0)) + bytes(range(0xDC, 0xE0))
_SCAN_BELOW = 4096
"""Records shorter than this are scanned for container headers (about 0.5 ns a byte)
before the field-by-field walk (about 3 us for a gateway's record, whatever its size)."""


def encode_record(session: StoredResponseSession, compact: bool = False, compress: bool = False,
                  max_bytes: int | None = None) -> bytes:
    """The record's bytes, refusing one that nests too deeply (``session.input.invalid``
    naming the field). The field-by-field walk runs unless the bytes are few and hold too few container
    headers to nest that deep at all. ``max_bytes``: the most the record may encode to,
    counted before compression (``session.record.too_large``). A record whose fields do
    not have their types (msgspec does not check on construction) is refused: it would
    not read back.

    ``compact``: leave out the ids a reader knows (``id``, the record's field name, and
    ``response.id`` when it is the same); ``compress``: zstd, where it makes the record
    smaller. Both go behind a marker (:data:`codec.PACKED`) that a version before them
    refuses rather than misreads."""
    stored, flags = session, 0
    if compact:
        response = session.response
        flags = ID_LEFT_OUT
        if response.id == session.id:
            flags |= RESPONSE_ID_LEFT_OUT
            response = msgspec.structs.replace(response, id="")
        stored = msgspec.structs.replace(session, id="", response=response)
    try:
        blob = encode(stored)
    except SessionError:
        check_nesting(session)  # name the field, if that is why it would not encode
        raise
    if len(blob) >= _SCAN_BELOW or len(blob) - len(blob.translate(None, _CONTAINER_HEADERS)) > validate.MAX_NESTING:
        check_nesting(session)
    if max_bytes is not None and len(blob) > max_bytes:
        raise SessionError(ErrorCode.RECORD_TOO_LARGE,
                           f"response {session.id!r} encodes to {len(blob)} bytes; the limit is {max_bytes}")
    check_record(blob, f"response {session.id!r}")
    return pack(blob, flags, compress)


def _minted_thread(value: object, what: str) -> str | None:
    """The thread tag of an id minted here, which needs no other check (the minted
    pattern is stricter than any), or None for an id minted elsewhere, once it is checked."""
    thread = thread_of(value) if type(value) is str else None
    if thread is None:
        validate_id(value, what)
    return thread


def foreign_root_thread(response_id: str) -> str:
    """A foreign root's thread is derived from its id, so concurrent saves of one id agree."""
    return hashlib.sha1(response_id.encode("utf-8")).hexdigest()[:16]


class ChainStore:
    """Shared logic of every response-chain store. Use one of the subclasses."""

    """Whether the engine's calls wait on I/O (two independent ones then go out together)."""

    def __init__(
        self,
        engine: ChainEngine,
        keys: KeySpace,
        *,
        ttl_seconds: int | None,
        max_depth: int,
        max_record_bytes: int,
        sliding_ttl: bool,
        replay_instructions: bool,
        timeout: float | None,
        conversations: Any = None,
        response_expiry: bool = True,
        compact_records: bool = True,
        compression: bool = True,
    ) -> None:
        self._ttl_ms = validate.ttl_ms(ttl_seconds)
        self.response_expiry = validate.flag(response_expiry, "response_expiry")
        """Each response expires on its own, once no live response descends from it (the
        books of :mod:`.books`); False: a thread expires whole, as before this version."""
        self.compact_records = validate.flag(compact_records, "compact_records")
        """Records leave out the ids their reader knows (about 108 bytes of a gateway's
        response). Every build since compact records reads both forms; one from before
        them refuses a compact record as corrupt, so while such a worker still reads the
        store, pass False."""
        self.compression = validate.flag(compression, "compression")
        """Records of ``codec.COMPRESS_MIN_BYTES`` or more are stored zstd-compressed where
        that makes them smaller (English prose: about 2.6x at 20 KB). A build before this
        one refuses such a record as corrupt: while one still reads the store, pass False."""
        self.conversations = conversations
        """The conversation store a response with ``conversation_id`` appends its turn to,
        in the same step as its save (None: such responses are saved like any other)."""
        self.engine = engine
        self.keys = keys
        self.ttl_seconds = ttl_seconds
        self.max_depth = validate.integer(max_depth, "max_depth", minimum=1, maximum=MAX_DEPTH_LIMIT)
        self.max_record_bytes = validate.integer(max_record_bytes, "max_record_bytes", minimum=1024,
                                                 maximum=MAX_RECORD_BYTES_LIMIT)
        self.sliding_ttl = validate.flag(sliding_ttl, "sliding_ttl")
        self._slide_ms = self._ttl_ms if sliding_ttl else 0
        """The TTL every read of a record gives it again, in ms (0: reads give none), as
        the item and conversation stores keep it."""
        self.replay_instructions = validate.flag(replay_instructions, "replay_instructions")
        self.timeout = validate.seconds(timeout)
        self._memo = names.Memo()
        """The chains this store resolved or saved last: for the names lists of the saves
        that follow them, and the reads by names of the resolves (:mod:`.names`)."""

    @property
    def round_trips(self) -> int:
        """Calls made to the backend so far (each is one network round trip on Redis)."""
        return self.engine.round_trips

    async def _thread(self, response_id: str) -> str | None:
        return thread_of(response_id) or await self.engine.locate(response_id, self._slide_ms)

    @bounded
    async def new_response_id(self, previous_response_id: str | None = None, *,
                              conversation_id: str | None = None) -> str:
        """Mint an id that continues ``previous_response_id`` in its thread (one lookup
        only when the parent's id was minted elsewhere). With ``conversation_id``, an id
        for a response of that conversation (``resp_`` + 48 hex, found through its
        locator: the conversation's responses share its slot, not a minted thread)."""
        if conversation_id is not None:
            if previous_response_id is not None:
                raise _both_chains()
            validate_id(conversation_id, "conversation_id")
            return mint_id("resp")
        if previous_response_id is None:
            return mint_root_id()
        validate_id(previous_response_id, "previous_response_id")
        thread = await self._thread(previous_response_id)
        if thread is None:
            raise SessionError(ErrorCode.CHAIN_NOT_FOUND, f"previous_response_id {previous_response_id!r} was not found")
        if self._memo.marks(previous_response_id):
            # This store just resolved the parent's chain: the save under it will keep a
            # names list that a resolve reads (no inline reply), and the id says so.
            return mint_named_id(thread)
        return mint_response_id(thread)

    # -- reads --------------------------------------------------------------
    @bounded
    async def get(self, response_id: str) -> StoredResponseSession | None:
        thread = _minted_thread(response_id, "response id")
        slide_ms = self._slide_ms
        if thread is None:
            thread = await self.engine.locate(response_id, slide_ms)
            if thread is None:
                return None
        try:
            data = await self.engine.fetch(thread, response_id, slide_ms)
        except Exception as exc:
            raise self.engine.failed(exc, thread) from None
        if data is None:
            return None
        return decode_session(data, lambda: f"response {response_id!r} in {self.keys.thread(str(thread))!r}", response_id,
                              self.max_record_bytes)

    @bounded
    async def resolve_chain(
        self,
        previous_response_id: str | None,
        *,
        max_depth: int | None = None,
        include_incomplete: bool = False,
    ) -> ResponseSessionSnapshot:
        """The chain ending at ``previous_response_id``, oldest first, and its input items.

        Never shortened: a missing ancestor, a cycle, a chain longer than
        ``max_depth`` or a turn that is not completed raises a coded error.
        ``max_depth=0`` accepts only the empty chain (``previous_response_id=None``):
        a response that exists is ``session.chain.depth_exceeded`` (and touches no
        TTL), one that does not is ``session.chain.not_found`` (GodeX, which checks
        the depth before it reads, answers depth_exceeded for that one too).
        """
        if previous_response_id is None:
            return ResponseSessionSnapshot(previous_response_id=None, sessions=[], input_items=[])
        thread = _minted_thread(previous_response_id, "previous_response_id")
        starts_thread = thread is not None and roots_thread(previous_response_id, thread)
        # An id minted under a chain read by its list (ids.mint_named_id): the engine reads
        # the list first, with a plain HMGET, where it may (a first walk, not sliding).
        named = thread is not None and not starts_thread and marks_names(previous_response_id, thread)
        depth = self.max_depth if max_depth is None else validate.integer(
            max_depth, "max_depth", minimum=0, maximum=MAX_DEPTH_LIMIT)
        if include_incomplete is not False:  # the default needs no check (nor a call)
            validate.flag(include_incomplete, "include_incomplete")
        if thread is None:
            thread = await self.engine.locate(previous_response_id, self._slide_ms)
            if thread is None:
                check_walk("missing", previous_response_id, previous_response_id, depth)
                raise AssertionError("unreachable")
        slide_ms = self._slide_ms
        if depth and not slide_ms and starts_thread:
            # A root by its id: one plain read of its record, no walk (depth 1 at the cost
            # of a get). The record's own parent decides; one saved under a parent is walked.
            try:
                data = await self.engine.fetch(thread, previous_response_id, 0)
            except Exception as exc:
                raise self.engine.failed(exc, thread) from None
            if data is None:
                check_walk("missing", previous_response_id, previous_response_id, depth)
            root = decode_session(data, lambda: f"{self.keys.thread(thread)} (record 0 of the chain)",
                                  previous_response_id, self.max_record_bytes)
            if root.id == previous_response_id and root.previous_response_id is None:
                return build_snapshot(previous_response_id, [root], include_incomplete=include_incomplete,
                                      replay_instructions=self.replay_instructions)
        known = self._memo.known(previous_response_id) if depth and not slide_ms else None
        if known is not None and names.count(known) < depth:
            by_names = await self._read_known(thread, previous_response_id, known)
            if by_names is not None:
                return build_snapshot(previous_response_id, by_names, include_incomplete=include_incomplete,
                                      replay_instructions=self.replay_instructions)
        for attempt in range(1, READ_ATTEMPTS + 1):
            # max_depth=0: one record is read only to tell "too long" from "missing".
            # After a chain that did not link up, by the pointers only: a jump list left
            # stale by an overwrite elsewhere in the thread costs one more walk, never a
            # wrong chain.
            status, detail, records, ids = await self.engine.walk(
                thread, previous_response_id, depth or 1, slide_ms if depth else 0, attempt == 1,
                named=named and depth > 0)
            if depth == 0 and records:
                status, detail = "depth", previous_response_id
            check_walk(status, detail, previous_response_id, depth)
            sessions = decode_chain(records, self.keys.thread(thread), previous_response_id, ids, self.max_record_bytes)
            # A long chain is walked, then read: a record overwritten in between (another
            # parent) shows here, and the chain is read again rather than returned mixed.
            if linked(sessions, previous_response_id):
                if len(sessions) > 1:
                    self._remember(previous_response_id, thread, sessions, records, ids is None)
                break
            if attempt == READ_ATTEMPTS:
                raise SessionError(ErrorCode.BACKEND_UNAVAILABLE,
                                   f"the chain of {previous_response_id!r} kept changing while it was read")
        return build_snapshot(
            previous_response_id,
            sessions,
            include_incomplete=include_incomplete,
            replay_instructions=self.replay_instructions,
        )

    def _remember(self, start: str, thread: str, sessions: list[StoredResponseSession],
                  records: Sequence[Any], inline: bool) -> None:
        """The names of ``start``'s ancestors (``sessions``, oldest first, end at it) and
        its largest record, for a save under it and the next resolve of it (:mod:`.names`);
        ``inline``: the engine read the records with its walk. Not when an id was minted
        for another thread, or elsewhere."""
        packed = names.pack([session.id for session in reversed(sessions[:-1])], thread)
        if packed is not None:
            self._memo.remember(start, packed, max(map(len, records)), inline)

    async def _read_known(self, thread: str, start: str, ancestors: bytes) -> list[StoredResponseSession] | None:
        """``start``'s chain read by the names the memo holds, in one call that reads no
        pointer (lua/chain_known.lua); None, having forgotten them, where the engine
        refused (the thread holds a record too large for an inline reply), a record is gone
        or the records do not link up (another worker overwrote or deleted one): the walk
        reads the chain then, so a stale memo costs a round trip, never a wrong chain."""
        ids = [start, *(names.unpack(ancestors, thread) or ())]
        records, largest = await self.engine.read_known(thread, ids)
        if records is None:
            self._memo.outgrown(start, largest)
            return None
        if all(record is not None for record in records):
            sessions = decode_chain(records, self.keys.thread(thread), start, ids, self.max_record_bytes)
            if linked(sessions, start):
                return sessions
        self._memo.forget(start)
        return None

    def _names(self, parent: str | None, thread: str) -> tuple[bytes, bytes]:
        """What a save under ``parent`` sends for its names list: the parent packed (b"":
        none), and its ancestors as this store last resolved them (b"": not remembered)."""
        if parent is None:
            return b"", b""
        own = names.pack([parent], thread)
        if own is None:
            return b"", b""
        above = self._memo.above(parent)
        return own, (above if len(above) < names.NAMES_MAX * names.NAME_BYTES else b"")

    # -- writes -------------------------------------------------------------
    @bounded
    async def save(
        self,
        session: StoredResponseSession,
        *,
        expected_previous_response_id: str | None | _Unset = UNSET,
        overwrite: bool = False,
    ) -> None:
        """Store ``session`` atomically, or refuse with a coded error and write nothing.

        One script checks that the id is new (unless ``overwrite``), that the
        parent is ``expected_previous_response_id`` when given (None: must be a
        root; on overwrite the stored parent must match too), and that the
        parent exists; then it writes the record and extends the thread's TTL.

        Idempotent: saving a record that is already stored, the same bytes under
        the same parent, succeeds and writes nothing, so a retry after a timeout is
        safe; and a script redis-py re-sends after a lost reply is recognised by
        its operation token and has no second effect. A different record under an
        existing id is still ``session.store.conflict``.
        """
        response_id, parent, expected, blob = self._check_save(session, expected_previous_response_id, overwrite)
        if self.conversations is not None and session.conversation_id is not None:
            await self._save_turn(session, response_id, expected, blob, overwrite)
            return
        thread = await self._thread_for_save(response_id, parent)
        request = SaveRequest(response_id, parent or "", expected is not None, expected or "", overwrite, blob,
                              self._ttl_ms, OVERWRITE_CYCLE_WALK_LIMIT, new_token(), self.response_expiry,
                              *self._names(parent, thread))
        status, detail = await self.engine.save(thread, request)
        if status != "ok" and not (status == "exists" and await self._already_saved(thread, session)):
            await self._refused(status, detail, response_id, parent, thread)
        if request.names:  # the parent, packed: the child's chain is the parent's, if remembered
            self._memo.saved(parent or "", response_id, request.names, len(blob))
        await self._after_save(response_id, parent, thread, request.renew)

    async def _already_saved(self, thread: str, session: StoredResponseSession) -> bool:
        """Whether the record stored under the id is ``session``, in another encoding than
        this store's (full or compact, or an older version's): then the save is done, as
        for the same bytes. One more read, on a refusal only."""
        try:
            data = await self.engine.fetch(thread, session.id, 0)
        except Exception as exc:
            raise self.engine.failed(exc, thread) from None
        if data is None:
            return False
        try:
            return decode_session(data, "", session.id, self.max_record_bytes) == session
        except SessionError:
            return False

    async def _save_turn(self, session: StoredResponseSession, response_id: str, expected: str | None, blob: bytes,
                         overwrite: bool) -> None:
        """A response of a conversation: saved into the conversation's slot (thread
        ``c:<conversation id>``), and the turn's items (its input, as
        :func:`request_input_items` shapes it, then its output; ids minted where missing)
        appended to the conversation by the same script. Its locator is set first, so an
        id saved elsewhere is refused before anything is written."""
        conversations = self.conversations
        conversation_id = validate_id(session.conversation_id, "conversation_id")
        if session.previous_response_id is not None:
            raise _both_chains()
        if overwrite:
            raise SessionError(ErrorCode.INPUT_INVALID, "a conversation's response is not overwritten: its turn "
                               "is in the conversation already")
        if thread_of(response_id) is not None:
            raise SessionError(ErrorCode.ID_INVALID, f"{response_id!r} was minted for a thread; mint a conversation's "
                               "response ids with new_response_id(conversation_id=...)")
        items = request_input_items(session.request.input) + list(session.response.output)
        pairs = conversations.turn_arguments(items)
        thread = "c:" + conversation_id
        claimed = await self._claim(response_id, thread)
        if claimed is False:
            raise SessionError(ErrorCode.STORE_CONFLICT, f"response {response_id!r} already exists")
        request = SaveRequest(response_id, "", expected is not None, expected or "", overwrite, blob,
                              self._ttl_ms, OVERWRITE_CYCLE_WALK_LIMIT, new_token(), self.response_expiry)
        status, detail = await self.engine.save_turn(thread, request, conversations, conversation_id, pairs)
        if status == "ok" or (status == "exists" and await self._already_saved(thread, session)):
            return
        if claimed:
            await self.engine.unpoint(response_id)  # the locator this call set points at nothing
        if status == "nf":
            raise SessionError(ErrorCode.CONVERSATION_NOT_FOUND, f"conversation {conversation_id!r} was not found")
        if status == "dup":
            raise SessionError(ErrorCode.STORE_CONFLICT, f"conversation {conversation_id!r} already holds an item {detail!r}")
        if status == "corrupt":
            raise SessionError(ErrorCode.RECORD_CORRUPT, f"conversation {conversation_id!r} holds a corrupt header")
        await self._refused(status, detail, response_id, None, thread)

    def _check_save(self, session: object, expected: object, overwrite: object) -> tuple[str, str | None, str | None, bytes]:
        """Every argument of a save, checked before anything is sent: the id, the
        parent, the expectation ('' for an expected root, None for none), the record
        bytes. Refusals that need no stored state are made here."""
        if not isinstance(session, StoredResponseSession):
            raise SessionError(ErrorCode.INPUT_INVALID, f"save() takes a StoredResponseSession, not {type(session).__name__}")
        response_id = validate_id(session.id)
        parent = session.previous_response_id
        if parent is not None:
            validate_id(parent, "previous_response_id")
        validate.flag(overwrite, "overwrite")
        want: str | None = None
        if not isinstance(expected, _Unset):
            want = "" if expected is None else validate_id(expected, "expected_previous_response_id")
            if (parent or "") != want:
                raise _expected_mismatch(parent)
        blob = encode_record(session, self.compact_records, self.compression, self.max_record_bytes)
        return response_id, parent, want, blob

    async def _thread_for_save(self, response_id: str, parent: str | None) -> str:
        own = thread_of(response_id)
        parent_thread = thread_of(parent) if parent else None
        if own is not None:
            if parent_thread is not None and parent_thread != own:
                raise SessionError(
                    ErrorCode.ID_INVALID,
                    f"{response_id!r} was minted for another thread than its parent {parent!r}; "
                    "mint it with new_response_id(previous_response_id)",
                )
            return own
        # A foreign id: read its own locator first, so that an id already saved into
        # another thread is refused before anything is written (together with the
        # parent's, when that needs reading too). Plain reads: the parent's locator
        # gets its new TTL only once the save has succeeded.
        if parent is None or parent_thread is not None:
            thread: str | None = parent_thread or foreign_root_thread(response_id)
            current = await self.engine.locate(response_id, 0)
        else:
            thread, current = await _together(self.engine.locate(parent, 0), self.engine.locate(response_id, 0),
                                              self.engine.blocking)
        if thread is None:
            raise SessionError(ErrorCode.CHAIN_NOT_FOUND, f"previous_response_id {parent!r} was not found")
        if current is not None and current != thread and await self.engine.has(current, response_id):
            raise SessionError(ErrorCode.STORE_CONFLICT, f"response {response_id!r} already exists")
        return thread  # a locator whose thread does not hold the id blocks nothing (_claim)

    async def _after_save(self, response_id: str, parent: str | None, thread: str, renew: list[str]) -> None:
        """The locator steps of a save: point a foreign id at its thread (always: a delete
        may have removed the locator since it was read), and renew the locators of its
        foreign parent and of the ancestors the script named (lua/chain_lib.lua, l:) for
        two TTLs, so that they live as long as their records, which the new one keeps.
        Idempotent; sent together (other slots)."""
        if parent is not None and thread_of(parent) is None and self._ttl_ms:
            renew = [parent, *renew]
        touch = self.engine.touch_many(renew, 2 * self._ttl_ms) if renew else None
        if thread_of(response_id) is not None:
            if touch is not None:
                await touch
        elif touch is not None:
            await _together(self._point(response_id, thread), touch, self.engine.blocking)
        else:
            await self._point(response_id, thread)

    async def _claim(self, response_id: str, thread: str) -> bool | None:
        """Point a foreign id's locator at ``thread``: True when this call set it, None when
        it pointed there already (a re-sent copy finds its own thread), False when it points
        at another thread that holds the id (a save there came first). A locator whose
        thread does not hold the id (a crash between a conversation save's steps left it)
        blocks nothing: it is taken over by a compare-and-set, so of two callers one wins."""
        old = await self.engine.point(response_id, thread, self._ttl_ms)
        for _ in range(CLAIM_ATTEMPTS):
            if old is None:
                return True
            if old == thread:
                return None
            if await self.engine.has(old, response_id):
                return False
            before = await self.engine.repoint(response_id, old, thread, self._ttl_ms)
            if before is None or before == old:
                return True
            old = before
        return False

    async def _point(self, response_id: str, thread: str) -> None:
        if await self._claim(response_id, thread) is False:
            # The same foreign id was just saved into another thread by someone else:
            # theirs came first, so take ours back out rather than keep two.
            await self.engine.delete(thread, response_id, new_token(), self._ttl_ms, self.response_expiry)
            raise SessionError(ErrorCode.STORE_CONFLICT, f"response {response_id!r} already exists")

    async def _refused(self, status: str, detail: str, response_id: str, parent: str | None, thread: str) -> None:
        if status == "exists":
            raise SessionError(ErrorCode.STORE_CONFLICT, f"response {response_id!r} already exists")
        if status == "expected":
            raise _expected_mismatch(detail or None)
        if status == "parent_missing":
            elsewhere = await self.engine.locate(detail, 0) if thread_of(detail) is None else None
            if elsewhere is not None and elsewhere != thread:
                raise SessionError(
                    ErrorCode.ID_INVALID,
                    f"{response_id!r} was minted for another thread than its parent {parent!r}; "
                    "mint it with store.new_response_id(previous_response_id)",
                )
            raise SessionError(ErrorCode.CHAIN_NOT_FOUND, f"previous_response_id {detail!r} was not found")
        if status == "cycle":
            raise SessionError(ErrorCode.CHAIN_CYCLE_DETECTED, f"saving {response_id!r} under {parent!r} would make a cycle")
        if status == "too_deep":
            raise SessionError(ErrorCode.CHAIN_DEPTH_EXCEEDED, f"moving {response_id!r} under {parent!r}: the new parent "
                               f"is more than {OVERWRITE_CYCLE_WALK_LIMIT} deep, past what one check reads")
        check_walk(status, detail, response_id, self.max_depth)

    @bounded
    async def delete(self, response_id: str) -> bool:
        """Delete one response. Its descendants stay; resolving through the gap raises
        ``session.chain.not_found`` naming it, never a shortened history.

        Idempotent: a script re-sent after a lost reply answers what the first copy
        did and deletes nothing more (its token is remembered in the thread)."""
        validate_id(response_id)
        thread = await self._thread(response_id)
        if thread is None:
            return False
        self._memo.forget(response_id)
        deleted = await self.engine.delete(thread, response_id, new_token(), self._ttl_ms, self.response_expiry)
        if thread_of(response_id) is None:
            await self._unpoint(response_id, thread)
        return deleted

    @bounded
    async def delete_thread(self, response_id: str) -> int:
        """Delete the whole conversation ``response_id`` belongs to: every response of its
        thread (its ancestors, its descendants, their other branches) and their locators.
        Returns how many responses this call deleted (0 for an unknown id, and for a call
        that finds the thread already gone, such as a retry).

        The thread is one key, removed with UNLINK (freed in the background); the ids of
        foreign responses, whose locators go too, are listed first in bounded HSCAN pages.
        A save racing this call either lands before (and is deleted) or finds its parent
        gone (``session.chain.not_found``); a locator left behind by a crash between the
        steps points at nothing and expires with its TTL."""
        validate_id(response_id)
        thread = await self._thread(response_id)
        if thread is None or not await self.engine.has(thread, response_id):
            return 0
        ids = await self.engine.thread_ids(thread)
        await self.engine.drop(thread)
        foreign = [rid for rid in ids if thread_of(rid) is None]
        if foreign:
            await self.engine.unpoint_many(foreign)
        return len(ids)

    async def _unpoint(self, response_id: str, thread: str) -> None:
        """Remove a foreign id's locator, unless a save put the record back meanwhile.

        A save of the same id racing this delete may write its record after our
        script removed it and find the locator still in place; removing the locator
        then would leave a successful save unreadable by id. So look again once the
        locator is gone, and point it back if the record is there: whatever the
        interleaving, a record in its thread ends up with its locator."""
        await self.engine.unpoint(response_id)
        if await self.engine.has(thread, response_id):
            await self.engine.point(response_id, thread, self._ttl_ms)

    async def close(self) -> None:
        await self.engine.close()

    async def __aenter__(self) -> "ChainStore":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class RedisResponseSessionStore(ChainStore):
    """Response chains in Redis (standalone or Cluster), from a redis-py asyncio client."""

    def __init__(
        self,
        client: AnyRedis | None,
        *,
        key_prefix: str = DEFAULT_PREFIX,
        ttl_seconds: int | None = DEFAULT_TTL_SECONDS,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        sliding_ttl: bool = False,
        replay_instructions: bool = False,
        timeout: float | None = DEFAULT_TIMEOUT,
        link: RedisLink | None = None,
        replica_acks: int = 0,
        replica_ack_timeout: float = DEFAULT_ACK_TIMEOUT,
        conversations: Any = None,
        response_expiry: bool = True,
        compact_records: bool = True,
        compression: bool = True,
    ) -> None:
        """``client``: a redis-py asyncio ``Redis`` or ``RedisCluster``, never closed here.
        ``timeout``: seconds one call may take in total, retries included (None: no budget).
        ``replica_acks``: a write returns only once that many replicas have it (WAIT on the
        same connection), else ``session.backend.not_replicated`` after ``replica_ack_timeout``.
        ``conversations``: a :class:`RedisConversationStore` on the same Redis and prefix;
        a response saved with ``conversation_id`` then appends its turn to it atomically."""
        keys = KeySpace(key_prefix)
        _check_conversations(conversations, keys, getattr(self, "server", None))
        acks = ReplicaAcks.of(replica_acks, replica_ack_timeout)
        self.link = link if link is not None else RedisLink(client, timeout=timeout)
        self.link.owner = "the response store"
        engine = RedisChainEngine(self.link, keys, acks)
        super().__init__(
            engine, keys, ttl_seconds=ttl_seconds, max_depth=max_depth,
            max_record_bytes=max_record_bytes, sliding_ttl=sliding_ttl, replay_instructions=replay_instructions,
            timeout=timeout, conversations=conversations, response_expiry=response_expiry,
            compact_records=compact_records, compression=compression,
        )
        engine.limit_records(self.max_record_bytes)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        cluster: bool | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        redis_kwargs: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> "RedisResponseSessionStore":
        """A store with its own client per event loop (closed by :meth:`close`);
        ``redis+cluster://`` for a cluster. ``redis_kwargs`` go to redis-py's client
        (``ssl_ca_certs``, ``username``, ``max_connections``, ...). No I/O."""
        link = RedisLink.to_url(url, cluster=cluster, timeout=timeout, redis_kwargs=redis_kwargs)
        return cls(None, timeout=timeout, link=link, **options)

    @property
    def client(self) -> AnyRedis:
        """The redis-py client this store uses on the running event loop."""
        return self.link.client

    async def close(self) -> None:
        """Close the client if this store built it (``from_url``, config); else nothing."""
        await self.link.close()


def _initial_sessions(sessions: object) -> list[StoredResponseSession]:
    """The constructor's ``sessions``, each checked as an id would be before a save."""
    if isinstance(sessions, (str, bytes, bytearray, Mapping, StoredResponseSession)) or not isinstance(sessions, Iterable):
        raise SessionError(ErrorCode.INPUT_INVALID,
                           f"sessions must be an iterable of StoredResponseSession, not {type(sessions).__name__}")
    given = list(sessions)
    for session in given:
        if not isinstance(session, StoredResponseSession):
            raise SessionError(ErrorCode.INPUT_INVALID,
                               f"sessions must hold StoredResponseSession, not {type(session).__name__}")
        validate_id(session.id)
        if session.previous_response_id is not None:
            validate_id(session.previous_response_id, "previous_response_id")
    return given


def parents_first(sessions: list[StoredResponseSession]) -> list[StoredResponseSession]:
    """``sessions`` reordered so that each comes after its parent when that is among
    them, otherwise in the order given; linear in their number. Another record under
    an id already placed stays in, for ``save`` to judge (the same record is the same
    save; a different one is a conflict). Refuses parent pointers that loop."""
    first: dict[str, StoredResponseSession] = {}
    for session in sessions:
        first.setdefault(session.id, session)
    placed: set[str] = set()
    ordered: list[StoredResponseSession] = []
    for session in sessions:
        if session.id in placed:
            if session is not first[session.id]:
                ordered.append(session)
            continue
        path: list[StoredResponseSession] = []
        on_path: set[str] = set()
        cur: StoredResponseSession | None = session
        while cur is not None and cur.id not in placed:
            if cur.id in on_path:
                raise SessionError(ErrorCode.CHAIN_CYCLE_DETECTED, f"the sessions' parents loop back to {cur.id!r}")
            on_path.add(cur.id)
            path.append(cur)
            parent = cur.previous_response_id
            cur = first.get(parent) if parent is not None else None
        for turn in reversed(path):
            ordered.append(turn)
            placed.add(turn.id)
    return ordered
