"""Jump lists, as lua/chain_lib.lua keeps them in a thread hash, mirrored for the memory
engine (``tests/test_chains_differential.py`` compares every field after every step).

A record of at least JUMP_MIN_BYTES keeps, in ``j:<id>``, its JUMPS nearest ancestors:
``<how many>|<the last of them>|<their ids, parent first, space-separated>``. The Redis
walk passes a whole list per call where it would make one call per record (for records
that big, the per-hop calls were most of a resolve's Redis time), and returns it as
stored for the caller to split. A list is only a hint: each record read names its own
parent, and a chain that does not link up is walked again by the pointers.
"""

from __future__ import annotations

from typing import Mapping

JUMP_MIN_BYTES = 8192
"""Records this big or bigger keep a jump list (about 55 bytes per listed ancestor: at
most 11% of such a record, 4% of one of 20 KB)."""
JUMPS = 16
"""Ancestors one list names. A list shorter than this ends at a root (it was cut short
there), so the walk stops there."""


def jump_list(fields: Mapping[str, "bytes | str"], parent: str, size: int) -> str | None:
    """The jump list of a record of ``size`` bytes saved under ``parent`` (None: none):
    the parent, then the first JUMPS - 1 of its own list, or its pointers followed that far."""
    if size < JUMP_MIN_BYTES or not parent:
        return None
    names = [parent]
    above = fields.get(f"j:{parent}")
    text = above.decode() if isinstance(above, bytes) else above
    parts = text.split("|", 2) if text is not None else []
    if len(parts) == 3:
        names.extend(parts[2].split()[:JUMPS - 1])
    else:
        cur: str = parent
        while len(names) < JUMPS:
            up = fields.get(f"p:{cur}")
            if not up:
                break
            cur = up.decode() if isinstance(up, bytes) else up
            names.append(cur)
    return f"{len(names)}|{names[-1]}|{' '.join(names)}"
