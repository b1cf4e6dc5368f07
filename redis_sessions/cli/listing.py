"""``list``: the ids a prefix holds, a page at a time: at most ``--limit`` ids a page,
and never more read at once than one SCAN batch and one HSCAN batch besides them.

A page reads SCAN batches on every primary in turn; for ``responses``, each live
thread of a batch in HSCAN batches. Each batch is taken in the order of its ids
(sorted here: SCAN's own order is the hash table's), so a page that fills in the
middle of a batch can say where it stopped: the cursor names the batch (the SCAN
cursor it started at and the one it ended at) and the first id not listed. The
next page reads that batch again. If it ends where it ended before, it covered the
same part of the key space, so every id before the named one that is still there
was listed, and those are skipped. If it ends elsewhere, the key space changed
under it, and the whole batch is listed again: an id may be listed twice, never
skipped. So SCAN's own promise holds across pages: a key there the whole time is
listed at least once. A thread's HSCAN batches are continued the same way.

The cursor (printed by a page, given back with ``--cursor``), its parts separated
by ``:`` and its ids percent-encoded:

- ``<node>:<scan>``: start the SCAN batch at ``<scan>`` on primary ``<node>`` (in
  order of name), from its first id;
- ``<node>:<scan>:<end>:<id>``: in the batch from ``<scan>`` that ended at ``<end>``,
  from ``<id>`` on (a thread tag for ``responses``);
- ``...:<id>:<hscan>``: ``responses``, thread ``<id>`` from its HSCAN batch at ``<hscan>``;
- ``...:<id>:<hscan>:<hend>:<response id>``: in that HSCAN batch, which ended at
  ``<hend>``, from ``<response id>`` on.

Only live things are listed (:func:`.keyscan.state`).
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

from ..errors import ErrorCode, SessionError
from ..keys import KeySpace
from ..link import AnyRedis, as_text, close_client
from ..responses.store import hscan_count
from ..errors import translate_errors
from . import output
from .common import Target
from .keyscan import _MARK, STATE_REPLIES, Failures, Key, KeyKinds, pipelined, primaries, queue_state, \
    scan_match, scan_step, state, wrong_type

KINDS = ("threads", "responses", "sessions", "conversations")
_KEY_KIND = {"threads": "thread", "responses": "thread", "sessions": "items", "conversations": "conversation"}
MAX_LIMIT = 10_000
"""The most ids a page holds (``--limit``): what bounds a page's memory, with the batches below."""
_COUNT = (10, 1_000)
"""SCAN and HSCAN ``COUNT`` follow ``--limit`` within these bounds: a batch of about ``COUNT`` entries."""
_MAX_CURSOR = 2**64 - 1  # SCAN's cursor is an unsigned 64-bit number
_NUMBER = re.compile(r"[0-9]{1,20}")
_ID = re.compile(r"[A-Za-z0-9_.~%-]{1,1000}")  # what quote(..., safe="") makes of an id


@dataclass(frozen=True)
class Batch:
    """Where a page goes on within one batch: the one that started at ``start`` and ended
    at ``end`` when the page stopped in it, from id ``first`` on."""

    start: int
    end: int
    first: str


@dataclass(frozen=True)
class Position:
    """Where a page starts: primary ``node``, SCAN cursor ``scan``; inside that batch (``batch``),
    and for ``responses`` inside its first thread: from its HSCAN cursor ``hscan``, and inside
    that HSCAN batch (``fields``)."""

    node: int = 0
    scan: int = 0
    batch: Batch | None = None
    hscan: int = 0
    fields: Batch | None = None

    def text(self) -> str:
        """The cursor a page prints (the module docstring)."""
        parts: list[int | str] = [self.node, self.scan]
        if self.batch is not None:
            parts = [self.node, self.batch.start, self.batch.end, quote(self.batch.first, safe="")]
            if self.fields is not None:
                parts += [self.fields.start, self.fields.end, quote(self.fields.first, safe="")]
            elif self.hscan:
                parts.append(self.hscan)
        return ":".join(map(str, parts))


def parse_cursor(text: str) -> Position:
    """An argparse ``type``: a cursor ``list`` printed, read back (:meth:`Position.text`)."""
    parts = text.split(":")
    try:
        where = _NUMBER_PARTS[len(parts)]
        n = [_number(part) for i, part in enumerate(parts) if i in where]
        ids = [_ident(part) for i, part in enumerate(parts) if i not in where]
    except (KeyError, ValueError):
        raise argparse.ArgumentTypeError(f"{output.one_line(text)[:80]!r} is not a cursor that list printed") from None
    if len(parts) == 2:
        return Position(n[0], n[1])
    batch = Batch(n[1], n[2], ids[0])
    if len(parts) == 4:
        return Position(n[0], n[1], batch)
    if len(parts) == 5:
        return Position(n[0], n[1], batch, n[3])
    return Position(n[0], n[1], batch, n[3], Batch(n[3], n[4], ids[1]))


_NUMBER_PARTS = {2: (0, 1), 4: (0, 1, 2), 5: (0, 1, 2, 4), 7: (0, 1, 2, 4, 5)}
"""Which parts of a cursor of so many parts are numbers; the others are ids."""


def _number(part: str) -> int:
    if not _NUMBER.fullmatch(part) or int(part) > _MAX_CURSOR:
        raise ValueError(part)
    return int(part)


def _ident(part: str) -> str:
    if not _ID.fullmatch(part):
        raise ValueError(part)
    return unquote(part, errors="strict")  # a UnicodeDecodeError is a ValueError


