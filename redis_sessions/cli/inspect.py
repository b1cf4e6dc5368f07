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
from ..ids import validate_id
from ..keys import KeySpace
from ..models import StoredResponseSession
from ..redis_client import as_text, close_client, translate_errors
from ..scripts import script
from . import output
from .common import Target, require_items, thread_key
from .keyscan import Failures, Key, KeyKinds, dbsize, pipelined, primaries, prove_legacy, scan_all

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
    """The session's items as ``get_items`` returns them, plus what it skips: entries
    that do not decode are counted and reported, and a key of another Redis type is
    an error naming the type."""
    module = require_items()
    key = target.keys.session_items(validate_id(session_id, "session id"))
    client = target.client()
    try:
        async with translate_errors(f"item session {key!r}"):
            kind = as_text(await client.type(key))
            pttl = int(await client.pttl(key))
        if kind not in ("list", "none"):
            raise SessionError(ErrorCode.RECORD_CORRUPT, f"{key!r} holds a Redis {kind}, not an item session (a list)")
        session = module.RedisSession(session_id, client=client, key_prefix=target.prefix)
        snap = await session.snapshot()
        await session.close()
    finally:
        await close_client(client)
    found: list[dict[str, Any]] = list(snap.items)
    corrupt = snap.count - len(found)
    shown = found if limit is None else found[-limit:]
    if target.json:
        output.print_json({"session_id": session_id, "key": key, "items": shown, "item_count": len(found),
                           "corrupt_entries": corrupt, "ttl_ms": pttl if pttl >= 0 else None, "exists": kind == "list"})
        return 0
    if shown:
        first = len(found) - len(shown) + 1
        rows = [[first + i, item.get("type", "-"), item.get("role", "-"), output.preview(item, 70)]
                for i, item in enumerate(shown)]
        output.table(["#", "type", "role", "content"], rows)
    elif kind == "none":
        print(f"item session {session_id!r} does not exist (expired, deleted or never created)")
    elif not corrupt:
        print(f"item session {session_id!r} has no items")
    if corrupt and found:
        print(f"\n{corrupt} of {snap.count} stored entries of item session {session_id!r} do not decode "
              "(corrupt): get_items skips them")
    elif corrupt:
        print(f"item session {session_id!r} holds {corrupt} entries and none of them decodes (corrupt): "
              "get_items returns nothing")
    return 0


# -- stats -----------------------------------------------------------------
EXPECTED_TYPE = {"thread": "hash", "meta": "hash", "items": "list", "locator": "string", "legacy_locator": "string",
                 "conversation": "hash"}


def _count_items(pipe: Any, key: str) -> None:
    """An item session's entries below its header (lua/items_count.lua), sent as EVAL
    (a few hundred bytes) so a pipeline never meets NOSCRIPT."""
    pipe.execute_command("EVAL", script("items_count").source, 1, key)


def _queue_facts(pipe: Any, key: Key) -> None:
    """TYPE and PTTL of every key; a thread's field count and whether it has the
    three fields that are not records; an item session's entry count."""
    pipe.type(key.name)
    pipe.pttl(key.name)
    if key.kind == "thread":
        pipe.hlen(key.name)
        pipe.hexists(key.name, KeySpace.OPS_FIELD)
        pipe.hexists(key.name, KeySpace.LAST_WRITE_FIELD)
        pipe.hexists(key.name, KeySpace.LARGEST_FIELD)
        pipe.hmget(key.name, "c", "r")  # per-response expiry's record and field counts (chain_lib.lua)
    elif key.kind == "items":
        _count_items(pipe, key.name)


def _fact_count(key: Key) -> int:
    return {"thread": 7, "items": 3}.get(key.kind, 2)


async def stats(target: Target, sample: int) -> int:
    client = target.client()
    kinds = KeyKinds(target.keys)
    show_progress = not target.json
    failures = Failures()
    try:
        nodes = await primaries(client)
        total_keys = sum([await dbsize(client, n) for n in nodes])
        with output.Progress("scanning", enabled=show_progress) as bar:
            found = await scan_all(client, kinds, lambda i, n, f: bar.update(f, f"node {i + 1}/{n}"))
        legacy = [k for k in found if k.kind == "legacy_locator"]
        proven = {k.name for k, _ in await prove_legacy(client, target.keys, legacy, failures)}
        keys = [k for k in found if k.kind != "legacy_locator" or k.name in proven]
        with output.Progress("reading", len(keys), enabled=show_progress) as bar:
            facts = await pipelined(client, keys, _queue_facts, _fact_count, bar.advance, "stats")
        sampled = random.Random(0).sample(keys, min(sample, len(keys))) if sample > 0 else []
        with output.Progress("sizing", len(sampled), enabled=show_progress) as bar:
            usage = await pipelined(client, sampled, lambda p, k: p.memory_usage(k.name), 1, bar.advance, "MEMORY USAGE")
    finally:
        await close_client(client)
    sizes = {k.name: u[0] for k, u in zip(sampled, usage) if isinstance(u[0], int)}
    report = _summarise(target, keys, facts, sizes, len(nodes), total_keys, len(legacy) - len(proven), failures)
    if target.json:
        output.print_json(report)
    else:
        _print_stats(report)
    failures.raise_if_any("stats")
    return 0


