"""Read-only commands: ``show``, ``chain``, ``items``, ``conversation`` and ``stats``.

Records are read through the stores' public API (``get``, ``resolve_chain``,
``snapshot``, the conversation store's ``get`` and ``list_items``); the commands
only add what a person asks about a key: its TTL, its size, and counts over a
whole prefix.
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
from ..items import RedisSession
from ..link import as_text, close_client
from ..errors import translate_errors
from . import output
from .common import Missing, Target, thread_key
from .keyscan import LIVE_REPLIES, Failures, Key, KeyKinds, dbsize, live_count, pipelined, primaries, prove_legacy, \
    queue_live, scan_all

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
        ("size", f"{output.plural(int(nbytes), 'byte')} (msgpack record)"),
    ])
    print()
    print(output.dumps(record))
    return 0


# -- chain -----------------------------------------------------------------
def _turn_row(index: int, s: StoredResponseSession) -> list[Any]:
    out = s.response.output_text or output.preview(s.response.output)
    return [index, s.id, s.status, output.timestamp(s.created_at), output.preview(s.request.input), output.preview(out)]


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
    output.table(headers, [_turn_row(i + 1, s) for i, s in enumerate(snap.sessions)], wide=("input", "output"))
    print(f"\n{output.plural(len(snap.sessions), 'turn')}, "
          f"{output.plural(len(snap.input_items), 'input item')} for the next request")
    return 0


# -- items -----------------------------------------------------------------
async def items(target: Target, session_id: str, limit: int | None) -> int:
    """The session's items as ``get_items`` returns them, plus what it skips: entries
    that do not decode are counted and reported, and a key of another Redis type is
    an error naming the type."""
    key = target.keys.session_items(validate_id(session_id, "session id"))
    client = target.client()
    try:
        async with translate_errors(f"item session {key!r}"):
            kind = as_text(await client.type(key))
            pttl = int(await client.pttl(key))
        if kind == "none":
            raise Missing(f"item session {session_id!r} was not found (expired, cleared or never written)")
        if kind != "list":
            raise SessionError(ErrorCode.RECORD_CORRUPT, f"{key!r} holds a Redis {kind}, not an item session (a list)")
        session = RedisSession(session_id, client=client, key_prefix=target.prefix)
        snap = await session.snapshot()
        await session.close()
        entry = Key(key, "items", session_id)
        (counted,) = await pipelined(client, [entry], queue_live, LIVE_REPLIES["items"], None, "item session")
    finally:
        await close_client(client)
    found: list[dict[str, Any]] = list(snap.items)
    entries = live_count(entry, counted)  # below the header, and not the stash of recent pops
    corrupt = max(0, entries - len(found))
    shown = found if limit is None else found[-limit:]
    if target.json:
        output.print_json({"session_id": session_id, "key": key, "items": shown, "item_count": len(found),
                           "corrupt_entries": corrupt, "ttl_ms": pttl if pttl >= 0 else None})
        return 0
    first = len(found) - len(shown) + 1
    _item_table([(str(first + i), item) for i, item in enumerate(shown)], "#")
    print(f"{output.plural(len(found), 'item')}, TTL {output.duration(pttl)}")
    if corrupt:
        print(f"{output.plural(corrupt, 'stored entry', 'stored entries')} of {entries} "
              f"{'does' if corrupt == 1 else 'do'} not decode "
              f"(corrupt): get_items skips {'it' if corrupt == 1 else 'them'}")
    return 0


def _item_table(rows: list[tuple[str, Any]], first: str) -> None:
    if rows:
        output.table([first, "type", "role", "content"],
                     [[n, item.get("type", "-"), item.get("role", "-"), output.preview(item)] for n, item in rows],
                     wide=("content",))
        print()


# -- conversation ------------------------------------------------------------
async def conversation(target: Target, conversation_id: str, limit: int, after: str | None) -> int:
    """A conversation as the Conversations API shows it, with a page of its items, oldest first."""
    store = target.conversations()
    try:
        conv = await store.get(conversation_id)
        page = await store.list_items(conversation_id, limit=limit, order="asc", after=after)
        async with translate_errors(f"conversation {conversation_id!r}"):
            pttl = int(await store.client.pttl(store.keys.conversation(conversation_id)))
    finally:
        await store.close()
    more = page.last_id if page.has_more else None
    if target.json:
        output.print_json({**to_builtins(conv), "ttl_ms": pttl if pttl >= 0 else None, "items": page.data,
                           "has_more": page.has_more, "after": more})
        return 0
    meta = ", ".join(f"{k}={v}" for k, v in sorted(conv.metadata.items())) or "none"
    output.pairs([("id", conv.id), ("created_at", output.timestamp(conv.created_at)), ("metadata", meta),
                  ("ttl", output.duration(pttl) if pttl >= 0 else "none (never expires)")])
    print()
    _item_table([(str(item.get("id", "-")), item) for item in page.data], "item id")
    shown = output.plural(len(page.data), "item") + (f" after {after}" if after else "")
    print(shown + (f"; more with --after {more}" if more else ""))
    return 0


# -- stats -----------------------------------------------------------------
EXPECTED_TYPE = {"thread": "hash", "meta": "hash", "items": "list", "locator": "string", "legacy_locator": "string",
                 "conversation": "hash"}


def _queue_facts(pipe: Any, key: Key) -> None:
    """TYPE and PTTL of every key, then what says how much it holds (:func:`.keyscan.queue_live`)."""
    pipe.type(key.name)
    pipe.pttl(key.name)
    queue_live(pipe, key)


def _fact_count(key: Key) -> int:
    return 2 + LIVE_REPLIES.get(key.kind, 0)


async def stats(target: Target, sample: int) -> int:
    client = target.client()
    kinds = KeyKinds(target.keys)
    show_progress = not target.json
    failures = Failures()
    try:
        nodes = await primaries(client)
        total_keys = sum([await dbsize(client, n) for n in nodes])
        with output.progress("scanning", enabled=show_progress) as step:
            found = await scan_all(client, kinds, lambda i, n, f: step(completed=f, extra=f"node {i + 1} of {n}"))
        legacy = [k for k in found if k.kind == "legacy_locator"]
        proven = {k.name for k, _ in await prove_legacy(client, target.keys, legacy, failures)}
        keys = [k for k in found if k.kind != "legacy_locator" or k.name in proven]
        with output.progress("reading", len(keys), enabled=show_progress) as step:
            facts = await pipelined(client, keys, _queue_facts, _fact_count, lambda n: step(advance=n), "stats")
        sampled = random.Random(0).sample(keys, min(sample, len(keys))) if sample > 0 else []
        with output.progress("sizing", len(sampled), enabled=show_progress) as step:
            usage = await pipelined(client, sampled, lambda p, k: p.memory_usage(k.name), 1, lambda n: step(advance=n),
                                    "MEMORY USAGE")
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


def _summarise(target: Target, keys: list[Key], facts: list[list[Any]], usage: dict[str, int], nodes: int,
               total_keys: int, legacy_left: int, failures: Failures) -> dict[str, Any]:
    count: Counter[str] = Counter()
    ttl: dict[str, Counter[str]] = defaultdict(Counter)
    wrong: dict[str, list[str]] = defaultdict(list)
    tombstones: Counter[str] = Counter()
    responses = items = no_ttl_responses = no_ttl_sessions = 0
    measured: list[Key] = []
    for key, (kind, pttl, *counts) in zip(keys, facts):
        if not all(failures.check(key.name, v, "stats") for v in (kind, pttl)):
            continue
        kind, pttl = as_text(kind), pttl if isinstance(pttl, int) else 0
        if kind == "none":
            continue  # expired or deleted since the scan
        group = "locator" if key.kind == "legacy_locator" else key.kind
        if group != "other" and kind != EXPECTED_TYPE[key.kind]:
            wrong[group].append(f"{key.name} ({kind})")
            continue
        if not all(failures.check(key.name, v, "stats") for v in counts):
            continue
        measured.append(key)
        live = live_count(key, counts) if group in LIVE_REPLIES else 1
        if not live:  # kept only to answer re-sent writes: not a thread, session or conversation
            tombstones[group] += 1
            continue
        count[group] += 1
        if group == "thread":
            responses += live
            ttl["threads"][ttl_bucket(pttl)] += 1
            no_ttl_responses += live if pttl == -1 else 0
        elif group == "items":  # one key per session; a "meta" key is a leftover of the old layout
            items += live
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
        "keys": len(measured),
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
        "tombstones": {"threads": tombstones["thread"], "item_sessions": tombstones["items"],
                       "conversations": tombstones["conversation"]},
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


GROUP_NAMES = {"thread": "threads", "items": "item sessions", "locator": "locators", "conversation": "conversations",
               "meta": "old metadata keys", "threads": "threads", "item_sessions": "item sessions",
               "locators": "locators", "conversations": "conversations"}


def _print_stats(r: dict[str, Any]) -> None:
    p = output.plural
    mem = r["memory"]
    mem_text = "unavailable" if mem["estimated_bytes"] is None else (
        f"about {output.size(mem['estimated_bytes'])} (estimated from {p(mem['sampled_keys'], 'sampled key')})")
    wrong = ", ".join(f"{v['count']} {GROUP_NAMES[group]}" for group, v in r["wrong_type"].items())
    dead = r["tombstones"]
    rows: list[tuple[str, Any]] = [
        ("prefix", f"{r['prefix']}  ({r['url']}, {p(r['nodes_scanned'], 'node')} scanned)"),
        ("keys", f"{r['keys']:,} of this prefix ({r['keys_in_database']:,} in the database)"),
        ("responses", f"{r['responses']:,} in {p(r['threads'], 'thread')}"),
        ("item sessions", f"{r['item_sessions']:,} holding {p(r['items'], 'item')}"),
        ("conversations", f"{r['conversations']:,}"),
        ("locators", f"{r['locators']:,}"),
        ("tombstones", f"{p(dead['threads'], 'thread')}, {p(dead['item_sessions'], 'item session')} and "
                       f"{p(dead['conversations'], 'conversation')} deleted or emptied, their keys kept a while "
                       "to answer re-sent writes" if any(dead.values()) else "none"),
        ("other keys", f"{r['other_keys']:,} (under '{r['prefix']}:{{' but not keys of this layout)"),
        ("wrong type", f"{wrong} (keys of this layout holding another Redis type)" if wrong else "none"),
        ("memory", mem_text),
        ("no TTL", f"{p(r['no_ttl']['responses'], 'response')}, {p(r['no_ttl']['item_sessions'], 'item session')}"),
    ]
    if r["old_layout_meta_keys"]:
        rows.append(("old meta keys", f"{r['old_layout_meta_keys']:,} (the old item-session layout; purge deletes them)"))
    output.pairs(rows)
    for group, v in r["wrong_type"].items():
        for example in v["examples"]:
            print(f"  wrong type: {example}")
    print()
    buckets = list(r["ttl"]["threads"])
    rows2 = [[GROUP_NAMES[group]] + [r["ttl"][group][b] for b in buckets] for group in r["ttl"]]
    output.table(["TTL left"] + buckets, rows2)
