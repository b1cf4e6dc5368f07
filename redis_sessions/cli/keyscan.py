"""Finding a prefix's keys on a standalone server or on every primary of a cluster.

Every key of a prefix starts with ``<prefix>:{`` (:mod:`redis_sessions.keys`),
and no other prefix's key does, so SCAN asks the server for exactly those: keys
of other prefixes are never returned, read, counted or deleted. Keys are
recognised by the templates :class:`~redis_sessions.keys.KeySpace` builds, never
by a hand-written copy of the layout; a key under ``<prefix>:{`` that is none of
them is reported as ``other`` and never deleted.

Locators of the old layout (``<prefix>:loc:<id>``) are found by a second SCAN
and are only *candidates*: a name that also parses as another prefix's locator
is dropped unread, and the others count as this prefix's only once
:func:`prove_legacy` has shown that their thread is here and holds their id.

Per-key errors (``NOPERM``, ``MOVED``, ...) come back from :func:`pipelined` as
values; :class:`Failures` counts them, and a command that met any fails with the
most frequent one's code (and its exit code) once it has done the rest.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Sequence, TypeVar

from redis import exceptions as rx
from redis.asyncio.cluster import RedisCluster

from ..errors import ErrorCode, SessionError
from ..items import header
from ..keys import _GLOB_SPECIAL, KeySpace
from ..link import AnyRedis, as_text
from ..errors import translate, translate_errors

T = TypeVar("T")
SCAN_COUNT = 500
BATCH = 500
_MARK = "\x00"
_HEX_TAG = re.compile(r"[0-9a-f]{16}")


def _glob_escape(text: str) -> str:
    return _GLOB_SPECIAL.sub(r"\\\1", text)


def _template(built: str) -> re.Pattern[str]:
    before, after = built.split(_MARK)
    return re.compile(re.escape(before) + r"([^{}]+)" + re.escape(after), re.S)


@dataclass(frozen=True)
class Key:
    """A key found by a scan: its name, its kind and the id it belongs to (the
    thread tag, session id or response id)."""

    name: str
    kind: str
    ident: str


@dataclass(frozen=True)
class KeyKinds:
    """What each key of a prefix is: ``thread``, ``items``, ``meta``, ``locator``,
    ``conversation``, ``legacy_locator`` (a candidate, see :func:`prove_legacy`) or ``other``.

    ``meta`` is the metadata hash of the old two-key item-session layout: no
    longer written or read, still recognised so that ``purge`` deletes it."""

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

    def legacy(self, key: str) -> Key | None:
        """A candidate old-layout locator of this prefix, or None (another prefix's, or ambiguous)."""
        return None


def scan_match(built: str, id_prefix: str = "") -> str:
    """SCAN MATCH for the keys a :class:`KeySpace` method builds (``built``, made with
    ``_MARK`` for the id) whose id starts with ``id_prefix``; glob characters escaped."""
    before, after = built.split(_MARK)
    return _glob_escape(before + id_prefix) + "*" + _glob_escape(after)


# -- how much a key holds ----------------------------------------------------------
LIVE_REPLIES = {"thread": 5, "items": 3, "conversation": 1}
CONVERSATION_EXISTS = "h"
"""The field a conversation's hash holds while it exists (its header, lua/conv_lib.lua): a
deleted one loses it and keeps its key for 30 s, to answer a re-sent delete."""


def queue_live(pipe: Any, key: Key) -> None:
    """Queue what says how much ``key`` holds (:func:`live_count` reads the replies): a
    thread's field counts, an item session's length and first two entries, whether a
    conversation exists. Plain commands, no script."""
    if key.kind == "thread":
        pipe.hlen(key.name)
        for name in ("ops", "h", "-"):
            pipe.hexists(key.name, name)
        pipe.hmget(key.name, "c", "r")  # per-response expiry's record and field counts (chain_lib.lua)
    elif key.kind == "items":
        pipe.llen(key.name)
        pipe.lindex(key.name, 0)
        pipe.lindex(key.name, 1)
    elif key.kind == "conversation":
        pipe.hexists(key.name, CONVERSATION_EXISTS)


def live_count(key: Key, replies: Sequence[Any]) -> int:
    """How many live things ``key`` holds, from :func:`queue_live`'s replies: a thread's
    responses, an item session's entries, 1 for an existing conversation. 0 is a
    tombstone: a key kept only to answer re-sent writes."""
    if key.kind == "thread":
        fields, non_records = _int(replies[0]), sum(_int(v) for v in replies[1:4])
        kept, written = (_number(v) for v in replies[4])
        # the record count per-response expiry keeps, where its field count proves it current;
        # else a record's d: and p: fields (exact for threads written before it)
        return kept if kept is not None and written == fields - 1 else max(0, fields - non_records) // 2
    if key.kind == "items":
        length, first, second = replies
        if not length or not isinstance(first, bytes) or not header.is_header(first):
            return _int(length)  # none, or the layout before headers: every entry is an item
        parsed = header.try_parse(first)
        stash = parsed is not None and parsed.hinted and isinstance(second, bytes) and header.is_stash(second)
        return _int(length) - 1 - int(stash)
    return _int(replies[0])


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def _number(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


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
    async with translate_errors(f"SCAN on {getattr(node, 'name', 'the server')}"):
        if node is None:
            cursor, keys = await client.scan(cursor=cursor, match=match, count=count)
        else:
            # A cluster client answers {node name: cursor} for the nodes it asked.
            cursors: Any
            cursors, keys = await client.scan(cursor=cursor, match=match, count=count, target_nodes=node)
            cursor = next(iter(cursors.values()))
    return int(cursor), [as_text(k) for k in keys]


async def scan(client: AnyRedis, match: str, node: Any) -> AsyncIterator[list[str]]:
    """Batches of keys matching ``match`` on one node."""
    cursor = 0
    while True:
        cursor, keys = await scan_step(client, match, node, cursor)
        yield keys
        if cursor == 0:
            return


async def dbsize(client: AnyRedis, node: Any) -> int:
    async with translate_errors("DBSIZE"):
        if node is None:
            return int(await client.dbsize())
        return int(await client.dbsize(target_nodes=node))


async def scan_all(
    client: AnyRedis, kinds: KeyKinds, on_batch: Callable[[int, int, int], None] | None = None
) -> list[Key]:
    """Every key of the prefix, and every old-layout locator candidate of it;
    ``on_batch(node_index, nodes, found)`` reports progress."""
    found: list[Key] = []
    nodes = await primaries(client)
    for index, node in enumerate(nodes):
        async for batch in scan(client, kinds.keys.scan_pattern(), node):
            found.extend(kinds.classify(key) for key in batch)
            if on_batch:
                on_batch(index, len(nodes), len(found))
    return found


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


async def prove_legacy(client: AnyRedis, keys: KeySpace, candidates: Sequence[Key], failures: Failures,
                       on_done: Callable[[int], None] | None = None) -> list[tuple[Key, str]]:
    """The old-layout locators that are provably this prefix's, with their thread tag:
    the value is a thread tag, and that thread of this prefix holds the locator's id.
    The others (another program's key, a thread that is gone) are left alone."""
    values = await pipelined(client, candidates, lambda p, k: p.get(k.name), 1, on_done, "old locators")
    pointed: list[tuple[Key, str]] = []
    for key, (value,) in zip(candidates, values):
        if value is None or wrong_type(value) or not failures.check(key.name, value, "GET"):
            continue
        tag = as_text(value)
        if _HEX_TAG.fullmatch(tag):
            pointed.append((key, tag))
    held = await pipelined(client, pointed, lambda p, kt: p.hexists(keys.thread(kt[1]), keys.data_field(kt[0].ident)),
                           1, None, "HEXISTS")
    proven: list[tuple[Key, str]] = []
    for (key, tag), (reply,) in zip(pointed, held):
        if wrong_type(reply) or not failures.check(keys.thread(tag), reply, "HEXISTS"):
            continue
        if reply:
            proven.append((key, tag))
    return proven
