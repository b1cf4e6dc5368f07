"""Names lists: a deep record's ancestors in one field, so that a reader needs no walk.

A record whose chain is at least NAMES_MIN deep, or whose records would not come back
inside the walk's reply (the chain counted at its largest record passes the walk's
inline budget: a reader needs a second round trip anyway, and the list costs such
records less than 1% more memory), keeps, in ``n:<id>``, the ids of its ancestors,
parent first, down to the root, each packed to the 16 bytes of its random part (ids
minted for the thread, ``resp_<thread>_<32 hex>``, differ only there). The Redis walk
(lua/chain_walk.lua) answers a start that keeps one with the list itself, and the reader
reads the records with HMGET: for 64 records of 0.7 KB the walk's 64 pointer reads were
most of a resolve's Redis time. A list is a hint the reader checks, as a jump list is:
every record names its parent, a chain that does not link up is walked again by its
pointers.

Kept without a walk on the server: a worker's save under the chain it has just resolved
(what a gateway does every turn) hands the save the names it read (the store's memo); a
save under a record that keeps a list carries that one on. Either way the parent's list
is dropped, so a branch keeps one list, at its tip: 16 bytes per record of the chain.

Read without a walk where the id says so: the store mints the id of a response saved
under a chain it has just resolved with :func:`..ids.mint_named_id`, and a resolve of
such an id (:func:`..ids.marks_names`) reads ``m``, ``w`` and the list with a plain HMGET
(redis_engine.py), the walk following only where no list is there.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from .protocol import INLINE_BYTES

NAMES_MIN = 13
"""Chains at least this deep (the record and its ancestors) keep a list whatever their
records' size; shallower ones only where their records pass the inline budget (13 of
0.65 KB do), so conversations of a few small turns cost no memory more."""
MEMO_ENTRIES = 1024
"""Chains a store remembers having resolved, for the saves that follow them: a worker's
requests in flight at once, and more. One forgotten before its save costs that save
its list where the parent keeps none (the first list of a chain), and a resolve of the
id it marked one wasted HMGET: so room for a busy worker's streams, bounded by bytes too."""
MEMO_BYTES = 4 << 20
"""And at most this many bytes of names (a chain of 1,000 is 16 KB)."""
NAME_BYTES = 16
"""One name packed: the 16 bytes of an id's random part."""
NAMES_MAX = 4096
"""Names one list holds at most (64 KiB; lua/chain_lib.lua's NAMES_MAX): a record deeper
than that keeps none, and its chain is read by the walk, 256 reads a call. Every save
under a tip copies its list, so the bound is what one save copies."""
_PREFIX_LEN = len("resp_") + 16 + 1
_ID_LEN = _PREFIX_LEN + 32


def pack(ids: "list[str] | tuple[str, ...]", thread: str) -> bytes | None:
    """``ids`` packed, 16 bytes each, or None if one of them was not minted for ``thread``."""
    prefix = f"resp_{thread}_"
    for rid in ids:
        if len(rid) != _ID_LEN or not rid.startswith(prefix):
            return None
    hexed = "".join([rid[_PREFIX_LEN:] for rid in ids])
    try:
        packed = bytes.fromhex(hexed)
    except ValueError:
        return None
    return packed if packed.hex() == hexed else None  # lower-case hex only, as minted


def count(packed: bytes) -> int:
    """How many names a packed list holds."""
    return len(packed) // NAME_BYTES


def unpack(raw: bytes, thread: str) -> list[str] | None:
    """The ids a packed list names, in its order (None: not a list of whole names)."""
    if len(raw) % NAME_BYTES:
        return None
    hexed = raw.hex()
    prefix = f"resp_{thread}_"
    return [prefix + hexed[at:at + 32] for at in range(0, len(hexed), 32)]


