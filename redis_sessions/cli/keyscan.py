"""Finding a prefix's keys on a standalone server or on every primary of a cluster.

Keys are recognised by the templates :class:`~redis_sessions.keys.KeySpace`
builds, never by a hand-written copy of the layout; a key that merely starts
with ``<prefix>:`` but is not one of those (another prefix such as
``<prefix>:x``, or someone else's key) is reported as ``other`` and never
deleted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Sequence

from redis.asyncio.cluster import RedisCluster

from ..keys import KeySpace
from ..redis_client import AnyRedis, as_text, translate_errors

SCAN_COUNT = 500
BATCH = 500
_MARK = "\x00"
_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")


def _template(built: str) -> re.Pattern[str]:
    before, after = built.split(_MARK)
    return re.compile(re.escape(before) + r"([^{}]+)" + re.escape(after), re.S)


@dataclass(frozen=True)
class KeyKinds:
    """What each key of a prefix is: ``thread``, ``items``, ``meta``, ``locator`` or ``other``.

    ``meta`` is the metadata hash of the old two-key item-session layout: no
    longer written or read, still recognised so that ``purge`` deletes it."""

    keys: KeySpace
    patterns: tuple[tuple[str, re.Pattern[str]], ...] = field(init=False)

    def __post_init__(self) -> None:
        ks = self.keys
        patterns = (
            ("items", _template(ks.session_items(_MARK))),
            ("meta", _template(ks.session_meta(_MARK))),
            ("thread", _template(ks.thread(_MARK))),
            ("locator", _template(ks.locator(_MARK))),
        )
        object.__setattr__(self, "patterns", patterns)

    @property
    def match(self) -> str:
        """The SCAN MATCH pattern: the prefix (glob characters escaped) and ``:*``."""
        return _GLOB_SPECIAL.sub(r"\\\1", self.keys.prefix) + ":*"

    def classify(self, key: str) -> tuple[str, str]:
        """(kind, id): the thread tag, session id or response id the key belongs to."""
        for kind, pattern in self.patterns:
            found = pattern.fullmatch(key)
            if found:
                return kind, found.group(1)
        return "other", ""


def is_cluster(client: AnyRedis) -> bool:
    return isinstance(client, RedisCluster)


async def primaries(client: AnyRedis) -> list[Any]:
    """The nodes to scan: every primary of a cluster, or ``[None]`` for one server."""
    if isinstance(client, RedisCluster):
        async with translate_errors("cluster"):
            await client.initialize()
        return list(client.get_primaries())
    return [None]


async def scan(client: AnyRedis, match: str, node: Any) -> AsyncIterator[list[str]]:
    """Batches of keys matching ``match`` on one node (SCAN ... COUNT 500)."""
    cursor = 0
    where = f"SCAN on {getattr(node, 'name', 'the server')}"
    while True:
        async with translate_errors(where):
            if node is None:
                cursor, keys = await client.scan(cursor=cursor, match=match, count=SCAN_COUNT)
            else:
                # A cluster client answers {node name: cursor} for the nodes it asked.
                cursors: Any
                cursors, keys = await client.scan(cursor=cursor, match=match, count=SCAN_COUNT, target_nodes=node)
                cursor = next(iter(cursors.values()))
        yield [as_text(k) for k in keys]
        if int(cursor) == 0:
            return


async def dbsize(client: AnyRedis, node: Any) -> int:
    async with translate_errors("DBSIZE"):
        if node is None:
            return int(await client.dbsize())
        return int(await client.dbsize(target_nodes=node))


async def scan_all(
    client: AnyRedis, kinds: KeyKinds, on_batch: Callable[[int, int, int], None] | None = None
) -> list[tuple[str, str, str]]:
    """Every key of the prefix as (key, kind, id); ``on_batch(node_index, nodes, found)`` reports progress."""
    found: list[tuple[str, str, str]] = []
    nodes = await primaries(client)
    for index, node in enumerate(nodes):
        async for batch in scan(client, kinds.match, node):
            found.extend((key, *kinds.classify(key)) for key in batch)
            if on_batch:
                on_batch(index, len(nodes), len(found))
    return found


async def pipelined(
    client: AnyRedis,
    keys: Sequence[str],
    queue: Callable[[Any, str], None],
    per_key: int,
    on_done: Callable[[int], None] | None = None,
    where: str = "pipeline",
) -> list[list[Any]]:
    """Run ``queue(pipe, key)`` for every key in pipelines of ``BATCH`` keys; one result list per key.

    A cluster pipeline splits itself by node; nothing here sends a multi-key
    command, so keys in different slots are fine.
    """
    results: list[list[Any]] = []
    for start in range(0, len(keys), BATCH):
        chunk = keys[start : start + BATCH]
        pipe = client.pipeline(transaction=False)
        for key in chunk:
            queue(pipe, key)
        async with translate_errors(where):
            replies = await pipe.execute(raise_on_error=False)
        for i in range(len(chunk)):
            results.append(list(replies[i * per_key : (i + 1) * per_key]))
        if on_done:
            on_done(len(chunk))
    return results

