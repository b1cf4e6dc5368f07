"""Paging: the loop that turns ``lua/conv_list.lua``'s slices into one API page.

Items have sequence numbers 1, 2, ... in the order they were added; a deleted
item leaves a hole. A page is the next ``limit`` live items from a position,
upwards (``asc``) or downwards (``desc``), plus one more to learn ``has_more``.
``after`` is resolved to the sequence number its item had, which the
conversation keeps for 5 minutes after the item is deleted (for its last 1,000
deleted items: the tombstones of ``lua/conv_lib.lua``), so a cursor naming a
recently deleted item pages on from where that item stood; an ``after`` naming
no item the conversation holds or keeps is refused (``session.input.invalid``, 400).

Bounded work: a page is one call whatever the conversation's length: one
HGET for the cursor, one HMGET of ``limit + 1`` positions, and where items
were deleted, one HGET per run of deleted items (each run's two ends hold
``g:<seq>`` fields naming the other end, kept by ``conv_delete_item`` in O(1))
and HMGETs of doubling length for the rest. So 10,000 deleted items before a
live one cost one HGET, not 10,000 reads. The one walk left is a scan that
starts inside a run (``after`` naming a deleted item in the middle of a run):
it reads the rest of that run, at most ``SCAN_BUDGET`` positions per call, and
the store calls again from where the last call stopped; those calls see the
conversation at slightly different moments, so an item deleted meanwhile may
still be on the page.
"""

from __future__ import annotations

from typing import Awaitable, Callable, NamedTuple, Optional

from ..models import Item
from .models import ConversationItemList

SCAN_BUDGET = 1024
"""Positions one call may read: a page over a run of holes takes one call per this many."""


class Slice(NamedTuple):
    """One scan: the items found (encoded, in page order) and where to continue (None: at the end)."""

    entries: list[bytes]
    next: Optional[int]


ScanCall = Callable[[int, Optional[str], Optional[int]], Awaitable[Slice]]
"""(want, after, from position) -> one script call's slice."""


async def collect(call: ScanCall, limit: int, after: Optional[str]) -> list[bytes]:
    """Up to ``limit + 1`` entries: the first call resolves ``after``, later ones continue."""
    want = limit + 1
    got = await call(want, after, None)
    entries = list(got.entries)
    while len(entries) < want and got.next is not None:
        got = await call(want - len(entries), None, got.next)
        entries.extend(got.entries)
    return entries


def page_of(items: list[Item], limit: int) -> ConversationItemList:
    data = items[:limit]
    return ConversationItemList(data=data, first_id=_id(data[0]) if data else None,
                                last_id=_id(data[-1]) if data else None, has_more=len(items) > limit)


def _id(item: Item) -> Optional[str]:
    value = item.get("id")
    return value if isinstance(value, str) else None
