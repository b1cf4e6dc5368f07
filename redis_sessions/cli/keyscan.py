"""Finding a prefix's keys on a standalone server or on every primary of a cluster, and
what each one holds.

Every key of a prefix starts with ``<prefix>:{`` (:mod:`redis_sessions.keys`), and no
other prefix's key does, so SCAN asks the server for exactly those: keys of other
prefixes are never returned, read, counted or deleted. Keys are recognised by the
templates :class:`~redis_sessions.keys.KeySpace` builds, never by a hand-written copy of
the layout; a key under ``<prefix>:{`` that is none of them is reported as ``other``
and never deleted.

What a key holds is read from its header (docs/key-layout.md, data format 1) with plain
commands (:func:`queue_state`, :func:`state`): a key of another data format, or of none,
is ``unsupported``, one whose header does not parse ``corrupt``; both are counted apart
and never read further.

Per-key errors (``NOPERM``, ``MOVED``, ...) come back from :func:`pipelined` as values;
:class:`Failures` counts them, and a command that met any fails with the most frequent
one's code (and its exit code) once it has done the rest.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, TypeVar

from redis import exceptions as rx
from redis.asyncio.cluster import RedisCluster

from ..errors import ErrorCode, SessionError, translate, translate_errors
from ..items import header
from ..keys import _GLOB_SPECIAL, KeySpace
from ..link import AnyRedis, as_text
from ..responses.chain import thread_header
from ..responses.store import hscan_count

T = TypeVar("T")
SCAN_COUNT = 500
BATCH = 500
_MARK = "\x00"
EXPECTED_TYPE = {"thread": "hash", "items": "list", "locator": "string", "conversation": "hash"}


def _template(built: str) -> re.Pattern[str]:
    before, after = built.split(_MARK)
    return re.compile(re.escape(before) + r"([^{}]+)" + re.escape(after), re.S)


@dataclass(frozen=True)
class Key:
    """A key found by a scan: its name, its kind and the id it belongs to (the thread
    tag, session id, conversation id or response id)."""

    name: str
    kind: str
    ident: str


@dataclass(frozen=True)
class KeyKinds:
    """What each key of a prefix is: ``thread``, ``items``, ``locator``, ``conversation``
    or ``other``."""

    keys: KeySpace
    patterns: tuple[tuple[str, re.Pattern[str]], ...] = field(init=False)

    def __post_init__(self) -> None:
        ks = self.keys
        patterns = (
            ("items", _template(ks.session_items(_MARK))),
            ("locator", _template(ks.locator(_MARK))),
            ("thread", _template(ks.thread(_MARK))),
            ("conversation", _template(ks.conversation(_MARK))),
        )
        object.__setattr__(self, "patterns", patterns)

    def classify(self, key: str) -> Key:
        for kind, pattern in self.patterns:
            found = pattern.fullmatch(key)
            if found:
                return Key(key, kind, found.group(1))
        return Key(key, "other", "")


def scan_match(built: str, id_prefix: str = "") -> str:
    """SCAN MATCH for the keys a :class:`KeySpace` method builds (``built``, made with
    ``_MARK`` for the id) whose id starts with ``id_prefix``; glob characters escaped."""
    before, after = built.split(_MARK)
    return _GLOB_SPECIAL.sub(r"\\\1", before + id_prefix) + "*" + _GLOB_SPECIAL.sub(r"\\\1", after)


# -- what a key holds ----------------------------------------------------------------
@dataclass(frozen=True)
class State:
    """What a key holds: ``live`` (a thread with responses, an item session with items, a
    conversation not deleted), ``tombstone`` (kept a while only to answer re-sent writes),
    ``unsupported`` (another data format, or none) or ``corrupt`` (a format-1 header that
    does not parse). ``items``: an item session's entries (its header's ``n``);
    ``largest``: a thread's largest record (what its HSCAN pages are sized by)."""

    status: str
    items: int = 0
    largest: int = 0


