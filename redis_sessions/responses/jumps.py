"""Jump lists, as lua/chain_lib.lua keeps them in a thread hash, mirrored for the memory
engine (``tests/test_chains_differential.py`` compares every field after every step).

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

from typing import Mapping

JUMP_MIN_BYTES = 4096
"""Records this big or bigger keep a jump list (measured: lists from 1 KB made a mix of
0.3 to 3 KB responses take 1.06x the peers' memory, against 0.95x without)."""
JUMP_BYTES = 1024
"""One listed ancestor per this many bytes of the record (about 55 bytes each: with the
field, at most 8% of the record, 5% of one of 20 KB)."""
JUMPS = 16
"""Ancestors one list names at most."""


def _text(value: "bytes | str | None") -> str | None:
    return value.decode() if isinstance(value, bytes) else value


def parts(text: str) -> tuple[int, str, list[str]] | None:
    """A jump list's parts: how many ids it names, where the walk goes on ('' at a root),
    and the ids, parent first (None when ``text`` is not one)."""
    fields = text.split(" ", 2)
    if len(fields) != 3 or not fields[0].isdigit():
        return None
    return int(fields[0]), fields[1], fields[2].split()


def jump_list(fields: Mapping[str, "bytes | str"], parent: str, size: int) -> str | None:
    """The jump list of a record of ``size`` bytes saved under ``parent`` (None: none):
    the parent, then the first names of its own list, or its pointers followed that far."""
    if size < JUMP_MIN_BYTES or not parent:
        return None
    want = min(JUMPS, size // JUMP_BYTES)
    names, ends = [parent], False
    above = _text(fields.get(f"j:{parent}"))
    listed = parts(above) if above is not None else None
    if listed is not None:
        count, goes_on, ids = listed
        names.extend(ids[:want - 1])
        # its list ends at a root, and all of it fits in this one
        ends = goes_on == "" and len(names) - 1 == count
    else:
        cur: str = parent
        while len(names) < want:
            up = _text(fields.get(f"p:{cur}"))
            if not up:
                ends = True
                break
            cur = up
            names.append(cur)
        if len(names) == want and not ends:
            ends = not _text(fields.get(f"p:{names[-1]}"))
    return f"{len(names)} {'' if ends else names[-1]} {' '.join(names)}"
