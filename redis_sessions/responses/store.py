"""The response store: GodeX's ``ResponseSessionStore`` (get, save, resolve_chain, delete,
close) on Redis, on either API, and on an in-process server in memory mode.

A conversation thread is one hash (``lua/chain_lib.lua`` and docs/key-layout.md have its
fields); every call on it is one script or one plain read, through the store's edge
(:mod:`..edge`), on a standalone server and on a cluster alike. Round trips:

- ids minted here (``resp_<thread>_<random>``, :func:`..ids.new_response_id`): ``get``,
  ``save`` and ``delete`` take one each, ``resolve_chain`` one while the chain's records,
  counted at the thread's largest, fit ``INLINE_BYTES`` (they come back with the walk),
  else two or more (the walk, then HMGETs of the records in bounded slices);
- an id minted elsewhere has a locator key naming its thread: one more read to find it;
  a save reads its locator first (so an id saved in another thread is refused before
  anything is written), then points it at its thread; a delete removes it, then checks
  that no save put the record back meanwhile.

Every write is idempotent: each carries an operation token in its script's ARGV, which
the thread remembers (lua/tokens.lua), so a script redis-py re-sends after a lost reply
has no second effect and answers what the first did; the locator steps are idempotent
by construction (SET NX GET, PEXPIRE, a compare-and-set). Every argument is checked
before the first command is sent. The store keeps no state between calls: every worker
and thread takes the same path whatever it saw before.
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable, Mapping, Sequence

from .. import validate
from ..budget import bounded
from ..codec import decode_session, encode_record
from ..edge import Edge, Refusal, failed
from ..errors import ErrorCode, SessionError
from ..ids import mint_id, mint_response_id, new_thread_tag, thread_of, validate_id
from ..keys import KeySpace
from ..limits import UNSET, _Unset
from ..link import AnyRedis, RedisLink, as_text
from ..models import ResponseSessionSnapshot, StoredResponseSession
from ..options import Configured, MAX_DEPTH_LIMIT, ResponseOptions
from ..replication import ReplicaAcks
from ..scripts import script
from ..tokens import new_token
from .chain import build_snapshot, check_walk, decode_chain, linked, request_input_items, thread_header

INLINE_BYTES = 8192
"""A chain whose records (each counted at the thread's largest) total at most this comes
back inside the walk's reply, in one round trip. Redis's Lua copies every byte it hands
back (docs/benchmarks.md#unit-costs), while a second request costs the caller a round trip:
past a few KB the copy would cost the shard more than the trip saves."""
WALK_STEPS = 256
"""Pointers one walk call reads at most, so no call holds the shard long; a longer chain
takes one call per 256."""
READ_SLICE_BYTES = 2 << 20
"""Most record bytes one HMGET reads, every record counted at the thread's largest."""
SLICE_RECORDS = 256
"""Most records one HMGET reads (small records cost by the record more than by the byte)."""
SLICES_PER_TRIP = 4
"""HMGETs one round trip pipelines: Redis runs a socket's commands back to back, so every
other client waits for a whole trip."""
READ_ATTEMPTS = 3
"""How often resolve_chain reads a chain that changed between its walk and its read."""
CYCLE_WALK_LIMIT = 2_048
"""Most parent pointers an overwrite that moves a record under a new parent reads, to
check it would not become its own ancestor; a deeper new parent is refused."""
CLAIM_ATTEMPTS = 3
"""How often a save takes over a locator that points at a thread not holding its id."""
SCAN_BYTES = 1 << 20
"""Record bytes one HSCAN page of a thread visits at most (delete_thread): Redis copies
every field a page visits, values included, before it filters them."""


def hscan_count(largest: int, most: int) -> int:
    """Fields one HSCAN of a thread visits at most, at most ``most``: Redis copies the value
    of every field it visits, so the thread's largest record decides (``SCAN_BYTES``)."""
    return max(1, min(most, SCAN_BYTES // max(largest, 1)))
LOCATOR_BATCH = 512
"""Locator DELs, or PEXPIREs, sent in one pipeline."""
COVER_CALLS = 400
"""Most calls of lua/chain_cover.lua one save makes (256 records each)."""

_SAVE, _TURN, _WALK, _DELETE = script("chain_save"), script("chain_save_turn"), script("chain_walk"), script("chain_delete")
_COVER, _REPOINT, _DROP = script("chain_cover"), script("chain_repoint"), script("chain_drop")


def _both_chains() -> SessionError:
    return SessionError(ErrorCode.INPUT_INVALID, "Mutually exclusive parameters: a response continues either a "
                        "previous_response_id or a conversation, not both (as OpenAI refuses them)")


def _other_thread(response_id: str, parent: str | None) -> SessionError:
    return SessionError(ErrorCode.ID_INVALID, f"{response_id!r} was minted for another thread than its parent "
                        f"{parent!r}; mint it with new_response_id(previous_response_id)")


def foreign_root_thread(response_id: str) -> str:
    """A foreign root's thread is derived from its id, so concurrent saves of one id agree."""
    return hashlib.sha1(response_id.encode("utf-8")).hexdigest()[:16]


def read_plan(count: int, record_bytes: int) -> list[list[slice]]:
    """How ``count`` records of at most ``record_bytes`` each are read after a walk: round
    trips, each a list of HMGETs (slices of the records, in order) sent together."""
    per = max(1, min(SLICE_RECORDS, READ_SLICE_BYTES // max(1, record_bytes)))
    slices = [slice(at, min(count, at + per)) for at in range(0, count, per)]
    return [slices[at:at + SLICES_PER_TRIP] for at in range(0, len(slices), SLICES_PER_TRIP)]


class RedisResponseSessionStore(Configured):
    """Response chains in Redis (standalone, Cluster or Sentinel), from a redis-py asyncio
    client (``client``, never closed here) or a URL (:meth:`from_url`).

    ``options``: :class:`..options.ResponseOptions` (``key_prefix``, ``ttl_seconds``,
    ``max_depth``, ``max_record_bytes``, ``sliding_ttl``, ``replay_instructions``,
    ``response_expiry``, ``compression``, ``timeout``, ``replica_acks``,
    ``replica_ack_timeout``). ``conversations``: a :class:`~redis_sessions.RedisConversationStore`
    on the same Redis and prefix; a response saved with ``conversation_id`` then appends
    its turn to that conversation in the same script.
    """

    OPTIONS = ResponseOptions

    def __init__(self, client: AnyRedis | None = None, *, link: RedisLink | None = None,
                 conversations: Any = None, **options: Any) -> None:
        self.options = opts = ResponseOptions.of(**options)
        self.keys = KeySpace(opts.key_prefix)
        self.link = link if link is not None else RedisLink(client, timeout=opts.timeout)
        self.link.owner = "the response store"
        self.timeout = self.link.timeout
        self.edge = Edge(self.link, ReplicaAcks.of(opts.replica_acks, opts.replica_ack_timeout))
        _check_conversations(conversations, self.keys, getattr(self, "server", None))
        self.conversations = conversations
        self._ttl_ms, self._slide_ms = opts.ttl_ms, opts.slide_ms

    @classmethod
    def from_url(cls, url: str, *, cluster: bool | None = None, redis_kwargs: Mapping[str, Any] | None = None,
                 conversations: Any = None, **options: Any) -> "RedisResponseSessionStore":
        """A store with its own client per event loop (closed by :meth:`close`):
        ``redis://``, ``rediss://``, ``redis+cluster://``, ``redis+sentinel://``;
        ``redis_kwargs`` go to redis-py's client. No I/O."""
        timeout = ResponseOptions.of(**options).timeout
        return cls(link=RedisLink.to_url(url, cluster=cluster, timeout=timeout, redis_kwargs=redis_kwargs),
                   conversations=conversations, **options)


    @property
    def client(self) -> AnyRedis:
        """The redis-py client this store uses on the running event loop."""
        return self.link.client

    @property
    def round_trips(self) -> int:
        """Calls made to Redis so far (each is one network round trip)."""
        return self.edge.trips

    async def close(self) -> None:
        """Close the client this store built (``from_url``, config) on the running loop;
        a caller's client is never closed. A closed store refuses every call."""
        await self.link.close()

    async def __aenter__(self) -> "RedisResponseSessionStore":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # -- ids and threads ---------------------------------------------------------
    @bounded
    async def new_response_id(self, previous_response_id: str | None = None, *,
                              conversation_id: str | None = None, owner: str | None = None) -> str:
        """Mint an id that continues ``previous_response_id`` in its thread (one lookup
        only when the parent's id was minted elsewhere; with ``owner``, two, the second
        checking that its thread is that owner's). With ``conversation_id``, an id
        for a response of that conversation (``resp_`` + 48 hex, found through its
        locator: the conversation's responses share its slot, not a minted thread)."""
        who = validate.owner(owner)
        if conversation_id is not None:
            if previous_response_id is not None:
                raise _both_chains()
            validate_id(conversation_id, "conversation_id")
            return mint_id("resp")
        if previous_response_id is None:
            return mint_response_id(new_thread_tag())
        validate_id(previous_response_id, "previous_response_id")
        thread = await self._thread(previous_response_id)
        if thread is None or (who and thread_of(previous_response_id) is None
                              and not await self._has(thread, previous_response_id, who)):
            raise SessionError(ErrorCode.CHAIN_NOT_FOUND, f"previous_response_id {previous_response_id!r} was not found")
        return mint_response_id(thread)

    async def _thread(self, response_id: str) -> str | None:
        return thread_of(response_id) or await self._locate(response_id, self._slide_ms)

    async def _locate(self, response_id: str, slide_ms: int = 0) -> str | None:
        """The thread of a foreign id, from its locator (its TTL given again with ``slide_ms``)."""
        key = self.keys.locator(response_id)
        command = ("GETEX", key, "PX", slide_ms) if slide_ms else ("GET", key)
        value = await self.edge.command(*command, where=f"locator {key!r}")
        return None if value is None else as_text(value)

    # -- reads -------------------------------------------------------------------
    @bounded
    async def get(self, response_id: str, *, owner: str | None = None) -> StoredResponseSession | None:
        """The response, or None (also when it is another ``owner``'s, see
        docs/guarantees.md#owners); ``sliding_ttl``: its thread's TTL, and the record's own
        deadline, given again."""
        who = validate.owner(owner) if owner is not None else ""
        thread = thread_of(response_id) if type(response_id) is str else None
        if thread is None:
            validate_id(response_id, "response id")
            thread = await self._locate(response_id, self._slide_ms)
            if thread is None:
                return None
        key = self.keys.thread(thread)
        data = None
        if self._slide_ms:  # the walk slides the TTL, and brings a small record back with it
            _, _, largest, entries = await self._walk(key, response_id, 1, self._slide_ms, who)
            if not entries:
                return None
            data = entries[0] if largest < 0 else None
        if data is None:
            try:
                if who:  # the owner and the record in one atomic read, checked before it is decoded
                    head, data = await self.edge.call("HMGET", key, "h", "d:" + response_id)
                    data = data if _owned(head, who, key) else None
                else:
                    data = await self.edge.call("HGET", key, "d:" + response_id)
            except SessionError:
                raise
            except Exception as exc:
                raise failed(exc, f"thread {key!r}") from None
        if data is None:
            return None
        return decode_session(data, lambda: f"response {response_id!r} in {key!r}", response_id,
                              self.options.max_record_bytes)

    @bounded
    async def resolve_chain(self, previous_response_id: str | None, *, max_depth: int | None = None,
                            include_incomplete: bool = False, owner: str | None = None) -> ResponseSessionSnapshot:
        """The chain ending at ``previous_response_id``, oldest first, and its input items.

        Never shortened: a missing ancestor, a cycle, a chain longer than ``max_depth`` or
        a turn that is not completed raises a coded error. ``max_depth=0`` accepts only
        the empty chain (``previous_response_id=None``): a response that exists is
        ``session.chain.depth_exceeded`` (and touches no TTL), one that does not is
        ``session.chain.not_found``. Another ``owner``'s response is not found: the walk
        checks the thread's owner in the script that reads it, and every later read of
        records reads it again."""
        who = validate.owner(owner)
        if previous_response_id is None:
            return ResponseSessionSnapshot(previous_response_id=None, sessions=[], input_items=[])
        validate_id(previous_response_id, "previous_response_id")
        depth = self.options.max_depth if max_depth is None else validate.integer(
            max_depth, "max_depth", minimum=0, maximum=MAX_DEPTH_LIMIT)
        if include_incomplete is not False:
            validate.flag(include_incomplete, "include_incomplete")
        thread = await self._thread(previous_response_id)
        if thread is None:
            check_walk("missing", previous_response_id, previous_response_id, depth)
        key = self.keys.thread(str(thread))
        for _ in range(READ_ATTEMPTS):
            sessions = await self._chain(key, previous_response_id, depth, who)
            if linked(sessions, previous_response_id):
                return build_snapshot(previous_response_id, sessions, include_incomplete=include_incomplete,
                                      replay_instructions=self.options.replay_instructions)
        raise SessionError(ErrorCode.BACKEND_UNAVAILABLE,
                           f"the chain of {previous_response_id!r} kept changing while it was read")

    async def _chain(self, key: str, start: str, depth: int, who: str) -> list[StoredResponseSession]:
        """The chain from ``start``, oldest first, as its records say (the caller checks that
        they link up: a record overwritten between the walk and the read shows there)."""
        slide = self._slide_ms if depth else 0
        status, detail, largest, entries = await self._walk(key, start, depth or 1, slide, who)
        if depth == 0 and entries:
            status, detail = "depth", start
        if largest < 0:  # the records came with the walk
            check_walk(status, detail, start, depth)
            return decode_chain(entries, key, start, None, self.options.max_record_bytes)
        ids, seen = [as_text(e) for e in entries], set()
        while status == "more":  # a long chain: go on from where the walk stopped
            seen.update(ids)
            if detail in seen:
                status = "cycle"
                break
            status, detail, _, more = await self._walk(key, detail, depth - len(ids), 0, who, inline=False)
            ids.extend(as_text(e) for e in more)
        check_walk(status, detail, start, depth)
        records = await self._read(key, ids, largest, who)
        for i, record in enumerate(records):
            if record is None:  # deleted since the walk saw it: missing, as the walk would say
                check_walk("missing", ids[i], start, depth)
        return decode_chain(records, key, start, ids, self.options.max_record_bytes)

    async def _walk(self, key: str, start: str, limit: int, slide_ms: int, who: str,
                    inline: bool = True) -> tuple[str, str, int, Sequence[Any]]:
        """One call of lua/chain_walk.lua: status, detail, the thread's largest record (-1:
        the entries are the records themselves), and the entries, newest first."""
        reply = await self.edge.run(_WALK, [key], [start, limit, slide_ms, INLINE_BYTES if inline else -1, WALK_STEPS,
                                                   who], where=f"thread {key!r}", write=False)
        form = reply[2]
        return as_text(reply[0]), as_text(reply[1]), -1 if form == b"r" else int(form), reply[3:]

    async def _read(self, key: str, ids: list[str], record_bytes: int, who: str) -> list[Any]:
        """The records of ``ids`` (newest first), each at most ``record_bytes``: one HMGET
        per slice, a trip's slices pipelined (:func:`read_plan`). Each HMGET reads the
        thread's header too: a thread that another owner's replaced since the walk reads
        as records gone."""
        fields = ["d:" + rid for rid in ids]
        records: list[Any] = []
        for trip in read_plan(len(fields), record_bytes):
            replies = await self.edge.pipeline([("HMGET", key, "h", *fields[part]) for part in trip],
                                               where=f"thread {key!r}")
            for reply in replies:
                records.extend(reply[1:] if _owned(reply[0], who, key) else [None] * (len(reply) - 1))
        return records

    # -- writes ------------------------------------------------------------------
    @bounded
    async def save(self, session: StoredResponseSession, *,
                   expected_previous_response_id: str | None | _Unset = UNSET, overwrite: bool = False,
                   owner: str | None = None) -> None:
        """Store ``session`` atomically, or refuse with a coded error and write nothing.

        One script checks that the id is new (unless ``overwrite``), that the parent is
        ``expected_previous_response_id`` when given (None: must be a root; on overwrite
        the stored parent must match too), and that the parent exists; then it writes the
        record and extends the thread's TTL (never shortening it).

        Idempotent: saving a record that is already stored, the same record under the
        same parent, succeeds and writes nothing, so a retry after a timeout is safe; and a
        script redis-py re-sends after a lost reply is recognised by its operation token
        and has no second effect. A different record under an existing id is still
        ``session.store.conflict``.

        ``owner``: a new thread (a root's) is that owner's, and every save into it must be
        made by that owner (or without one): to another, its responses are not there, so a
        child of one is ``session.chain.not_found`` and a root in it (an id it did not
        mint) ``session.store.conflict``. A response saved into a conversation takes the
        conversation's owner (docs/guarantees.md#owners)."""
        response_id, parent, expected, blob = self._check_save(session, expected_previous_response_id, overwrite)
        who = validate.owner(owner)
        if self.conversations is not None and session.conversation_id is not None:
            if overwrite:
                raise SessionError(ErrorCode.INPUT_INVALID, "a conversation's response is not overwritten: its turn "
                                   "is in the conversation already")
            await self._save_turn(session, response_id, expected, blob, who)
            return
        thread = await self._thread_for_save(response_id, parent)
        key = self.keys.thread(thread)
        try:
            reply = await self.edge.run(_SAVE, [key], self._save_args(response_id, parent, expected, overwrite, blob, who),
                                        where=f"thread {key!r}", write=True, own=("RSEXISTS", "RSPARENT"))
        except Refusal as refusal:
            await self._refused(refusal, session, key, parent, thread)
            return
        renew = await self._cover(key, reply)
        await self._after_save(response_id, parent, thread, renew)

    def _save_args(self, response_id: str, parent: str | None, expected: str | None, overwrite: bool,
                   blob: bytes, who: str) -> list[Any]:
        """ARGV of lua/chain_save.lua (and chain_save_turn.lua's first twelve)."""
        return [response_id, parent or "", b"=" if expected is not None else b"-", expected or "",
                b"1" if overwrite else b"0", blob, self._ttl_ms, CYCLE_WALK_LIMIT, new_token(),
                b"1" if self.options.response_expiry else b"0",
                b"1" if parent and thread_of(parent) is None else b"0", who]

    def _check_save(self, session: object, expected: object,
                    overwrite: object) -> tuple[str, str | None, str | None, bytes]:
        """Every argument of a save, checked before anything is sent: the id, the parent,
        the expectation ('' for an expected root, None for none), the record's bytes.
        Refusals that need no stored state are made here."""
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
        own, parent_thread = thread_of(response_id), thread_of(parent) if parent else None
        if own is not None and parent_thread is not None and own != parent_thread:
            raise _other_thread(response_id, parent)
        blob = encode_record(session, self.options.compression, self.options.max_record_bytes)
        return response_id, parent, want, blob

    async def _thread_for_save(self, response_id: str, parent: str | None) -> str:
        """The thread a save goes into. A foreign id's own locator is read first, so that
        one already saved into another thread is refused before anything is written
        (together with its foreign parent's, when that needs reading too)."""
        own = thread_of(response_id)
        if own is not None:
            return own
        parent_thread = thread_of(parent) if parent else None
        if parent is None or parent_thread is not None:
            thread: str | None = parent_thread or foreign_root_thread(response_id)
            current = await self._locate(response_id)
        else:
            thread, current = await self.edge.together(self._locate(parent), self._locate(response_id))
        if thread is None:
            raise SessionError(ErrorCode.CHAIN_NOT_FOUND, f"previous_response_id {parent!r} was not found")
        if current is not None and current != thread and await self._has(current, response_id):
            raise SessionError(ErrorCode.STORE_CONFLICT, f"response {response_id!r} already exists")
        return thread  # a locator whose thread does not hold the id blocks nothing (_claim)

    async def _refused(self, refusal: Refusal, session: StoredResponseSession, key: str, parent: str | None,
                       thread: str) -> None:
        """A save's refusal the store decides itself: an id already taken by the same record
        stored in other bytes (another worker's compression) is the same save, done; a
        parent missing from its thread may be one minted for another thread."""
        if refusal.word == "RSEXISTS":
            if await self._already_saved(key, session):
                return
            raise SessionError(ErrorCode.STORE_CONFLICT, f"response {session.id!r} already exists")
        if parent is not None and thread_of(parent) is None:
            elsewhere = await self._locate(parent)
            if elsewhere is not None and elsewhere != thread:
                raise _other_thread(session.id, parent)
        raise SessionError(ErrorCode.CHAIN_NOT_FOUND, f"previous_response_id {parent!r} was not found")

    async def _already_saved(self, key: str, session: StoredResponseSession) -> bool:
        """Whether the record stored under the id is ``session`` (one more read, on a refusal only)."""
        data = await self.edge.command("HGET", key, "d:" + session.id, where=f"thread {key!r}")
        try:
            return data is not None and decode_session(data, "", session.id, self.options.max_record_bytes) == session
        except SessionError:
            return False

    async def _cover(self, key: str, reply: Any) -> list[str]:
        """The ancestors minted elsewhere whose locators a save must renew (lua/chain_lib.lua,
        l:): those its script named, and those lua/chain_cover.lua finds above where the
        script's walk stopped, 256 records a call."""
        if not isinstance(reply, list):
            return []
        renew = [as_text(rid) for rid in reply[4:]]
        frontier, need, far = as_text(reply[1]), reply[2], reply[3]
        for _ in range(COVER_CALLS):
            if not frontier:
                break
            more = await self.edge.run(_COVER, [key], [frontier, need, far], where=f"thread {key!r}", write=True)
            frontier = as_text(more[0])
            renew.extend(as_text(rid) for rid in more[1:])
        return renew

    async def _after_save(self, response_id: str, parent: str | None, thread: str, renew: list[str]) -> None:
        """A save's locator steps: point a foreign id at its thread (always: a delete may have
        removed the locator since it was read), and renew the locators of its foreign
        parent and of the ancestors the script named, for two TTLs. Idempotent."""
        if parent is not None and thread_of(parent) is None and self._ttl_ms:
            renew = [parent, *renew]
        touch = self._on_locators(renew, lambda key: ("PEXPIRE", key, 2 * self._ttl_ms)) if renew else None
        if thread_of(response_id) is not None:
            if touch is not None:
                await touch
        elif touch is not None:
            await self.edge.together(self._point(response_id, thread), touch)
        else:
            await self._point(response_id, thread)

    async def _save_turn(self, session: StoredResponseSession, response_id: str, expected: str | None,
                         blob: bytes, who: str) -> None:
        """A response of a conversation: saved into the conversation's slot (thread
        ``c:<conversation id>``), and the turn's items (its input, as
        :func:`request_input_items` shapes it, then its output; ids minted where missing)
        appended to the conversation by the same script. Its locator is set first, so an
        id saved elsewhere is refused before anything is written.

        While that slot migrates, Redis answers a two-key script TRYAGAIN as long as its
        keys are not together on one node (a first turn's thread does not exist yet): the
        script has not run, so it is sent again, with a growing pause, until the migration
        lets it through or the call's budget ends (``session.backend.timeout``)."""
        conversation_id = validate_id(session.conversation_id, "conversation_id")
        if session.previous_response_id is not None:
            raise _both_chains()
        if thread_of(response_id) is not None:
            raise SessionError(ErrorCode.ID_INVALID, f"{response_id!r} was minted for a thread; mint a conversation's "
                               "response ids with new_response_id(conversation_id=...)")
        pairs = self.conversations.turn_arguments(request_input_items(session.request.input) + list(session.response.output))
        thread = "c:" + conversation_id
        claimed = await self._claim(response_id, thread)
        if claimed is False:
            raise SessionError(ErrorCode.STORE_CONFLICT, f"response {response_id!r} already exists")
        key = self.keys.thread(thread)
        args = [*self._save_args(response_id, None, expected, False, blob, who), self.conversations.ttl_ms, *pairs]
        keys = [key, self.keys.conversation(conversation_id)]
        try:
            await self.edge.run(_TURN, keys, args, where=f"thread {key!r}", write=True, own=("RSEXISTS",),
                                migrating=True)
        except Refusal:
            if not await self._already_saved(key, session):
                raise SessionError(ErrorCode.STORE_CONFLICT, f"response {response_id!r} already exists") from None
        except SessionError:
            if claimed:
                await self._unpoint(response_id)  # the locator this call set points at nothing
            raise

    @bounded
    async def delete(self, response_id: str, *, owner: str | None = None) -> bool:
        """Delete one response. Its descendants stay; resolving through the gap raises
        ``session.chain.not_found`` naming it, never a shortened history. Another
        ``owner``'s response is not there: False, and nothing is touched.

        Idempotent: a script re-sent after a lost reply answers what the first copy did
        and deletes nothing more (its token is remembered in the thread)."""
        validate_id(response_id)
        who = validate.owner(owner)
        thread = await self._thread(response_id)
        if thread is None:
            return False
        deleted = await self._delete(thread, response_id, who)
        if deleted < 0:
            return False
        if thread_of(response_id) is None:
            # Look again once the locator is gone, and point it back if a save put the
            # record back meanwhile: a record in its thread always ends up with its locator.
            await self._unpoint(response_id)
            if await self._has(thread, response_id):
                await self.edge.command("SET", self.keys.locator(response_id), thread,
                                        *(("PX", self._ttl_ms) if self._ttl_ms else ()), "NX", where="locator", write=True)
        return deleted > 0

    async def _delete(self, thread: str, response_id: str, who: str = "") -> int:
        """lua/chain_delete.lua: 1 deleted, 0 not there, -1 another owner's."""
        key = self.keys.thread(thread)
        return int(await self.edge.run(_DELETE, [key], [response_id, new_token(), self._ttl_ms, who],
                                       where=f"thread {key!r}", write=True))

    @bounded
    async def delete_thread(self, response_id: str, *, owner: str | None = None) -> int:
        """Delete the whole conversation ``response_id`` belongs to: every response of its
        thread and their locators. Returns how many responses this call deleted (0 for an
        unknown id, and for a call that finds the thread already gone, such as a retry).

        The thread is one key, removed with UNLINK (freed in the background); the ids of
        foreign responses, whose locators go too, are listed first in bounded HSCAN pages.
        A save racing this call either lands before (and is deleted) or finds its parent
        gone (``session.chain.not_found``). Another ``owner``'s thread is not there: 0, and
        nothing is touched (the script that unlinks the key checks its owner)."""
        validate_id(response_id)
        who = validate.owner(owner)
        thread = await self._thread(response_id)
        if thread is None or not await self._has(thread, response_id, who):
            return 0
        key = self.keys.thread(thread)
        ids = await self._thread_ids(key)
        if not await self.edge.run(_DROP, [key], [who], where=f"thread {key!r}", write=True):
            return 0
        foreign = [rid for rid in ids if thread_of(rid) is None]
        if foreign:
            await self._on_locators(foreign, lambda locator: ("DEL", locator))
        return len(ids)

    async def _thread_ids(self, key: str) -> list[str]:
        """The ids of every record in the thread, in HSCAN pages sized by its largest record."""
        head = thread_header(await self.edge.command("HGET", key, "h", where=f"thread {key!r}"))
        count, cursor, ids = hscan_count(head.largest if head else SCAN_BYTES, 64), 0, list[str]()
        while True:
            cursor, page = await self.edge.command("HSCAN", key, cursor, "MATCH", "p:*", "COUNT", count,
                                                   where=f"thread {key!r}")  # redis-py: (cursor, {field: value})
            ids.extend(as_text(field)[2:] for field in page)
            if not cursor:
                return list(dict.fromkeys(ids))  # HSCAN may return a field twice

    # -- locators ----------------------------------------------------------------
    async def _has(self, thread: str, response_id: str, who: str = "") -> bool:
        """Whether the thread holds the id (and is ``who``'s: one atomic read of both)."""
        key = self.keys.thread(thread)
        if not who:
            return bool(await self.edge.command("HEXISTS", key, "p:" + response_id, where=f"thread {key!r}"))
        head, parent = await self.edge.command("HMGET", key, "h", "p:" + response_id, where=f"thread {key!r}")
        return parent is not None and _owned(head, who, key)

    async def _claim(self, response_id: str, thread: str) -> bool | None:
        """Point a foreign id's locator at ``thread``: True when this call set it, None when
        it pointed there already (a re-sent copy finds its own thread), False when it points
        at another thread that holds the id (a save there came first). A locator whose
        thread does not hold the id (a crash between a save's steps left it) blocks
        nothing: it is taken over by a compare-and-set, so of two callers one wins."""
        key = self.keys.locator(response_id)
        ttl = ("PX", self._ttl_ms) if self._ttl_ms else ()
        old = await self.edge.command("SET", key, thread, "NX", "GET", *ttl, where=f"locator {key!r}", write=True,
                                      get=True)
        for _ in range(CLAIM_ATTEMPTS):
            if old is None:
                return True
            if as_text(old) == thread:
                return None
            if await self._has(as_text(old), response_id):
                return False
            before = await self.edge.run(_REPOINT, [key], [old, thread, self._ttl_ms], where=f"locator {key!r}",
                                         write=True)
            if before is None or before == old:
                return True
            old = before
        return False

    async def _point(self, response_id: str, thread: str) -> None:
        if await self._claim(response_id, thread) is False:
            # The same foreign id was just saved into another thread by someone else:
            # theirs came first, so take ours back out rather than keep two.
            await self._delete(thread, response_id)
            raise SessionError(ErrorCode.STORE_CONFLICT, f"response {response_id!r} already exists")

    async def _unpoint(self, response_id: str) -> None:
        key = self.keys.locator(response_id)
        await self.edge.command("DEL", key, where=f"locator {key!r}")

    async def _on_locators(self, response_ids: Sequence[str], command: Any) -> None:
        """``command(locator key)`` for the locators of ``response_ids``, LOCATOR_BATCH a trip."""
        keys = [self.keys.locator(rid) for rid in response_ids]
        for at in range(0, len(keys), LOCATOR_BATCH):
            await self.edge.pipeline([command(key) for key in keys[at:at + LOCATOR_BATCH]], where=f"locator {keys[at]!r}")


def _owned(head: Any, who: str, key: str) -> bool:
    """Whether a thread whose header reads ``head`` is ``who``'s: a call without an owner
    ('') sees every thread, as the walk before it did, so nothing is parsed for it; a
    thread that has no header holds no record, and one of another format is refused."""
    if not who or head is None:
        return True
    parsed = thread_header(head)
    if parsed is None:
        raise SessionError(ErrorCode.RECORD_UNSUPPORTED, f"thread {key!r} is not in data format 1 or 2")
    return parsed.owner == who


def _expected_mismatch(parent: str | None) -> SessionError:
    return SessionError(ErrorCode.STORE_CONFLICT,
                        f"expected previous_response_id does not match: the record's parent is {parent!r}")


def _check_conversations(conversations: Any, keys: KeySpace, server: object) -> None:
    """The conversation store a response store appends to: one with ``turn_arguments`` (the
    two packages are siblings and import none of each other), this store's prefix (the
    save script builds the conversation's key from it), and for memory mode the same
    in-process ``server`` (None: not in process)."""
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


def initial_sessions(sessions: object) -> list[StoredResponseSession]:
    """GodeX's constructor's ``sessions``, each checked as a save would, parents first."""
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
    return parents_first(given)


def parents_first(sessions: list[StoredResponseSession]) -> list[StoredResponseSession]:
    """``sessions`` reordered so that each comes after its parent when that is among them,
    otherwise in the order given; linear in their number. Another record under an id
    already placed stays in, for ``save`` to judge. Refuses parent pointers that loop."""
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
