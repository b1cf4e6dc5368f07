"""Read-only commands: ``show``, ``chain``, ``items`` and ``stats``.

Records are read through the stores' public API (``get``, ``resolve_chain``,
``get_items``); the commands only add what a person asks about a key: its TTL,
its size, and counts over a whole prefix.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from typing import Any

from ..codec import to_builtins
from ..errors import ErrorCode, SessionError
from ..keys import KeySpace
from ..models import StoredResponseSession
from ..redis_client import close_client, translate_errors
from ..scripts import script
from . import output
from .common import Target, require_items, thread_key
from .keyscan import KeyKinds, dbsize, pipelined, primaries, scan_all

TTL_BUCKETS: tuple[tuple[str, float], ...] = (
    ("<1h", 3600), ("<1d", 86400), ("<7d", 7 * 86400), ("<30d", 30 * 86400), (">=30d", float("inf")),
)


def ttl_bucket(pttl_ms: int) -> str:
    if pttl_ms < 0:
        return "none"
    for name, limit in TTL_BUCKETS:
        if pttl_ms / 1000 < limit:
            return name
    raise AssertionError("unreachable")


def _not_found(response_id: str) -> SessionError:
    return SessionError(ErrorCode.CHAIN_NOT_FOUND, f"response {response_id!r} was not found")


# -- show ------------------------------------------------------------------
async def show(target: Target, response_id: str) -> int:
    store = target.store()
    try:
        session = await store.get(response_id)
        key = await thread_key(store, response_id)
        if session is None or key is None:
            raise _not_found(response_id)
        pipe = store.client.pipeline(transaction=False)
        pipe.pttl(key)
        pipe.hstrlen(key, KeySpace.data_field(response_id))
        async with translate_errors(f"thread {key!r}"):
            pttl, nbytes = await pipe.execute()
    finally:
        await store.close()
    record = to_builtins(session)
    ttl_ms = int(pttl) if int(pttl) >= 0 else None
    if target.json:
        output.print_json({"id": response_id, "key": key, "ttl_ms": ttl_ms, "size_bytes": int(nbytes), "record": record})
        return 0
    output.pairs([
        ("id", response_id),
        ("key", key),
        ("parent", session.previous_response_id or "(root)"),
        ("status", session.status),
        ("created_at", output.timestamp(session.created_at)),
        ("ttl", output.duration(ttl_ms) if ttl_ms is not None else "none (never expires)"),
        ("size", f"{int(nbytes)} bytes (msgpack record)"),
    ])
    print()
    print(output.dumps(record))
    return 0


# -- chain -----------------------------------------------------------------
def _turn_row(index: int, s: StoredResponseSession) -> list[Any]:
    out = s.response.output_text or output.preview(s.response.output)
    return [index, s.id, s.status, output.timestamp(s.created_at),
            output.preview(s.request.input, 32), output.preview(out, 32)]


async def chain(target: Target, response_id: str, max_depth: int | None, include_incomplete: bool) -> int:
    store = target.store()
    try:
        snap = await store.resolve_chain(response_id, max_depth=max_depth, include_incomplete=include_incomplete)
    finally:
        await store.close()
    if target.json:
        output.print_json({
            "previous_response_id": snap.previous_response_id,
            "input_items": snap.input_items,
            "sessions": to_builtins(snap.sessions),
        })
        return 0
    headers = ["#", "id", "status", "created_at", "input", "output"]
    output.table(headers, [_turn_row(i + 1, s) for i, s in enumerate(snap.sessions)])
    print(f"\n{len(snap.sessions)} turns, {len(snap.input_items)} input items for the next request")
    return 0


# -- items -----------------------------------------------------------------
async def items(target: Target, session_id: str, limit: int | None) -> int:
    module = require_items()
    client = target.client()
    try:
        session = module.RedisSession(session_id, client=client, key_prefix=target.prefix)
        found: list[dict[str, Any]] = await session.get_items(limit=limit)
        await session.close()
    finally:
        await close_client(client)
    if target.json:
        output.print_json(found)
        return 0
    if not found:
        print(f"item session {session_id!r} has no items (empty, expired or never created)")
        return 0
    rows = [[i + 1, item.get("type", "-"), item.get("role", "-"), output.preview(item, 70)] for i, item in enumerate(found)]
    output.table(["#", "type", "role", "content"], rows)
    return 0


# -- stats -----------------------------------------------------------------
def _second_command(kind: str) -> str:
    return {"thread": "hlen", "meta": "hlen", "locator": "strlen"}.get(kind, "type")


def _count_items(pipe: Any, key: str) -> None:
    """An item session's entries below its header (lua/items_count.lua), sent as EVAL
    (a few hundred bytes) so a pipeline never meets NOSCRIPT."""
    pipe.execute_command("EVAL", script("items_count").source, 1, key)


async def stats(target: Target, sample: int) -> int:
    client = target.client()
    kinds = KeyKinds(target.keys)
    show_progress = not target.json
    try:
        nodes = await primaries(client)
        total_keys = sum([await dbsize(client, n) for n in nodes])
        with output.Progress("scanning", enabled=show_progress) as bar:
            found = await scan_all(client, kinds, lambda i, n, f: bar.update(f, f"node {i + 1}/{n}"))
        kind_of = {key: kind for key, kind, _ in found}
        keys = list(kind_of)

        def queue(pipe: Any, key: str) -> None:
            pipe.pttl(key)
            if kind_of[key] == "items":
                _count_items(pipe, key)
            else:
                getattr(pipe, _second_command(kind_of[key]))(key)

        with output.Progress("reading", len(keys), enabled=show_progress) as bar:
            facts = await pipelined(client, keys, queue, 2, bar.advance, "stats")
        sampled = random.Random(0).sample(keys, min(sample, len(keys))) if sample > 0 else []
        with output.Progress("sizing", len(sampled), enabled=show_progress) as bar:
            usage = await pipelined(client, sampled, lambda p, k: p.memory_usage(k), 1, bar.advance, "MEMORY USAGE")
    finally:
        await close_client(client)
    report = _summarise(target, found, facts, dict(zip(sampled, (u[0] for u in usage))), len(nodes), total_keys)
    if target.json:
        output.print_json(report)
    else:
        _print_stats(report)
    return 0


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def _summarise(target: Target, found: list[tuple[str, str, str]], facts: list[list[Any]],
               usage: dict[str, Any], nodes: int, total_keys: int) -> dict[str, Any]:
    count: Counter[str] = Counter()
    ttl: dict[str, Counter[str]] = defaultdict(Counter)
    sessions: set[str] = set()
    responses = items = no_ttl_responses = 0
    no_ttl_sessions: set[str] = set()
    for (key, kind, ident), (pttl, second) in zip(found, facts):
        pttl = _int(pttl) if not isinstance(pttl, Exception) else -2
        if pttl == -2:
            continue  # expired or deleted since the scan
        count[kind] += 1
        if kind == "thread":
            n = _int(second) // 2
            responses += n
            ttl["threads"][ttl_bucket(pttl)] += 1
            no_ttl_responses += n if pttl == -1 else 0
        elif kind == "items":  # one key per session; a "meta" key is a leftover of the old layout
            items += _int(second)
            sessions.add(ident)
            ttl["item_sessions"][ttl_bucket(pttl)] += 1
            if pttl == -1:
                no_ttl_sessions.add(ident)
        elif kind == "locator":
            ttl["locators"][ttl_bucket(pttl)] += 1
    buckets = ["none"] + [name for name, _ in TTL_BUCKETS]
    return {
        "url": target.url,
        "prefix": target.prefix,
        "nodes_scanned": nodes,
        "keys_in_database": total_keys,
        "keys": sum(count.values()),
        "threads": count["thread"],
        "responses": responses,
        "responses_method": "HLEN/2 per thread: exact while every response has its d: and p: field, as saves write them",
        "item_sessions": len(sessions),
        "items": items,
        "locators": count["locator"],
        "other_keys": count["other"],
        "memory": _memory(found, usage),
        "ttl": {group: {b: ttl[group][b] for b in buckets} for group in ("threads", "item_sessions", "locators")},
        "no_ttl": {"responses": no_ttl_responses, "item_sessions": len(no_ttl_sessions)},
    }


def _memory(found: list[tuple[str, str, str]], usage: dict[str, Any]) -> dict[str, Any]:
    """Average MEMORY USAGE per kind over the sample, times each kind's key count: an estimate."""
    per_kind: dict[str, list[int]] = defaultdict(list)
    kinds = {key: kind for key, kind, _ in found}
    for key, value in usage.items():
        if isinstance(value, int):
            per_kind[kinds[key]].append(value)
    measured = [v for values in per_kind.values() for v in values]
    if not measured:
        return {"estimated_bytes": None, "sampled_keys": 0, "method": "MEMORY USAGE unavailable or no keys"}
    overall = sum(measured) / len(measured)
    counts = Counter(kinds.values())
    estimate = sum(n * (sum(per_kind[k]) / len(per_kind[k]) if per_kind[k] else overall) for k, n in counts.items())
    return {
        "estimated_bytes": int(estimate),
        "sampled_keys": len(measured),
        "method": f"estimate: MEMORY USAGE of {len(measured)} sampled keys, averaged per kind, times each kind's count",
    }


def _print_stats(r: dict[str, Any]) -> None:
    mem = r["memory"]
    mem_text = "unavailable" if mem["estimated_bytes"] is None else (
        f"~{output.size(mem['estimated_bytes'])} (estimate from {mem['sampled_keys']} sampled keys)")
    output.pairs([
        ("prefix", f"{r['prefix']}  ({r['url']}, {r['nodes_scanned']} node(s) scanned)"),
        ("keys", f"{r['keys']} of this prefix ({r['keys_in_database']} in the database)"),
        ("responses", f"{r['responses']} in {r['threads']} threads (HLEN/2 per thread)"),
        ("item sessions", f"{r['item_sessions']} holding {r['items']} items"),
        ("locators", r["locators"]),
        ("other keys", f"{r['other_keys']} (match '{r['prefix']}:*' but are not keys of this prefix)"),
        ("memory", mem_text),
        ("no TTL", f"{r['no_ttl']['responses']} responses, {r['no_ttl']['item_sessions']} item sessions"),
    ])
    print()
    buckets = list(r["ttl"]["threads"])
    rows = [[group] + [r["ttl"][group][b] for b in buckets] for group in r["ttl"]]
    output.table(["TTL left"] + buckets, rows)
