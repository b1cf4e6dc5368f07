"""Where every Redis key is built. The key layout, in one place.

With the default prefix ``rs``::

    rs:{<thread>}:chain         hash   one conversation thread (a tree of responses)
                                       d:<response id> -> msgspec msgpack of StoredResponseSession
                                              (compact_records: 0xc1, flags, and the record
                                              without the ids its reader knows; codec.py)
                                       p:<response id> -> parent id ("" for a root)
                                       j:<response id> -> a record of 4 KB or more: its
                                              nearest ancestors' ids, one per KB of it, 16 at
                                              most, a hint the walk follows (responses/jumps.py)
                                       n:<response id> -> the tip of a chain 13 or more deep,
                                              or of records past the inline budget: its
                                              ancestors' ids, 16 bytes each, a hint the
                                              reader checks (responses/names.py)
                                       ops -> the tokens of the thread's recent writes, each with
                                              what it did (S saved, D deleted, N found nothing):
                                              30 s of them within 1 KiB (lua/tokens.lua, shared by
                                              every store); a re-sent script finds its token there.
                                              Once the last record is deleted, the hash keeps only
                                              this field, for 30 s
                                       w -> when the thread was last written, server time in ms,
                                            where it is recorded: purge --idle-older-than deletes
                                            a thread only if its w is older than the window
                                       per-response expiry's books (lua/chain_lib.lua,
                                       responses/books.py): e:<id> a leaf's deadline (ms),
                                       k:<id> a children count of 2 or more, s:<id> the
                                       deadline a sliding read gave a record with children,
                                       L the leaves by deadline (256 and 16 KB at most), o:<id>
                                       a leaf L had no room for, queued (its deadline then,
                                       and the next leaf's id), O the queue's first and last
                                       ids, c the record count, r the
                                       field count the books last left (a thread whose
                                       count differs was written past them: no more trims)
                                       l:<id> -> a record with ancestors minted elsewhere:
                                              their locators last at least until then (ms;
                                              lua/chain_lib.lua renews them as saves go on)
    rs:{l:<response id>}:loc    string thread tag of a response whose id was minted
                                       elsewhere (ids minted here carry it); renewed for
                                       two TTLs while a record below it is saved, so it
                                       lives as long as its record
    rs:{s:<session id>}:items   list   an item session, whole: index 0 is its header, then its
                                       items, msgpack, oldest first. The header
                                       (redis_sessions/items/header.py): v version, e epoch,
                                       g rewrites, forked_from, forked_at; the tokens of its recent
                                       writes with what each replied (lua/tokens.lua: 30 s within
                                       1 KiB; a random token, or an idempotency key hashed with its
                                       body's fingerprint). After a pop, index 1 holds the stash of
                                       the entries the last 2 pops removed (64 KiB together, the
                                       newest always). A session emptied by pops or a compaction
                                       keeps only its header, for its TTL (30 s without one); a
                                       cleared one, 30 s at most
    rs:{c:<conversation id>}:conv  hash  a Conversations API conversation, whole (redis_sessions/conversations)
    rs:{s:<session id>}:meta    hash   the old layout's separate metadata: no longer written or
                                       read (a list without a header at index 0 is read as items
                                       only, and gets a header on its next write); purge deletes it

Why a thread is one hash: a response and all its ancestors live under one key,
so the save script (parent check + write) and the chain walk touch a single key
in a single hash slot, which is what makes both atomic on Redis Cluster; the
key's TTL covers the whole thread, and inside it a response is removed only as a
leaf past its own deadline, so no ancestor goes before a descendant.
Why an item session is one list, header included: items and metadata in two
keys came apart under ``allkeys-lru`` (the list evicted, the hash kept), a
purge or a slot migration (a two-key script gets ``TRYAGAIN`` while the slot
moves; a one-key script follows ``ASK``). One key expires, is evicted, purged
and migrated whole, and its one TTL covers everything.

Every key is ``<prefix>:{<tag>}:<kind>``. The braces are Redis Cluster hash
tags; ids and prefixes may not contain braces (:mod:`redis_sessions.ids`), so a
caller can never move a key to another slot, and the prefix of any key is
everything before its first ``:{``. Prefixes may contain colons (the Agents
SDK's default is ``agents:session``), yet no prefix's key can look like another
prefix's: ``a:{...}`` and ``a:b:{...}`` differ before the first brace. The
tag says which kind of id it holds (a thread tag is 16 hex digits, ``s:`` an
item session, ``l:`` a locator) and the suffix says the kind again.

**Layout change (locators).** Locators used to be ``<prefix>:loc:<id>``, the one
key without braces: prefix ``t:loc``'s locator of ``x`` and prefix ``t``'s
locator of ``loc:x`` were the same key, so a store or ``purge`` of one prefix
could read or delete another's. Locators are now ``<prefix>:{l:<id>}:loc``
(one hash tag per id: a locator is a key of its own anyway, never in a script
with its thread). Locators written before stay readable until they expire: a
lookup that misses the new key also finds the old one (only ids minted
elsewhere have locators: on a standalone server both GETs go in one request, on
a cluster, where they are two slots, the old key is read only on a miss), where
the old key can only be this prefix's (:meth:`KeySpace.legacy_locator`); a
delete, and the refresh of a parent's locator, cover both.
The CLI deletes an old locator only where it proves it is this prefix's (its
thread exists here and holds its id); the others expire with their TTL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from .ids import validate_id

DEFAULT_PREFIX = "rs"


@dataclass(frozen=True)
class KeySpace:
    prefix: str = DEFAULT_PREFIX

    def __post_init__(self) -> None:
        validate_id(self.prefix, "key prefix")

    # -- response chains ---------------------------------------------------
    def thread(self, thread_tag: str) -> str:
        return f"{self.prefix}:{{{thread_tag}}}:chain"

    def locator(self, response_id: str) -> str:
        return f"{self.prefix}:{{l:{response_id}}}:loc"

    def legacy_locator(self, response_id: str) -> str | None:
        """The locator key of the old layout, ``<prefix>:loc:<id>``, if only this prefix can
        have written it; None when the same key is also another prefix's old locator
        (the prefix contains ``:loc:`` or ends in ``:loc``, or the id starts with
        ``loc:`` or contains ``:loc:``). Such keys are never read or deleted."""
        key = f"{self.prefix}:loc:{response_id}"
        return key if legacy_locator_owner(key) == (self.prefix, response_id) else None

    @staticmethod
    def data_field(response_id: str) -> str:
        return f"d:{response_id}"

    @staticmethod
    def parent_field(response_id: str) -> str:
        return f"p:{response_id}"

    @staticmethod
    def names_field(response_id: str) -> str:
        """The names list of a chain's tip (redis_sessions/responses/names.py)."""
        return f"n:{response_id}"

    OPS_FIELD: ClassVar[str] = "ops"
    """The thread's operation ring: no colon, so never a d: or p: field."""

    LAST_WRITE_FIELD: ClassVar[str] = "w"
    """When a thread was last written (server time, ms), if it records it: what
    ``purge --idle-older-than`` judges a thread by (lua/purge_if_idle.lua)."""

    LARGEST_FIELD: ClassVar[str] = "m"
    """``<bytes> <stamp>``: the largest record a thread has held, while ``w`` is still
    the stamp it names (lua/chain_lib.lua): what a resolve sizes its reads by."""

    # -- item sessions -----------------------------------------------------
    def session_items(self, session_id: str) -> str:
        return f"{self.prefix}:{{s:{session_id}}}:items"

    def session_meta(self, session_id: str) -> str:
        """The old layout's metadata hash: recognised (and purged) by the CLI, never used."""
        return f"{self.prefix}:{{s:{session_id}}}:meta"

    # -- conversations (Conversations API) ----------------------------------
    def conversation(self, conversation_id: str) -> str:
        return f"{self.prefix}:{{c:{conversation_id}}}:conv"

    # -- scanning (CLI) ----------------------------------------------------
    def scan_pattern(self) -> str:
        """SCAN MATCH for every key of this layout: ``<prefix>:{*``, glob characters of the
        prefix escaped. No other prefix's key starts so (a prefix holds no brace)."""
        return _glob_escape(self.prefix) + ":{*"

    def legacy_scan_pattern(self) -> str:
        """SCAN MATCH for candidates of the old locator layout; see :meth:`legacy_locator`."""
        return _glob_escape(self.prefix) + ":loc:*"


_LOC = ":loc:"
_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")


def _glob_escape(text: str) -> str:
    return _GLOB_SPECIAL.sub(r"\\\1", text)


def legacy_locator_owner(key: str) -> tuple[str, str] | None:
    """(prefix, id) of an old-layout locator key, if the key parses one way only.

    ``<prefix>:loc:<id>`` with no brace anywhere; a key in which ``:loc:`` occurs
    twice (overlaps included) parses as two prefixes' locators and has no owner."""
    if "{" in key or "}" in key:
        return None
    first = key.find(_LOC)
    if first < 1 or key.find(_LOC, first + 1) >= 0 or first + len(_LOC) == len(key):
        return None
    return key[:first], key[first + len(_LOC):]
