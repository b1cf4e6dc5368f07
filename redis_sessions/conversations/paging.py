"""Paging, written once: the scan that ``lua/conv_list.lua`` runs (mirrored here for
the memory backend) and the loop that turns its slices into one API page.

Items have sequence numbers 1, 2, ... in the order they were added; a deleted
item leaves a hole. A page is the next ``limit`` live items from a position,
upwards (``asc``) or downwards (``desc``), plus one more to learn ``has_more``.
``after`` is resolved to the sequence number its item had, which the
conversation keeps after the item is deleted, so a cursor naming a deleted
item pages on from where that item stood; an ``after`` that no item of the
conversation ever had is refused (``session.input.invalid``, 400).

Bounded work: one script call reads at most ``SCAN_BUDGET`` positions. A page
whose window holds few holes (the usual case) is one call whatever the
conversation's length: one HGET for the cursor, one HMGET of ``limit + 1``
positions. Past a run of more than ``SCAN_BUDGET`` deleted items, the store
calls again from where the last call stopped (one round trip per
``SCAN_BUDGET`` holes); those calls see the conversation at slightly different
moments, so an item deleted meanwhile may still be on the page.
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


def scan(hmget: Callable[[list[str]], list[Optional[bytes]]], pos: int, last: int, step: int, want: int,
         budget: int) -> Slice:
    """The loop of ``lua/conv_list.lua``, line for line (``last`` is the inclusive end)."""
    out: list[bytes] = []
    got = used = chunk = 0
    while got < want and used < budget and (last - pos) * step >= 0:
        chunk = max(want - got, chunk * 2)
        take = min(chunk, budget - used, (last - pos) * step + 1)
        vals = hmget([f"i:{pos + j * step}" for j in range(take)])
        for j, val in enumerate(vals, 1):
            if val is not None:
                out.append(val)
                got += 1
                if got == want:
                    take = j
                    break
        used += take
        pos += take * step
    return Slice(out, pos if (last - pos) * step >= 0 else None)


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