STATE_REPLIES = {"thread": 2, "items": 2, "conversation": 1}
_CONVERSATION = re.compile(rb"1( [0-9]+){5}|2( [0-9]+){5} [!-~]+")
"""A conversation's header, data format 1, or 2 (the same and its owner): lua/conv_lib.lua."""


def queue_state(pipe: Any, key: Key) -> None:
    """Queue the plain reads :func:`state` judges a key by (``STATE_REPLIES[kind]`` replies)."""
    if key.kind in ("thread", "conversation"):
        pipe.hget(key.name, "h")
        if key.kind == "thread":
            pipe.hlen(key.name)
    elif key.kind == "items":
        pipe.lindex(key.name, -1)  # the header
        pipe.lindex(key.name, 0)  # a stash slot, in a session that is one


def state(key: Key, replies: Sequence[Any]) -> State:
    """What ``key`` holds, from :func:`queue_state`'s replies (docs/key-layout.md).

    A thread keeps its header ``h`` and its ring ``ops`` while it exists: with no other
    field, its records are gone. A deleted conversation keeps its ring without ``h``. An
    item session's header is read by the items package's own parser."""
    if key.kind == "items":
        try:
            head = header.parse(replies[0], key.name, replies[1])
        except SessionError as exc:
            return State("corrupt" if exc.code == ErrorCode.RECORD_CORRUPT else "unsupported")
        return State("live" if head.count else "tombstone", items=head.count)
    h = replies[0]
    if h is None and key.kind == "conversation":
        return State("tombstone")
    thread = thread_header(h) if key.kind == "thread" else None
    if thread is None and not (key.kind == "conversation" and isinstance(h, bytes) and _CONVERSATION.fullmatch(h)):
        return State("corrupt" if isinstance(h, bytes) and h[:2] in (b"1 ", b"2 ") else "unsupported")
    if thread is None:
        return State("live")
    return State("live" if replies[1] > 2 else "tombstone", largest=thread.largest)


async def count_responses(client: AnyRedis, threads: Sequence[tuple[Key, int]], failures: Failures,
                          on_done: Callable[[int], None] | None = None) -> dict[str, int]:
    """How many responses each thread (with its largest record) holds: its ``p:`` fields,
    in HSCAN pages, a page of each of ``BATCH`` threads in one pipeline. HSCAN may return
    a field twice, so a thread's ids are kept until it is done."""
    counted: dict[str, int] = {}
    for start in range(0, len(threads), BATCH):
        seen: dict[str, set[bytes]] = {key.name: set() for key, _ in threads[start:start + BATCH]}
        todo = [(key.name, 0, hscan_count(largest, 1_000)) for key, largest in threads[start:start + BATCH]]
        while todo:
            pages = await pipelined(client, todo, lambda p, t: p.hscan(t[0], t[1], match="p:*", count=t[2]), 1,
                                    None, "HSCAN")
            more = []
            for (name, _, count), (page,) in zip(todo, pages):
                if not failures.check(name, page, "HSCAN"):
                    seen.pop(name)
                    continue
                seen[name].update(page[1])
                if int(page[0]):
                    more.append((name, int(page[0]), count))
            todo = more
        counted.update((name, len(ids)) for name, ids in seen.items())
        if on_done:
            on_done(len(seen))
    return counted


# -- scanning ------------------------------------------------------------------------
async def primaries(client: AnyRedis) -> list[Any]:
    """The nodes to scan: every primary of a cluster by name (a cursor names one by its
    place), or ``[None]`` for one server."""
    if isinstance(client, RedisCluster):
        async with translate_errors("cluster"):
            await client.initialize()
        return sorted(client.get_primaries(), key=lambda node: str(node.name))
    return [None]


