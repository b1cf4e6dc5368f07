"""Paging, written once: the scan that ``lua/conv_list.lua`` runs (mirrored here for
the memory backend) and the loop that turns its slices into one API page.

Items have sequence numbers 1, 2, ... in the order they were added; a deleted
item leaves a hole. A page is the next ``limit`` live items from a position,
upwards (``asc``) or downwards (``desc``), plus one more to learn ``has_more``.
``after`` is resolved to the sequence number its item had, which the
conversation keeps after the item is deleted, so a cursor naming a deleted
item pages on from where that item stood; an ``after`` that no item of the
conversation ever had is refused (``session.input.invalid``, 400).

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


def number(value: Optional[bytes]) -> Optional[int]:
    """Lua's tonumber on a field the scripts wrote (decimal), None otherwise."""
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def scan(hmget: Callable[[list[str]], list[Optional[bytes]]], pos: int, last: int, step: int, want: int,
         budget: int) -> Slice:
    """The loop of ``lua/conv_list.lua``, line for line (``last`` is the inclusive end).

    ``edge``: the position before held an item (or ended a run, or is where the
    scan started), so a hole here starts a run, whose ``g:`` field says where
    the run ends: the whole run is skipped at the cost of one HGET."""
    out: list[bytes] = []
    got = used = chunk = 0
    edge = True
    while got < want and used < budget and (last - pos) * step >= 0:
        chunk = max(want - got, chunk * 2)
        take = min(chunk, budget - used, (last - pos) * step + 1)
        vals = hmget([f"i:{pos + j * step}" for j in range(take)])
        used += take
        j, nxt = 1, pos + take * step
        while j <= take:
            p = pos + (j - 1) * step
            val = vals[j - 1]
            if val is not None:
                out.append(val)
                got, edge = got + 1, True
                if got == want:
                    nxt = p + step
                    break
                j += 1
            elif edge:
                edge, used = False, used + 1
                v = number(hmget([f"g:{p}"])[0])
                if v is not None and (v - p) * step >= 0:
                    edge = True
                    if (v - pos) * step + 1 >= take:
                        nxt = v + step
                        break
                    j = (v - pos) * step + 2
                else:
                    j += 1
            else:
                j += 1
        pos = nxt
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