def _pattern(keys: KeySpace, kind: str, match: str) -> str:
    built = {"thread": keys.thread, "items": keys.session_items, "conversation": keys.conversation}[_KEY_KIND[kind]]
    return scan_match(built(_MARK), "" if kind == "responses" else match)


def _count(limit: int) -> int:
    return min(max(limit, _COUNT[0]), _COUNT[1])


async def list_ids(target: Target, kind: str, match: str, limit: int, cursor: Position | None) -> int:
    failures = Failures()
    client = target.client()
    try:
        nodes = await primaries(client)
        start = cursor or Position()
        if start.node >= len(nodes) or (kind != "responses" and (start.hscan or start.fields)):
            raise SessionError(ErrorCode.INPUT_INVALID, f"--cursor {start.text()!r} is not a cursor that list "
                                                        f"{kind} printed here")
        pager = _Pager(client, nodes, target.keys, kind, match, limit, failures)
        found, more = await pager.page(start)
    finally:
        await close_client(client)
    _print(target, kind, found, None if more is None else more.text())
    failures.raise_if_any("list")
    return 0


def _print(target: Target, kind: str, found: list[str], more: str | None) -> None:
    if target.json:
        output.print_json({"kind": kind, "prefix": target.prefix, "ids": found, "cursor": more})
        return
    for ident in found:
        print(ident)
    what = {"sessions": "item session", "threads": "thread", "responses": "response",
            "conversations": "conversation"}[kind]
    tail = f"; more with --cursor {more}" if more else ""
    output.note(f"{output.plural(len(found), what)} of prefix {target.prefix!r}{tail}")


def _again(stopped: Batch | None, end: int) -> str | None:
    """The id to go on from in a batch a page stopped in (``stopped``), read again and ending
    at ``end``: its first unlisted id if it ends where it did (the same keys), else None (the
    key space changed under it: list all of it again)."""
    return stopped.first if stopped is not None and stopped.end == end else None


class _Full(Exception):
    """The page holds ``--limit`` ids and there is at least one more: stop at ``at``."""

    def __init__(self, at: Position) -> None:
        self.at = at


@dataclass
class _Pager:
    client: AnyRedis
    nodes: list[Any]
    keys: KeySpace
    kind: str
    match: str
    limit: int
    failures: Failures
    found: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.kinds = KeyKinds(self.keys)
        self.pattern = _pattern(self.keys, self.kind, self.match)

    async def page(self, start: Position) -> tuple[list[str], Position | None]:
        """Up to ``limit`` ids from ``start``, and where the next page starts (None: the end)."""
        node, scan, resume = start.node, start.scan, start
        try:
            while node < len(self.nodes) and len(self.found) < self.limit:
                scan = await self._batch(node, scan, resume)
                resume = Position()
                if scan == 0:
                    node += 1
        except _Full as full:
            return self.found, full.at
        return self.found, Position(node, scan) if node < len(self.nodes) else None

    async def _batch(self, node: int, scan: int, resume: Position) -> int:
        """List one SCAN batch (from ``resume`` on, if it is this batch again); its end cursor."""
        end, names = await scan_step(self.client, self.pattern, self.nodes[node], scan, count=_count(self.limit))
        keys = [k for k in map(self.kinds.classify, names) if k.kind == _KEY_KIND[self.kind]]
        first = _again(resume.batch, end)
        for key, largest in sorted(await self._live(keys), key=lambda kl: kl[0].ident):
            if first is not None and key.ident < first:
                continue
            here = Position(node, scan, Batch(scan, end, key.ident))
            if self.kind != "responses":
                self._take(key.ident, here)
                continue
            await self._thread(key.name, largest, here, resume if key.ident == first else Position())
        return end

    def _take(self, ident: str, here: Position) -> None:
        if len(self.found) == self.limit:
            raise _Full(here)
        self.found.append(ident)

    async def _thread(self, thread: str, largest: int, here: Position, resume: Position) -> None:
        """The response ids of one thread (its ``p:<id>`` fields: each record has one, and
        they are small), in HSCAN batches from ``resume``."""
        match = scan_match("p:" + _MARK, self.match)
        count = hscan_count(largest, 2 * _count(self.limit))  # about half the fields are p:
        hscan, fields = resume.hscan, resume.fields
        while True:
            if len(self.found) == self.limit:  # full at a batch's edge: go on from this HSCAN cursor
                raise _Full(Position(here.node, here.scan, here.batch, hscan=hscan))
            async with translate_errors(f"HSCAN {thread!r}"):
                end, page = await self.client.hscan(thread, hscan, match=match, count=count)
            end = int(end)
            first = _again(fields, end)
            for rid in sorted(as_text(name)[2:] for name in page):
                if first is not None and rid < first:
                    continue
                self._take(rid, Position(here.node, here.scan, here.batch, hscan, Batch(hscan, end, rid)))
            if end == 0:
                return
            hscan, fields = end, None

    async def _live(self, keys: list[Key]) -> list[tuple[Key, int]]:
        """The live ones of ``keys``, each with its largest record (threads); a key of
        another Redis type is none (``stats`` reports it)."""
        replies = await pipelined(self.client, keys, queue_state, lambda k: STATE_REPLIES[k.kind], None, "list")
        live = []
        for key, reply in zip(keys, replies):
            if not any(map(wrong_type, reply)) and all(self.failures.check(key.name, v, "list") for v in reply):
                found = state(key, reply)
                if found.status == "live":
                    live.append((key, found.largest))
        return live
