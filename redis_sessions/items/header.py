"""An item session's key in data format 1: its layout, its header, its bounds.

A session is ONE Redis list, ``<prefix>:{s:<id>}:items`` (docs/key-layout.md)::

    index 0       the stash: what the newest pops removed
    1 .. n-2      the items, oldest first: stored values (redis_sessions/codec.py)
    n-1 (last)    the header: the format, the counters, the token ring

The header is last so that the newest items and the header come back in one plain
``LRANGE -k -1``: a read checks the format and sizes itself by the largest entry
without a script or a second command. ``lua/items_lib.lua`` reads and writes the
key; this module parses it for the plain reads (and for tests and the command line).

The header is text, ``\\x00h<format> <v> <e> <g> <b> <from> <at>\\n<ring>``:

- ``\\x00h`` then the data format (1). 0x00 never starts a stored value (0xc1 does).
- ``v`` the version, bumped by every write; ``e`` the epoch, new when the session is
  created, cleared or forked onto; ``g`` the rewrites, bumped by every write that is not
  an append (a pop, a compaction, a clear); ``b`` the largest entry the session has
  held, in bytes as stored (what a read sizes its LRANGEs by); ``from`` and ``at`` the
  session and version it was forked from (empty unless forked).
- After the newline, the token ring every store's writes share (lua/tokens.lua).

The stash is ``\\x00p`` then, per pop, newest first, ``<len>:<token>\\n<entry>``: at most
:data:`POPS`, older ones only while all fit in :data:`POP_BYTES` (the newest whatever
its size). A re-sent pop finds its token in the ring and its item here.
"""

from __future__ import annotations

from typing import Optional

import msgspec

from ..codec import FORMAT
from ..errors import ErrorCode, SessionError

MAGIC = b"\x00h"
"""How the header starts; the data format follows."""
STASH = b"\x00p"
"""How the stash starts (an empty stash is just this)."""
POPS = 2
"""Popped entries the stash keeps, for the newest pops..."""
POP_BYTES = 64 << 10
"""... while they fit in this many bytes together (the newest is always kept)."""
READ_BYTES = 24 << 20
"""The most bytes one LRANGE of a read takes, counted at the largest entry the header
knows, or at ``max_item_bytes`` before the header is read: Redis copies about 10 MiB a
millisecond, so no read holds it for more than about 2.4 ms."""
READ_ENTRIES = 10_000
"""The most entries one LRANGE of a read takes (small entries cost by the entry)."""
SCAN_LIMIT = 1000
"""Non-items one pop drops at most before it answers (the caller calls again)."""
MAX_BATCH_ITEMS = 10_000
"""Items one ``add_items``, compaction or fork writes at most: one script's arguments,
bounded by count as ``max_batch_bytes`` bounds them by bytes. A session itself holds any
number (``max_items`` bounds it, when given): no call's work grows with its length."""
_COUNTER_DIGITS = 13
"""A counter's digits at most (Lua prints larger numbers in exponent form)."""


class Header(msgspec.Struct, frozen=True):
    """A parsed header."""

    version: int
    epoch: bytes
    rewrites: int
    largest: int
    forked_from: bytes
    forked_at: bytes
    ring: bytes

    @property
    def entries(self) -> list[tuple[int, bytes, bytes]]:
        """The ring's entries, oldest first: (server time in s, token, what the write answered)."""
        out = []
        for line in self.ring.split(b"\n")[:-1]:
            token, _, outcome = line[10:].partition(b" ")
            out.append((int(line[:10]), token, outcome))
        return out

    @property
    def tokens(self) -> list[bytes]:
        return [token for _, token, _ in self.entries]

    @property
    def outcomes(self) -> list[bytes]:
        return [outcome for _, _, outcome in self.entries]


def is_header(entry: object) -> bool:
    return isinstance(entry, bytes) and entry[:2] == MAGIC


def is_stash(entry: object) -> bool:
    return isinstance(entry, bytes) and entry[:2] == STASH


def try_parse(entry: bytes) -> Optional[Header]:
    """The header's fields; None unless ``entry`` is a format-1 header that parses."""
    line, newline, ring = entry.partition(b"\n")
    fields = line[2:].split(b" ")
    if not newline or entry[:2] != MAGIC or len(fields) < 7 or fields[0] != b"%d" % FORMAT:
        return None
    v, e, g, b, source, at = fields[1:7]
    if not e or not all(n.isdigit() and len(n) <= _COUNTER_DIGITS for n in (v, g, b)) or not (at.isdigit() or not at):
        return None
    return Header(int(v), e, int(g), int(b), source, at, ring)


def parse(entry: object, where: str, first: object = None) -> Header:
    """The header ``entry`` (a list's last entry) of the session at ``where``, or the
    refusal: ``session.record.corrupt`` for a format-1 session whose header does not
    parse, or whose last entry is not its header (``first``, its first entry, is its
    stash); ``session.record.unsupported`` for a list of another data format, or of none
    (written before the first, or by something else). As lua/items_lib.lua's ``head``."""
    entry = entry if isinstance(entry, bytes) else b""
    if entry[:2] == MAGIC:
        told = entry[2:entry.find(b" ")] if b" " in entry else b""
        if told.isdigit() and told != b"%d" % FORMAT:
            raise SessionError(ErrorCode.RECORD_UNSUPPORTED, f"{where} is in data format {told.decode()}; this "
                               f"version reads data format {FORMAT}")
        header = try_parse(entry)
        if header is None:
            raise SessionError(ErrorCode.RECORD_CORRUPT, f"{where}: its header does not parse")
        return header
    if is_stash(first):
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{where}: its last entry is not its header")
    raise SessionError(ErrorCode.RECORD_UNSUPPORTED, f"{where} was written before the first data format, or not "
                       f"by this package; this version reads data format {FORMAT}")


def popped(stash: bytes) -> list[tuple[bytes, bytes]]:
    """The stash's entries, newest first: (the pop's token, the entry it removed)."""
    out, at = [], len(STASH)
    while at < len(stash):
        size, _, rest = stash[at:].partition(b":")
        body = rest[:int(size)]
        token, _, entry = body.partition(b"\n")
        out.append((token, entry))
        at += len(size) + 1 + int(size)
    return out
