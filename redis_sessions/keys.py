"""Where every Redis key is built; ``docs/key-layout.md`` is the data format they hold.

With the default prefix ``rs``::

    rs:{<thread>}:chain            hash    a conversation thread: a tree of responses
    rs:{l:<response id>}:loc       string  the thread of a response whose id was minted elsewhere
    rs:{c:<conversation id>}:conv  hash    a Conversations API conversation
    rs:{c:<conversation id>}:chain hash    the thread of that conversation's responses
    rs:{s:<session id>}:items      list    an item session

Every key is ``<prefix>:{<tag>}:<kind>``. The braces are Redis Cluster hash tags: every
key one script touches shares one tag, so every script runs on a cluster. Ids and
prefixes may not contain braces (:mod:`redis_sessions.ids`), so a caller can never move
a key to another slot, and the prefix of any key is everything before its first ``:{``.
Prefixes may contain colons (the Agents SDK's default is ``agents:session``), yet no
prefix's key can look like another prefix's: ``a:{...}`` and ``a:b:{...}`` differ
before the first brace. That is what lets the command line scan ``<prefix>:{*`` and
touch only keys it can prove are its own.

One key per unit of state that must expire, be evicted, purged and migrated together: a
thread holds a response and all its ancestors, so the save and the walk are one script
on one key; an item session holds its header and its items; a conversation its items.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .ids import validate_id

DEFAULT_PREFIX = "rs"


@dataclass(frozen=True)
class KeySpace:
    prefix: str = DEFAULT_PREFIX

    def __post_init__(self) -> None:
        validate_id(self.prefix, "key prefix")

    def thread(self, thread_tag: str) -> str:
        return f"{self.prefix}:{{{thread_tag}}}:chain"

    def locator(self, response_id: str) -> str:
        return f"{self.prefix}:{{l:{response_id}}}:loc"

    @staticmethod
    def data_field(response_id: str) -> str:
        return f"d:{response_id}"

    def session_items(self, session_id: str) -> str:
        return f"{self.prefix}:{{s:{session_id}}}:items"

    def conversation(self, conversation_id: str) -> str:
        return f"{self.prefix}:{{c:{conversation_id}}}:conv"

    def scan_pattern(self) -> str:
        """SCAN MATCH for every key of this prefix: ``<prefix>:{*``, glob characters of the
        prefix escaped. No other prefix's key starts so (a prefix holds no brace)."""
        return _GLOB_SPECIAL.sub(r"\\\1", self.prefix) + ":{*"


_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")
