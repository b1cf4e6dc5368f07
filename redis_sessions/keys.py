"""Where every Redis key is built. The key layout, in one place.

With the default prefix ``rs``::

    rs:{<thread>}:chain         hash   one conversation thread (a tree of responses)
                                       d:<response id> -> msgspec msgpack of StoredResponseSession
                                       p:<response id> -> parent id ("" for a root)
                                       ops -> the ring of the thread's last 16 writes: per write,
                                              its operation token (16 hex) and what it did (S
                                              saved, D deleted, N found nothing), newest first,
                                              at most 272 bytes; a re-sent script finds its token
                                              there (redis_sessions/responses/protocol.py). Once
                                              the last record is deleted, the hash keeps only
                                              this field, for 5 minutes at most
    rs:loc:<response id>        string thread tag of a response whose id was minted
                                       elsewhere (ids minted here carry it)
    rs:{s:<session id>}:items   list   an item session, whole: index 0 is its header, then its
                                       items, msgpack, oldest first. The header
                                       (redis_sessions/items/header.py): v version, e epoch,
                                       g rewrites, forked_from, forked_at; the ring of the last 16
                                       writes' operation tokens (16 hex, or k:<idempotency key>)
                                       with what each replied; the entries the last 2 pops removed
                                       (64 KiB together, the newest always). A session emptied by
                                       pops or a compaction keeps only its header, for its TTL
                                       (10 minutes without one); a cleared one, 10 minutes at most
    rs:{s:<session id>}:meta    hash   the old layout's separate metadata: no longer written or
                                       read (a list without a header at index 0 is read as items
                                       only, and gets a header on its next write); purge deletes it

Why a thread is one hash: a response and all its ancestors live under one key,
so the save script (parent check + write) and the chain walk touch a single key
in a single hash slot, which is what makes both atomic on Redis Cluster, and
the whole chain shares one TTL, so no ancestor can expire before a descendant.
Why an item session is one list, header included: items and metadata in two
keys came apart under ``allkeys-lru`` (the list evicted, the hash kept), a
purge or a slot migration (a two-key script gets ``TRYAGAIN`` while the slot
moves; a one-key script follows ``ASK``). One key expires, is evicted, purged
and migrated whole, and its one TTL covers everything.

The braces are Redis Cluster hash tags; ids may not contain braces
(:mod:`redis_sessions.ids`), so a caller can never move a key to another slot.
"""

from __future__ import annotations

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
        return f"{self.prefix}:loc:{response_id}"

    @staticmethod
    def data_field(response_id: str) -> str:
        return f"d:{response_id}"

    @staticmethod
    def parent_field(response_id: str) -> str:
        return f"p:{response_id}"

    OPS_FIELD: ClassVar[str] = "ops"
    """The thread's operation ring: no colon, so never a d: or p: field."""

    # -- item sessions -----------------------------------------------------
    def session_items(self, session_id: str) -> str:
        return f"{self.prefix}:{{s:{session_id}}}:items"

    def session_meta(self, session_id: str) -> str:
        """The old layout's metadata hash: recognised (and purged) by the CLI, never used."""
        return f"{self.prefix}:{{s:{session_id}}}:meta"

    # -- scanning (CLI) ----------------------------------------------------
    def thread_pattern(self) -> str:
        return f"{self.prefix}:{{*}}:chain"

    def session_pattern(self) -> str:
        return f"{self.prefix}:{{s:*}}:*"