async def scan_step(client: AnyRedis, match: str, node: Any, cursor: int, count: int = SCAN_COUNT) -> tuple[int, list[str]]:
    """One SCAN ... MATCH ... COUNT on one node: the next cursor (0: done) and the keys."""
    async with translate_errors(f"SCAN on {'a primary' if node is not None else 'the server'}"):
        if node is None:
            cursor, keys = await client.scan(cursor=cursor, match=match, count=count)
        else:
            # A cluster client answers {node name: cursor} for the nodes it asked.
            cursors: Any
            cursors, keys = await client.scan(cursor=cursor, match=match, count=count, target_nodes=node)
            cursor = next(iter(cursors.values()))
    return int(cursor), [as_text(k) for k in keys]


async def scan_all(client: AnyRedis, kinds: KeyKinds,
                   on_batch: Callable[[int, int, int], None] | None = None) -> list[Key]:
    """Every key of the prefix; ``on_batch(node_index, nodes, found)`` reports progress."""
    found: list[Key] = []
    nodes = await primaries(client)
    for index, node in enumerate(nodes):
        cursor = None
        while cursor != 0:
            cursor, batch = await scan_step(client, kinds.keys.scan_pattern(), node, cursor or 0)
            found.extend(kinds.classify(key) for key in batch)
            if on_batch:
                on_batch(index, len(nodes), len(found))
    return found


async def dbsize(client: AnyRedis, node: Any) -> int:
    async with translate_errors("DBSIZE"):
        if node is None:
            return int(await client.dbsize())
        return int(await client.dbsize(target_nodes=node))


async def pipelined(
    client: AnyRedis,
    keys: Sequence[T],
    queue: Callable[[Any, T], object],
    per_key: int | Callable[[T], int],
    on_done: Callable[[int], None] | None = None,
    where: str = "pipeline",
) -> list[list[Any]]:
    """Run ``queue(pipe, key)`` for every key in pipelines of ``BATCH`` keys; one result
    list per key (``per_key`` replies each: a number, or a function of the key).

    A command that failed leaves its exception in its place (count them with
    :class:`Failures`); only a failure of the whole batch (the connection) raises.
    A cluster pipeline splits itself by node; nothing here sends a multi-key
    command, so keys in different slots are fine.
    """
    results: list[list[Any]] = []
    for start in range(0, len(keys), BATCH):
        chunk = keys[start : start + BATCH]
        pipe = client.pipeline(transaction=False)
        for key in chunk:
            queue(pipe, key)
        async with translate_errors(where):
            replies = await pipe.execute(raise_on_error=False)
        at = 0
        for key in chunk:
            width = per_key if isinstance(per_key, int) else per_key(key)
            results.append(list(replies[at : at + width]))
            at += width
        if on_done:
            on_done(len(chunk))
    return results


def wrong_type(value: Any) -> bool:
    return isinstance(value, rx.ResponseError) and str(value).startswith("WRONGTYPE")


@dataclass
class Failures:
    """Per-key errors, by code: a command that met any fails after doing the rest."""

    codes: Counter[str] = field(default_factory=Counter)
    first: dict[str, str] = field(default_factory=dict)

    def check(self, key: str, value: Any, where: str) -> bool:
        """True if ``value`` is a reply, False (and counted) if it is an error."""
        if not isinstance(value, BaseException):
            return True
        error = translate(value, f"{where} {key!r}") or SessionError(ErrorCode.BACKEND_ERROR, f"{where} {key!r}: {value}")
        self.codes[error.code.value] += 1
        self.first.setdefault(error.code.value, error.message)
        return False

    def __len__(self) -> int:
        return sum(self.codes.values())

    def as_dict(self) -> dict[str, int]:
        return dict(self.codes)

    def raise_if_any(self, command: str) -> None:
        """``<command>: N keys failed (code)``, coded with the most frequent code."""
        if not self.codes:
            return
        code, _ = self.codes.most_common(1)[0]
        counts = ", ".join(f"{n} {c}" for c, n in self.codes.most_common())
        raise SessionError(ErrorCode(code), f"{command}: {len(self)} keys failed ({counts}); first: {self.first[code]}")
