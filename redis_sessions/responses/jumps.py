"""Jump lists, as lua/chain_jumps.lua keeps them in a thread hash: their bounds, and how
the store reads one the walk returns.

A record of at least JUMP_MIN_BYTES keeps, in ``j:<id>``, its nearest ancestors, one
per JUMP_BYTES of its own size and JUMPS at most: ``<how many> <where the walk goes on,
empty at a root> <their ids, parent first>``, all space-separated (ids hold no whitespace,
so a walk's reply entry with a space in it is a list). The Redis walk passes a
whole list per call where it would make one call per record (for records that big, the
per-hop calls were most of a resolve's Redis time), and returns it as stored for the
caller to split. A list is only a hint: each record read names its own parent, and a
chain that does not link up is walked again by the pointers.
"""

from __future__ import annotations

JUMP_MIN_BYTES = 4096
"""Records this big or bigger keep a jump list (measured: lists from 1 KB made a mix of
0.3 to 3 KB responses take 1.06x the peers' memory, against 0.95x without)."""
JUMP_BYTES = 1024
"""One listed ancestor per this many bytes of the record (about 55 bytes each: with the
field, at most 8% of the record, 5% of one of 20 KB)."""
JUMPS = 16
"""Ancestors one list names at most."""


def parts(text: str) -> tuple[int, str, list[str]] | None:
    """A jump list's parts: how many ids it names, where the walk goes on ('' at a root),
    and the ids, parent first (None when ``text`` is not one)."""
    fields = text.split(" ", 2)
    if len(fields) != 3 or not fields[0].isdigit():
        return None
    return int(fields[0]), fields[1], fields[2].split()
