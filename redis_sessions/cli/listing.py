"""``list``: the ids a prefix holds, a page at a time, never all of them at once.

A page is SCAN batches (and, for responses, each thread's HSCAN pages) until it
holds ``--limit`` ids; it ends at a batch boundary, so the cursor it prints
(``<node>:<SCAN cursor>``, the node a primary's place by name) continues with
nothing skipped, and SCAN's own promise holds: a key there the whole time is
listed at least once. Only live things are listed (:func:`.keyscan.live_count`).
"""

from __future__ import annotations

from ..errors import ErrorCode, SessionError
from ..keys import KeySpace
from ..redis_client import AnyRedis, as_text, close_client, translate_errors
from . import output
from .common import Target
from .keyscan import _MARK, Failures, Key, KeyKinds, LIVE_REPLIES, live_count, pipelined, primaries, queue_live, \
    scan_match, scan_step

KINDS = ("threads", "responses", "sessions", "conversations")
_KEY_KIND = {"threads": "thread", "responses": "thread", "sessions": "items", "conversations": "conversation"}


def _pattern(keys: KeySpace, kind: str, match: str) -> str:
    built = {"thread": keys.thread, "items": keys.session_items, "conversation": keys.conversation}[_KEY_KIND[kind]]
    return scan_match(built(_MARK), "" if kind == "responses" else match)


def _parse_cursor(cursor: str | None, nodes: int) -> tuple[int, int]:
    if cursor is None:
        return 0, 0
    node, _, scan = cursor.partition(":")
    if not (node.isdigit() and scan.isdigit() and int(node) < nodes):
        raise SessionError(ErrorCode.INPUT_INVALID, f"--cursor {cursor!r} is not a cursor that list printed")
    return int(node), int(scan)


async def list_ids(target: Target, kind: str, match: str, limit: int, cursor: str | None) -> int:
    kinds = KeyKinds(target.keys)
    pattern = _pattern(target.keys, kind, match)
    failures = Failures()
    found: list[str] = []
    client = target.client()
    try:
        nodes = await primaries(client)
        node, scan = _parse_cursor(cursor, len(nodes))
        while node < len(nodes) and len(found) < limit:
            scan, names = await scan_step(client, pattern, nodes[node], scan, count=max(limit, 10))
            keys = [k for k in map(kinds.classify, names) if k.kind == _KEY_KIND[kind]]
            live = await _live(client, keys, failures)
            if kind == "responses":
                for key in live:
                    found += await _responses(client, key.name, match)
            else:
                found += [key.ident for key in live]
            if scan == 0:
                node += 1
    finally:
        await close_client(client)
    more = f"{node}:{scan}" if node < len(nodes) else None
    if target.json:
        output.print_json({"kind": kind, "prefix": target.prefix, "ids": found, "cursor": more})
    else:
        for ident in found:
            print(ident)
        what = {"sessions": "item session", "threads": "thread", "responses": "response",
                "conversations": "conversation"}[kind]
        tail = f"; more with --cursor {more}" if more else ""
        output.note(f"{output.plural(len(found), what)} of prefix {target.prefix!r}{tail}")
    failures.raise_if_any("list")
    return 0


async def _live(client: AnyRedis, keys: list[Key], failures: Failures) -> list[Key]:
    replies = await pipelined(client, keys, queue_live, lambda k: LIVE_REPLIES[k.kind], None, "list")
    return [key for key, reply in zip(keys, replies)
            if all(failures.check(key.name, v, "list") for v in reply) and live_count(key, reply) > 0]


async def _responses(client: AnyRedis, thread: str, match: str) -> list[str]:
    """The response ids of one thread (its ``d:<id>`` fields), read in HSCAN pages."""
    field = KeySpace.data_field("")
    ids: list[str] = []
    cursor = 0
    while True:
        async with translate_errors(f"HSCAN {thread!r}"):
            cursor, page = await client.hscan(thread, cursor, match=scan_match(field + _MARK, match), count=500)
        ids += [as_text(name)[len(field):] for name in page]
        if int(cursor) == 0:
            return ids
