"""The header: entry 0 of a session's list, holding its metadata and its token ring.

A session is ONE Redis list, ``<prefix>:{s:<id>}:items``: the header at index
0, then the encoded items, oldest first. Items and metadata in one key expire,
get evicted, purged and migrated together; a script touches one key only.
``lua/items_lib.lua`` reads and writes it; this module parses it (for the
reads that skip a script, and for tests) and holds the bounds the scripts share.

The header is bytes that Lua parses with one ``string.match`` (Redis's Lua
has cmsgpack, fakeredis's has not)::

    \\x00rs1 <v> <e> <g> <forked_from> <forked_at> <n> <tlen> <rlen> <plen>[<later>]\\n<tokens><results><popped>[<later>]

- ``\\x00rs1``: the magic. 0x00 never starts an encoded item (a msgpack map
  starts with 0x80-0x8f, 0xde or 0xdf; a compressed one with 0xc1), so nothing that reads items takes the
  header for one, and a reader of the old layout skips it as garbage.
- ``v`` version, bumped by every write; ``e`` epoch, new when the session is
  created, cleared or forked onto; ``g`` rewrite count, bumped by every write
  that is not an append; ``forked_from``/``forked_at``, empty unless forked.
  Counters are decimal, at most 13 digits (Lua prints larger ones in
  exponent form); the epoch and ids hold no space or newline.
- ``n`` 0 (it counted the tokens of headers before the shared ring); ``tlen``,
  ``rlen``, ``plen`` the byte lengths of the sections.
- ``tokens``: the session's operation tokens with what each write replied, in
  the format every store shares (``lua/tokens.lua``, :mod:`redis_sessions.tokens`):
  ``<server s><token> <result>\n`` per write, oldest first, kept 30 s, at most 1 KiB.
- ``results``: empty (headers before the shared ring kept the results apart; the
  next write drops them).
- ``popped``: :data:`HINT` when index 1 holds the stash (below), else empty.
  Headers written before the stash kept the popped entries themselves here;
  the next write drops them.
- ``later``: a later version's fields go at the end of the first line or
  after the sections; writers that do not know them keep them as they are.

The stash: what the newest pops removed, in ONE entry at index 1, so that a
retried pop can return its item while the header stays small (every write
reads and rewrites the header; none but a pop, a fork onto an emptied id, or
a retried pop reads the stash). It is :data:`STASH` then
``<len>:<token>\\n<entry>`` per pop, newest first: at most :data:`POPS`, and
older ones only while all fit in :data:`POP_BYTES` (the newest is kept
whatever its size). It starts with 0x00, so reads skip it as a non-item, and a
pop never drops it; a pop rewrites it, a clear or a compaction removes it.
A stash is believed only when the header hints at it and the entry at index 1
starts with :data:`STASH`.

A write carries a token made client-side, part of the script's ARGV, so
redis-py re-sending a command whose reply was lost carries the same one. A
script that finds its token writes nothing and replies what the first run
replied: an add its version, a pop its item (from the stash; if that was
dropped since, or cleared, ``session.store.conflict``, never a second pop).
A token is remembered 30 s (and within the ring's 1 KiB: the last 32 writes
of a session written faster than once a second): the bound on how late a re-send
may arrive.

Result kinds: ``a<v>`` add, ``i`` pop of an item, ``n`` pop that found none,
``m`` pop that met :data:`SCAN_LIMIT` non-items first (the caller calls
again), ``c`` compaction, ``f`` fork, ``z`` clear.

A header whose first line does not parse, or whose sections are shorter than
it says, is ``session.record.corrupt`` for every script that reads it; a ring
whose sections disagree is, for every script that walks that part of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from ..errors import ErrorCode, SessionError

MAGIC = b"\x00rs1"
STASH = b"\x00rsp"
"""How the stash at index 1 starts."""
HINT = b"0:"
"""The header's popped section when index 1 holds the stash (an empty entry to the
headers' older readers, which kept popped entries there)."""
POPS = 2
"""Popped entries remembered, for the newest pops..."""
POP_BYTES = 64 << 10
"""... while they fit in this many bytes together (the newest is always kept)."""
READ_BYTES = 512 << 10
"""What one read returns at most, about: one LRANGE takes READ_BYTES at the largest entry
the header knows (its later field `` b<bytes>``, kept by every write), and no LRANGE starts
past READ_BYTES read (lua/items_lib.lua). A header without the field (written by a
version before it) is read in doubling windows, counted as it goes."""
SCAN_LIMIT = 1000
"""Entries one script call reads or drops at most (pop's garbage, get's scan, a read's page)."""
MAX_BATCH_ITEMS = 10_000
"""Items one ``add_items``, compaction or fork writes at most: one script's arguments,
bounded by count as ``max_batch_bytes`` bounds them by bytes. A session itself holds any
number (``max_items`` bounds it, when given): no call's work grows with its length."""

