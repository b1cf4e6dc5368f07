"""The header: entry 0 of a session's list, holding its metadata and its token ring.

A session is ONE Redis list, ``<prefix>:{s:<id>}:items``: the header at index
0, then the encoded items, oldest first. Items and metadata in one key expire,
get evicted, purged and migrated together; a script touches one key only.

The header is bytes that Lua parses with one ``string.match`` (Redis's Lua
has cmsgpack, fakeredis's has not), and ``lua/items_lib.lua`` mirrors this
module function for function::

    \\x00rs1 <v> <e> <g> <forked_from> <forked_at> <n> <tlen> <rlen> <plen>[<later>]\\n<tokens><results><popped>[<later>]

- ``\\x00rs1``: the magic. 0x00 never starts an encoded item (a msgpack map
  starts with 0x80-0x8f, 0xde or 0xdf), so nothing that reads items takes the
  header for one, and a reader of the old layout skips it as garbage.
- ``v`` version, bumped by every write; ``e`` epoch, new when the session is
  created, cleared or forked onto; ``g`` rewrite count, bumped by every write
  that is not an append; ``forked_from``/``forked_at``, empty unless forked.
  Counters are decimal, at most 13 digits (Lua prints larger ones in
  exponent form); the epoch and ids hold no space or newline.
- ``n`` tokens; ``tlen``, ``rlen``, ``plen`` the byte lengths of the sections.
- ``tokens``: the newest :data:`RING` tokens, oldest first, each followed by a
  newline (tokens are hex, or ``k:<idempotency key>``: never a space or newline).
- ``results``: one ``<len>:<result>`` per token, in the same order.
- ``popped``: the entries the newest pops removed, newest first, as
  ``<len>:<token>\\n<entry>``: at most :data:`POPS` of them, and older ones only
  while all fit in :data:`POP_BYTES` (the newest is kept whatever its size).
- ``later``: a later version's fields go at the end of the first line or
  after the sections; writers that do not know them keep them as they are.

A write carries a token made client-side, part of the script's ARGV, so
redis-py re-sending a command whose reply was lost carries the same one. A
script that finds its token writes nothing and replies what the first run
replied: an add its version, a pop its item (from ``popped``; if that was
dropped since, or cleared, ``session.store.conflict``, never a second pop).
A token older than the newest 16 writes is forgotten, and its write would
apply again: the bound on how late a re-send may arrive.

The common write finds its token is new with one plain ``string.find``,
appends to each section and drops the oldest entry of each past its bound;
the ring is walked only for a re-sent write. Every write reads and rewrites
the header, so the popped section is kept small: it is most of the header.

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
from typing import Optional, Union

from ..errors import ErrorCode, SessionError

MAGIC = b"\x00rs1"
RING = 16
"""Tokens remembered per session: the newest writes."""
POPS = 2
"""Popped entries remembered, for the newest pops..."""
POP_BYTES = 64 << 10
"""... while they fit in this many bytes together (the newest is always kept)."""
RETAIN_MS = 600_000
"""How long a header-only session (emptied by pops, or cleared) keeps its ring
when the session has no TTL."""
SCAN_LIMIT = 1000
"""Entries one script call reads or drops at most (pop's garbage, get's scan, a read's page)."""

_LINE = re.compile(
    rb" ([0-9]+) ([^ \n]+) ([0-9]+) ([^ \n]*) ([0-9]*) ([0-9]+) ([0-9]+) ([0-9]+) ([0-9]+)([^\n]*)\n")
_FIELD = re.compile(rb"([0-9]+):")


@dataclass
class Header:
    """A parsed header: its counters, and its sections left in place in ``raw``
    (0-based offsets) until :func:`remember` works out what the new one keeps."""

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
    cut: Optional[tuple[int, int, int, int, int, int]] = None
    """What the next header keeps of ``raw``: tokens, results and popped ranges (start, end)."""
    tok: bytes = b""
    result: bytes = b""
    entry: Optional[bytes] = None
    new: bool = False
    """Not in the list yet: written with LPUSH rather than LSET."""

    @property
    def tail(self) -> bytes:
        return self.raw[self.start + self.tlen + self.rlen + self.plen:]

    @property
    def tokens(self) -> list[bytes]:
        return self.raw[self.start:self.start + self.tlen].split(b"\n")[:-1]

    @property
    def results(self) -> list[bytes]:
        return _fields(self.raw[self.start + self.tlen:self.start + self.tlen + self.rlen], "results")

    @property
    def popped(self) -> list[tuple[bytes, bytes]]:
        """(token, entry) of the remembered pops, newest first."""
        q = self.start + self.tlen + self.rlen
        found = _fields(self.raw[q:q + self.plen], "popped entries")
        return [(p[:p.index(b"\n")], p[p.index(b"\n") + 1:]) for p in found]


def is_header(entry: bytes) -> bool:
    return entry[:4] == MAGIC


def fresh(epoch: bytes) -> Header:
    return Header(version=0, epoch=epoch, rewrites=0, new=True)


def inherit(h: Header, ring: Header, pops: bool) -> None:
    """Give ``h`` the token ring of ``ring``, and its popped entries if ``pops``."""
    h.start, h.tlen, h.rlen, h.count, h.rest = ring.start, ring.tlen, ring.rlen, ring.count, b""
    h.plen = ring.plen if pops else 0
    h.raw = ring.raw[:h.start + h.tlen + h.rlen + h.plen]  # not the later sections


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


def _next(s: bytes, q: int, end: int) -> Optional[tuple[int, int]]:
    """The field at ``q`` in ``s`` (ending by ``end``): where its value starts, and where the next field does."""
    m = _FIELD.match(s, q)
    if m is None:
        return None
    r, n = m.end(), int(m.group(1))
    if r + n > end:
        return None
    return r, r + n


def find(h: Header, tok: bytes) -> Union[bytes, None, bool]:
    """What ``tok``'s write replied, as remembered (a pop's ``i`` with its entry, or
    ``x`` if that is gone); None if it is not in the ring; False if the ring is damaged."""
    at = h.raw.find(b"\n" + tok + b"\n", h.start - 1)
    if at < 0 or at + len(tok) + 1 > h.start + h.tlen - 1:
        return None
    index = h.raw[h.start - 1:at + 1].count(b"\n")
    q, end = h.start + h.tlen, h.start + h.tlen + h.rlen
    for _ in range(index):
        field = _next(h.raw, q, end)
        if field is None:
            return False
        r, q = field
    result = h.raw[r:q]
    if result != b"i":
        return result
    q, end, key = end, end + h.plen, tok + b"\n"
    while q < end:
        field = _next(h.raw, q, end)
        if field is None:
            return False
        r, q = field
        if h.raw[r:r + len(key)] == key:
            return b"i" + h.raw[r + len(key):q]
    return b"x"


def remember(h: Header, tok: bytes, result: bytes, entry: Optional[bytes] = None) -> bool:
    """Add ``tok`` and its result as the newest (and a pop's entry); drop the oldest past
    the bounds. Only works out what to keep (``h.cut``); :func:`dump` builds the new
    header. False if the ring is damaged (nothing changed)."""
    ts, te = h.start, h.start + h.tlen
    rs, re_ = te, te + h.rlen
    ps, pe = re_, re_ + h.plen
    n = h.count + 1
    if n > RING:
        c = h.raw.find(b"\n", ts)
        field = _next(h.raw, rs, re_)
        if c < 0 or c >= te or field is None:
            return False
        ts, rs, n = c + 1, field[1], n - 1
    keep = pe
    if entry is not None:
        size, kept, total, q = len(tok) + 1 + len(entry), 1, 0, ps
        keep = ps
        while q < pe and kept < POPS:
            field = _next(h.raw, q, pe)
            if field is None:
                return False
            if total + (field[1] - q) + size > POP_BYTES:
                break
            total, kept, q = total + field[1] - q, kept + 1, field[1]
            keep = q
    h.cut, h.tok, h.result, h.entry, h.count = (ts, te, rs, re_, ps, keep), tok, result, entry, n
    return True


def _fields(section: bytes, what: str) -> list[bytes]:
    out: list[bytes] = []
    q = 0
    while q < len(section):
        field = _next(section, q, len(section))
        if field is None:
            raise SessionError(ErrorCode.RECORD_CORRUPT, f"the session header's {what} do not parse")
        out.append(section[field[0]:field[1]])
        q = field[1]
    return out


def dump(h: Header) -> bytes:
    assert h.cut is not None, "a header is written after remember()"
    ts, te, rs, re_, ps, keep = h.cut
    raw, tok, result = h.raw, h.tok, h.result
    pop = b"" if h.entry is None else b"%d:%s\n%s" % (len(tok) + 1 + len(h.entry), tok, h.entry)
    toks = raw[ts:te] + tok + b"\n"
    res = raw[rs:re_] + b"%d:%s" % (len(result), result)
    pops = pop + raw[ps:keep]
    return b"%s %d %s %d %s %s %d %d %d %d%s\n%s%s%s%s" % (
        MAGIC, h.version, h.epoch, h.rewrites, h.forked_from, h.forked_at, h.count, len(toks), len(res),
        len(pops), h.rest, toks, res, pops, h.tail)


def _counter(value: bytes) -> bool:
    return value.isdigit() and len(value) <= 13


def replay(result: bytes, where: str) -> Union[bytes, None, int]:
    """What the first run of a write replied, from what it remembered."""
    kind = result[:1]
    if kind == b"a":
        return int(result[1:]) if _counter(result[1:]) else 0
    if kind == b"i":
        return result[1:]
    if kind == b"n":
        return None
    if kind == b"x":
        raise SessionError(ErrorCode.STORE_CONFLICT, f"{where}: this pop already ran; its item is no longer remembered")
    return 1
