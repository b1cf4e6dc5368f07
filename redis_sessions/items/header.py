"""The header: entry 0 of a session's list, holding its metadata and its token ring.

A session is ONE Redis list, ``<prefix>:{s:<id>}:items``: the header at index
0, then the encoded items, oldest first. Items and metadata in one key expire,
get evicted, purged and migrated together; a script touches one key only.

The header is bytes that Lua parses with string functions (Redis's Lua has
cmsgpack, fakeredis's has not), and :mod:`lua/items_lib.lua` mirrors this
module line for line::

    \\x00rs1              magic; 0x00 never starts an encoded item (a msgpack map
                         starts with 0x80-0x8f, 0xde or 0xdf), so nothing that
                         reads items can take the header for one, and a reader of
                         the old layout skips it as garbage
    <n>:<v>              version, decimal: bumped by every write
    <n>:<e>              epoch: new when the session is created, cleared or forked onto
    <n>:<g>              rewrite count, decimal: bumped by every write that is not an append
    <n>:<forked_from>    source session id, or empty
    <n>:<forked_at>      source version the fork copied, or empty
    <n>:<tokens>         the token ring, oldest first, each token followed by "\\n"
    <n>:<results>        one <n>:<result> per token, in the same order
    <n>:<...>            later fields, if a later version adds any: kept as they are

Every field is ``<decimal byte count>:<bytes>``, so a value may hold any byte.

The token ring makes every write idempotent. A write carries a token made
client-side (part of the script's ARGV, so redis-py's re-send of a command
whose reply was lost carries the same one); a script that finds its token in
the ring writes nothing and replies what the first run replied. The ring keeps
the newest :data:`RING` tokens. Results are tiny except a pop's, which is the
popped entry: those are kept for the newest :data:`KEEP` tokens whatever their
size, and for older ones while they fit in :data:`ITEM_BYTES` together; past
that, and after a clear, a pop's result is ``x`` (forgotten), and a re-sent
pop that finds it raises ``session.store.conflict`` rather than pop again.

Result kinds: ``a<v>`` add (the version it made), ``i<entry>`` pop of an item,
``n`` pop that found none, ``m`` pop that skipped :data:`SCAN_LIMIT` non-items
and stopped (the caller calls again), ``c`` compaction, ``f`` fork, ``z``
clear, ``x`` a forgotten pop.

Schema evolution: a new field goes at the end with a default; writers keep
fields they do not know; a field never changes meaning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

from ..errors import ErrorCode, SessionError

MAGIC = b"\x00rs1"
RING = 16
"""Tokens remembered per session."""
KEEP = 2
"""The newest tokens whose popped entries are kept whatever their size."""
ITEM_BYTES = 64 << 10
"""Bytes of popped entries kept for older tokens."""
RETAIN_MS = 600_000
"""How long a header-only session (emptied by pops, or cleared) keeps its ring
when the session has no TTL."""
SCAN_LIMIT = 1000
"""Entries one script call reads or drops at most (pop's garbage, get's scan, a read's page)."""


@dataclass
class Header:
    version: int
    epoch: bytes
    rewrites: int
    forked_from: bytes = b""
    forked_at: bytes = b""
    raw_tokens: bytes = b""
    raw_results: bytes = b""
    rest: list[bytes] = field(default_factory=list)
    tokens: list[bytes] = field(default_factory=list)
    results: list[bytes] = field(default_factory=list)
    new: bool = False
    """Not in the list yet: written with LPUSH rather than LSET."""


def is_header(entry: bytes) -> bool:
    return entry[:4] == MAGIC


def fresh(epoch: bytes) -> Header:
    return Header(version=0, epoch=epoch, rewrites=0, new=True)


def _field(s: bytes, p: int) -> tuple[Optional[bytes], int]:
    c = s.find(b":", p)
    if c < 0 or c == p or c - p > 9:
        return None, p
    digits = s[p:c]
    if not digits.isdigit():
        return None, p
    n = int(digits)
    if c + 1 + n > len(s):
        return None, p
    return s[c + 1 : c + 1 + n], c + 1 + n


def _counter(value: bytes) -> bool:
    return value.isdigit() and len(value) <= 15


def parse(s: bytes, where: str) -> Header:
    """The header's fields (its ring still packed); ``session.record.corrupt`` if it does not parse."""
    fields: list[bytes] = []
    p = 4
    if s[:4] == MAGIC:
        while p < len(s):
            value, p = _field(s, p)
            if value is None:
                break
            fields.append(value)
    if p != len(s) or len(fields) < 7 or not _counter(fields[0]) or not fields[1] or not _counter(fields[2]):
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{where}: the session header does not parse")
    return Header(version=int(fields[0]), epoch=fields[1], rewrites=int(fields[2]), forked_from=fields[3],
                  forked_at=fields[4], raw_tokens=fields[5], raw_results=fields[6], rest=fields[7:])


def ring(h: Header, where: str) -> Header:
    """Unpack the token ring (writes need it; reads do not)."""
    results: list[bytes] = []
    p = 0
    while p < len(h.raw_results):
        value, p = _field(h.raw_results, p)
        if value is None:
            break
        results.append(value)
    tokens = h.raw_tokens.split(b"\n")[:-1]
    if p != len(h.raw_results) or (h.raw_tokens and not h.raw_tokens.endswith(b"\n")) or len(tokens) != len(results):
        raise SessionError(ErrorCode.RECORD_CORRUPT, f"{where}: the session header's token ring does not parse")
    h.tokens, h.results = tokens, results
    return h


def find(h: Header, token: bytes) -> Optional[bytes]:
    for i in range(len(h.tokens) - 1, -1, -1):
        if h.tokens[i] == token:
            return h.results[i]
    return None


def remember(h: Header, token: bytes, result: bytes) -> None:
    tokens, results = h.tokens + [token], h.results + [result]
    drop = len(tokens) - RING
    if drop > 0:
        tokens, results = tokens[drop:], results[drop:]
    total = 0
    for i in range(len(results) - 1, -1, -1):
        r = results[i]
        if r[:1] == b"i":
            if len(results) - 1 - i >= KEEP and total + len(r) > ITEM_BYTES:
                results[i] = b"x"
            else:
                total += len(r)
    h.tokens, h.results = tokens, results


def forget_items(h: Header) -> None:
    """A clear keeps the tokens but not the popped entries."""
    h.results = [b"x" if r[:1] == b"i" else r for r in h.results]


def _ns(value: bytes) -> bytes:
    return b"%d:%s" % (len(value), value)


def dump(h: Header) -> bytes:
    out = [MAGIC, _ns(b"%d" % h.version), _ns(h.epoch), _ns(b"%d" % h.rewrites), _ns(h.forked_from), _ns(h.forked_at)]
    out.append(_ns(b"".join(t + b"\n" for t in h.tokens)))
    out.append(_ns(b"".join(_ns(r) for r in h.results)))
    out.extend(_ns(r) for r in h.rest)
    return b"".join(out)


def replay(result: bytes, where: str) -> Union[bytes, None, int]:
    """What the first run of a write replied, from what it remembered."""
    kind = result[:1]
    if kind == b"a":
        return int(result[1:]) if _counter(result[1:]) else 0
    if kind == b"i":
        return result[1:]
    if kind == b"n":
        return None
    if kind == b"x":
        raise SessionError(ErrorCode.STORE_CONFLICT, f"{where}: this pop already ran; its item is no longer remembered")
    return 1