def _number(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def _summarise(target: Target, keys: list[Key], facts: list[list[Any]], usage: dict[str, int], nodes: int,
               total_keys: int, legacy_left: int, failures: Failures) -> dict[str, Any]:
    count: Counter[str] = Counter()
    ttl: dict[str, Counter[str]] = defaultdict(Counter)
    wrong: dict[str, list[str]] = defaultdict(list)
    responses = items = no_ttl_responses = no_ttl_sessions = 0
    measured: list[Key] = []
    for key, (kind, pttl, *counts) in zip(keys, facts):
        if not all(failures.check(key.name, v, "stats") for v in (kind, pttl)):
            continue
        kind, pttl = as_text(kind), _int(pttl)
        if kind == "none":
            continue  # expired or deleted since the scan
        group = "locator" if key.kind == "legacy_locator" else key.kind
        if group != "other" and kind != EXPECTED_TYPE[key.kind]:
            wrong[group].append(f"{key.name} ({kind})")
            continue
        if not all(failures.check(key.name, v, "stats") for v in counts):
            continue
        count[group] += 1
        measured.append(key)
        if group == "thread":
            fields, non_records = _int(counts[0]), _int(counts[1]) + _int(counts[2]) + _int(counts[3])
            kept, written = (_number(v) for v in counts[4])
            # the record count per-response expiry keeps, where its field count proves it current
            n = kept if kept is not None and written == fields - 1 else max(0, fields - non_records) // 2
            responses += n
            ttl["threads"][ttl_bucket(pttl)] += 1
            no_ttl_responses += n if pttl == -1 else 0
        elif group == "items":  # one key per session; a "meta" key is a leftover of the old layout
            items += _int(counts[0])
            ttl["item_sessions"][ttl_bucket(pttl)] += 1
            no_ttl_sessions += pttl == -1
        elif group == "locator":
            ttl["locators"][ttl_bucket(pttl)] += 1
        elif group == "conversation":
            ttl["conversations"][ttl_bucket(pttl)] += 1
    buckets = ["none"] + [name for name, _ in TTL_BUCKETS]
    return {
        "url": target.shown_url,
        "prefix": target.prefix,
        "nodes_scanned": nodes,
        "keys_in_database": total_keys,
        "keys": sum(count.values()),
        "threads": count["thread"],
        "responses": responses,
        "responses_method": "per thread, the record count its saves keep ('c'), where its field count ('r') "
                            "proves it current; else its fields but 'ops', 'w' and 'm', halved (exact for threads "
                            "written before per-response expiry)",
        "item_sessions": count["items"],
        "items": items,
        "locators": count["locator"],
        "conversations": count["conversation"],
        "old_layout_meta_keys": count["meta"],
        "other_keys": count["other"],
        "old_locators_unproven": legacy_left,
        "wrong_type": {group: {"count": len(names), "examples": names[:5]} for group, names in sorted(wrong.items())},
        "memory": _memory(measured, usage),
        "ttl": {group: {b: ttl[group][b] for b in buckets} for group in ("threads", "item_sessions", "locators",
                                                                                "conversations")},
        "no_ttl": {"responses": no_ttl_responses, "item_sessions": no_ttl_sessions},
        "failed": failures.as_dict(),
    }


def _memory(keys: list[Key], usage: dict[str, int]) -> dict[str, Any]:
    """Average MEMORY USAGE per kind over the sample, times each kind's key count: an estimate."""
    per_kind: dict[str, list[int]] = defaultdict(list)
    for key in keys:
        if key.name in usage:
            per_kind[key.kind].append(usage[key.name])
    measured = [v for values in per_kind.values() for v in values]
    if not measured:
        return {"estimated_bytes": None, "sampled_keys": 0, "method": "MEMORY USAGE unavailable or no keys"}
    overall = sum(measured) / len(measured)
    counts = Counter(key.kind for key in keys)
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
    wrong = ", ".join(f"{v['count']} {group}" for group, v in r["wrong_type"].items())
    rows: list[tuple[str, Any]] = [
        ("prefix", f"{r['prefix']}  ({r['url']}, {r['nodes_scanned']} node(s) scanned)"),
        ("keys", f"{r['keys']} of this prefix ({r['keys_in_database']} in the database)"),
        ("responses", f"{r['responses']} in {r['threads']} threads"),
        ("item sessions", f"{r['item_sessions']} holding {r['items']} items"),
        ("locators", r["locators"]),
        ("conversations", r["conversations"]),
        ("other keys", f"{r['other_keys']} (under '{r['prefix']}:{{' but not keys of this layout)"),
        ("wrong type", f"{wrong} (keys of this layout holding another Redis type)" if wrong else "none"),
        ("memory", mem_text),
        ("no TTL", f"{r['no_ttl']['responses']} responses, {r['no_ttl']['item_sessions']} item sessions"),
    ]
    if r["old_layout_meta_keys"]:
        rows.append(("old meta keys", f"{r['old_layout_meta_keys']} (the old item-session layout; purge deletes them)"))
    output.pairs(rows)
    for group, v in r["wrong_type"].items():
        for example in v["examples"]:
            print(f"  wrong type: {example}")
    print()
    buckets = list(r["ttl"]["threads"])
    rows2 = [[group] + [r["ttl"][group][b] for b in buckets] for group in r["ttl"]]
    output.table(["TTL left"] + buckets, rows2)
