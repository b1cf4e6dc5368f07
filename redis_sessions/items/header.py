"""An item session's key in data format 1: its layout, its header, its bounds.

A session is ONE Redis list, ``<prefix>:{s:<id>}:items`` (docs/key-layout.md)::

    0, 1          the stash: what the two newest pops removed, a slot each
    2 .. n+1      the n items, oldest first: stored values (redis_sessions/codec.py)
    n+2           the token ring of the session's writes (lua/tokens.lua)
    n+3 (last)    the header

The ring and the header are last so that the newest items, the ring and the header come
back in one plain ``LRANGE -k -1``: a read checks the data format and sizes itself by
the largest entry without a script or a second command. ``lua/items_lib.lua`` reads
and writes the key; this module parses it for the plain reads (and for the tests).

The header is ``\\x00h<format> <v> <g> <n> <p> <s> <b> <e> <from> <at>``:

- ``\\x00h`` then the data format, 1. 0x00 never starts a stored value (0xc1 does).
- ``v`` the version, bumped by every write; ``g`` the rewrites, bumped by every write
  that is not an append (a pop, a compaction, a clear); ``n`` the items.
- ``p`` the stash slot of the newest pop (0 or 1), ``s`` its bytes.
- ``b`` the largest entry the session has held, as stored (what a read sizes its LRANGEs
  by); ``e`` the epoch, new when the session is created, cleared or forked onto; ``from``
  and ``at`` the session and version it was forked from (empty unless forked).

A stash slot is ``\\x00p``, then, when it keeps a pop's entry, ``<token>\\n<entry>``. A pop
writes its entry into the older pop's slot, and the newer pop's stays while both fit in
:data:`POP_BYTES`: a re-sent pop finds its token in the ring and its entry here.
"""

from __future__ import annotations

from typing import Optional

import msgspec

from ..codec import FORMAT
from ..errors import ErrorCode, SessionError

MAGIC = b"\x00h"
"""How the header starts; the data format follows."""
STASH = b"\x00p"
"""How a stash slot starts (an empty one is just this)."""
POPS = 2
"""Popped entries the stash keeps (a slot each), for the newest pops..."""
POP_BYTES = 64 << 10
"""... while they fit in this many bytes together (the newest is always kept)."""
READ_BYTES = 24 << 20
"""The most bytes one LRANGE of a read takes, counted at the largest entry the header
knows, or at ``max_item_bytes`` before the header is read: sized so that one read stays
well inside the 5 ms bound (docs/benchmarks.md#the-longest-hold-by-size)."""
READ_ENTRIES = 10_000
"""The most entries one LRANGE of a read takes (small entries cost by the entry)."""
SCAN_LIMIT = 1000
"""Non-items one pop drops at most before it answers (the caller calls again)."""
MAX_BATCH_ITEMS = 5_000
"""Items one ``add_items``, compaction or fork writes at most: one script's arguments,
bounded by count as ``max_batch_bytes`` bounds them by bytes. A session itself holds any
number (``max_items`` bounds it, when given): no call's work grows with its length."""
_COUNTER_DIGITS = 13
"""A counter's digits at most (Lua prints larger numbers in exponent form)."""


class Header(msgspec.Struct, frozen=True):
    """A parsed header."""

    version: int
    rewrites: int
    count: int
    newest: int
    popped: int
    largest: int
    epoch: bytes
    forked_from: bytes
    forked_at: bytes


def is_header(entry: object) -> bool:
    return isinstance(entry, bytes) and entry[:2] == MAGIC


def is_stash(entry: object) -> bool:
    return isinstance(entry, bytes) and entry[:2] == STASH


def try_parse(entry: bytes) -> Optional[Header]:
    """The header's fields; None unless ``entry`` is a format-1 header that parses."""
    fields = entry.split(b" ")
    if len(fields) < 10 or fields[0] != MAGIC + b"%d" % FORMAT:
        return None
    v, g, n, p, s, b, e, source, at = fields[1:10]
    if not all(x.isdigit() and len(x) <= _COUNTER_DIGITS for x in (v, g, n, s, b)) or p not in (b"0", b"1"):
        return None
    if not e or not (at.isdigit() or not at) or b"\n" in entry:
        return None
    return Header(int(v), int(g), int(n), int(p), int(s), int(b), e, source, at)


def parse(entry: object, where: str, first: object = None) -> Header:
    """The header ``entry`` (a list's last entry) of the session at ``where``, or the
    refusal: ``session.record.corrupt`` for a format-1 session whose header does not
    parse, or whose last entry is not its header (``first``, its first entry, is a stash
    slot); ``session.record.unsupported`` for a list of another data format, or of none
    (written before the first, or by something else). As lua/items_lib.lua's ``head``."""
    entry = entry if isinstance(entry, bytes) else b""
    header = try_parse(entry)
    if header is not None:
        return header
    if entry[:2] == MAGIC:
        told = entry[2:].split(b" ", 1)[0]
        if told.isdigit() and told != b"%d" % FORMAT and b" " in entry:
            raise SessionError(ErrorCode.RECORD_UNSUPPORTED, f"{where} is in data format {told.decode()}; this "
                               f"version reads data format {FORMAT}")
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{where} has a header that does not parse")
    if is_stash(first):
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{where} has another last entry than its header")
    raise SessionError(ErrorCode.RECORD_UNSUPPORTED, f"{where} was written before the first data format, or not "
                       f"by this package; this version reads data format {FORMAT}")
