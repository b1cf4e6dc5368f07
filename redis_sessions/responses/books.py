"""Per-response expiry: the books lua/chain_lib.lua keeps in a thread hash (its header
comment is the full account; :mod:`redis_sessions.keys` lists the fields).

A record goes once it is a leaf (no children) whose deadline has passed; a record
with children is kept by them, so every ancestor of a live record stays and a
readable response always resolves. Every leaf is indexed: in ``L`` (by deadline, at
most LEAVES_MAX entries and LEAVES_BYTES bytes), or, when L is full, in a queue linked
through the leaves' own ``o:`` fields, so that a thread with any number of live
branches sheds each one once past its deadline while it is written.
"""

from __future__ import annotations

PRUNE = 8
"""Most leaves one save removes (a parent left without children counts again)."""
PRUNE_VISITS = 16
"""Most entries of L, and of the queue, one save visits."""
LEAVES_MAX = 256
"""Entries of ``L`` at most (lua/chain_lib.lua); a leaf past them is queued."""
LEAVES_BYTES = 16384
"""Bytes of ``L`` at most: about 240 leaves of minted ids (68 bytes an entry)."""


def number(value: object) -> int | None:
    """Lua's ``tonumber`` of a field (None for a missing or non-numeric one)."""
    if value is None:
        return None
    text = value.decode() if isinstance(value, bytes) else str(value)
    try:
        return int(text)
    except ValueError:
        return None