_LINE = re.compile(
    rb" ([0-9]+) ([^ \n]+) ([0-9]+) ([^ \n]*) ([0-9]*) ([0-9]+) ([0-9]+) ([0-9]+) ([0-9]+)([^\n]*)\n")
_FIELD = re.compile(rb"([0-9]+):")


@dataclass
class Header:
    """A parsed header: its counters, and its sections left in place in ``raw`` (0-based offsets)."""

    version: int
    epoch: bytes
    rewrites: int
    forked_from: bytes = b""
    forked_at: bytes = b""
    count: int = 0
    rest: bytes = b""
    raw: bytes = b""
    start: int = 0
    tlen: int = 0
    rlen: int = 0
    plen: int = 0

    @property
    def tail(self) -> bytes:
        return self.raw[self.start + self.tlen + self.rlen + self.plen:]

    @property
    def ring(self) -> list[tuple[int, bytes, bytes]]:
        """The token ring's entries, oldest first: (server time in s, token, what the write replied)."""
        out = []
        for line in self.raw[self.start:self.start + self.tlen].split(b"\n")[:-1]:
            token, _, result = line[10:].partition(b" ")
            out.append((int(line[:10]), token, result))
        return out

    @property
    def tokens(self) -> list[bytes]:
        return [token for _, token, _ in self.ring]

    @property
    def results(self) -> list[bytes]:
        return [result for _, _, result in self.ring]

    @property
    def largest(self) -> Optional[int]:
        """The largest entry the session has held, in bytes (None: not known)."""
        m = re.search(rb" b([0-9]+)", self.rest)
        return int(m.group(1)) if m else None

    @property
    def hinted(self) -> bool:
        """Whether index 1 holds the stash (the header says so)."""
        q = self.start + self.tlen + self.rlen
        return self.raw[q:q + self.plen] == HINT


def is_header(entry: bytes) -> bool:
    return entry[:4] == MAGIC


def is_stash(entry: bytes) -> bool:
    return entry[:4] == STASH


def try_parse(s: bytes) -> Optional[Header]:
    """The header's fields, its sections left in place; None if it does not parse."""
    if s[:4] != MAGIC:
        return None
    m = _LINE.match(s, 4)
    if m is None:
        return None
    v, e, g, source, at, n, tl, rl, pl, rest = m.groups()
    if any(len(c) > 13 for c in (v, g, n, tl, rl, pl)):
        return None
    p, tlen, rlen, plen = m.end(), int(tl), int(rl), int(pl)
    if p + tlen + rlen + plen > len(s):
        return None
    return Header(version=int(v), epoch=e, rewrites=int(g), forked_from=source, forked_at=at, count=int(n),
                  rest=rest, raw=s, start=p, tlen=tlen, rlen=rlen, plen=plen)


def parse(s: bytes, where: str) -> Header:
    h = try_parse(s)
    if h is None:
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{where}: the session header does not parse")
    return h