class Memo:
    """The chains this store resolved or saved last, by their newest id: the packed names
    of each one's ancestors and the largest of its records. Two uses:

    - a save under that id sends the names (lua/chain_save.lua's ARGV[13]) where the chain
      it makes keeps a list (:meth:`above`: NAMES_MIN deep, or records that will not come
      back inline), and mints its id marked where that chain is read by its list
      (:meth:`marks`, ids.mint_named_id);
    - a resolve of that id reads its records by the names, in one call that reads no
      pointer (:meth:`known`, lua/chain_known.lua), where they come back inline: what a
      worker does when it continues a conversation it served last. The reader checks that
      the records link up, and walks where they do not (:meth:`forget`).

    Bounded by MEMO_ENTRIES and MEMO_BYTES, the oldest forgotten first."""

    def __init__(self, entries: int = MEMO_ENTRIES, size: int = MEMO_BYTES, inline: int = INLINE_BYTES) -> None:
        self.entries, self.size, self.held, self.inline = entries, size, 0, inline
        self._chains: OrderedDict[str, tuple[bytes, int, bool]] = OrderedDict()

    def remember(self, start: str, ancestors: bytes, largest: int, readable: bool = True) -> None:
        """``start``'s chain: its ancestors packed, its largest record's bytes, and whether
        a read by the names may return it (False: the engine read it apart from its walk,
        so the thread holds a record larger than the inline budget allows for it)."""
        chains = self._chains
        self.held += len(ancestors) - len(chains.pop(start, (b"", 0, False))[0])
        chains[start] = (ancestors, largest, readable)
        while len(chains) > self.entries or self.held > self.size:
            self.held -= len(chains.popitem(last=False)[1][0])

    def saved(self, parent: str, child: str, own: bytes, size: int) -> None:
        """``child`` (a record of ``size`` bytes) was saved under ``parent``, packed ``own``:
        its chain is the parent's, one deeper, if this memo holds the parent's."""
        got = self._chains.get(parent)
        if got is not None:
            self.remember(child, own + got[0], max(got[1], size), got[2])

    def forget(self, start: str) -> None:
        got = self._chains.pop(start, None)
        if got is not None:
            self.held -= len(got[0])

    def outgrown(self, start: str, largest: int) -> None:
        """A read by the names was refused: the thread holds a record of ``largest`` bytes
        (-1: its size is not told), too large for the chain to come back inline."""
        got = self._chains.get(start)
        if got is not None:
            self._chains[start] = (got[0], max(got[1], largest), False)

    def _fits(self, records: int, largest: int) -> bool:
        return records * largest <= self.inline

    def above(self, parent: str) -> bytes:
        """The names a save under ``parent`` sends: the ancestors, where the chain the save
        makes keeps a list; else b""."""
        got = self._chains.get(parent)
        if got is None:
            return b""
        deep = count(got[0]) + 2
        return got[0] if deep >= NAMES_MIN or not self._fits(deep, got[1]) else b""

    def marks(self, parent: str) -> bool:
        """Whether a response saved under ``parent`` is minted marked."""
        got = self._chains.get(parent)
        return got is not None and not self._fits(count(got[0]) + 2, got[1])

    def known(self, start: str) -> bytes | None:
        """``start``'s ancestors, where a read by the names may return its chain inline."""
        got = self._chains.get(start)
        if got is None or not got[2] or not self._fits(count(got[0]) + 1, got[1]):
            return None
        self._chains.move_to_end(start)
        return got[0]


class SharedMemo(Memo):
    """A :class:`Memo` that many threads use at once: a sync store shared by a threaded
    server. Reads of one entry are one dict lookup; what changes the order or the sums
    (and could meet another thread's change half-way) holds a lock. The asyncio store
    needs none: its coroutines never run at once."""

    def __init__(self, entries: int = MEMO_ENTRIES, size: int = MEMO_BYTES, inline: int = INLINE_BYTES) -> None:
        super().__init__(entries, size, inline)
        self._lock = threading.Lock()

    def remember(self, start: str, ancestors: bytes, largest: int, readable: bool = True) -> None:
        with self._lock:
            super().remember(start, ancestors, largest, readable)

    def forget(self, start: str) -> None:
        with self._lock:
            super().forget(start)

    def outgrown(self, start: str, largest: int) -> None:
        with self._lock:
            super().outgrown(start, largest)

    def known(self, start: str) -> bytes | None:
        with self._lock:
            return super().known(start)
