"""The defaults and bounds every store shares. This module sits below the three stores
(``responses``, ``items``, ``conversations``), which are siblings and import none of
each other: what more than one of them needs lives here, in :mod:`.codec`, or in
:mod:`.tokens`.

Each byte bound is where a call stays within 5 ms of Redis 7.0's time: a script is
handed its arguments whole, and Redis's Lua hashes every byte of each, at a cost per KB
(docs/benchmarks.md#unit-costs) that puts 4 MiB of arguments near 5 ms before the script's first
line.
"""

from __future__ import annotations


class _Unset:
    """``UNSET``: an argument not given, where ``None`` means something (no TTL, no parent)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET = _Unset()
"""An argument not given (``None`` means something: no TTL, no parent)."""

DEFAULT_TTL_SECONDS = 30 * 24 * 3600
"""The one default TTL of every store: 30 days, as the Responses API keeps stored responses."""
DEFAULT_MAX_RECORD_BYTES = 1 << 20
"""The largest response record a store accepts unless told otherwise (``max_record_bytes``)."""
MAX_ITEM_BYTES = 1 << 20
"""The default limit on one encoded item (item sessions and conversations)."""
MAX_BATCH_BYTES = 1 << 20
"""The default limit on the encoded items of one write (``add_items``, a compaction's
output, a fork, a conversation's append): one script's arguments."""
