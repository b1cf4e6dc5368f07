"""Read-only commands: ``show``, ``chain``, ``items``, ``conversation`` and ``stats``.

Records are read through the stores' public API (``get``, ``resolve_chain``,
``snapshot``, the conversation store's ``get`` and ``list_items``); the commands
only add what a person asks about a key: its TTL, its size, and counts over a
whole prefix.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..codec import to_builtins
from ..errors import ErrorCode, SessionError, translate_errors
from ..ids import validate_id
from ..keys import KeySpace
from ..models import StoredResponseSession
from ..items import RedisSession
from ..link import as_text, close_client
from . import output
from .common import Missing, Target, thread_key
from .keyscan import EXPECTED_TYPE, STATE_REPLIES, Failures, Key, KeyKinds, count_responses, dbsize, pipelined, \
    primaries, queue_state, scan_all, state

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
        ("size", f"{output.plural(int(nbytes), 'byte')} as stored (compressed, if it was)"),
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
    finally:
        await close_client(client)
    found: list[dict[str, Any]] = list(snap.items)
    entries, corrupt = snap.count, snap.count - len(found)  # count: the stored entries read, corrupt ones too
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
GROUPS = {"thread": "threads", "items": "item_sessions", "locator": "locators", "conversation": "conversations"}
NAMES = {"thread": "threads", "items": "item sessions", "locator": "locators", "conversation": "conversations"}


def _queue_facts(pipe: Any, key: Key) -> None:
    """TYPE and PTTL of every key, then what its header says (:func:`.keyscan.queue_state`)."""
    pipe.type(key.name)
    pipe.pttl(key.name)
    queue_state(pipe, key)


async def stats(target: Target, sample: int) -> int:
    client = target.client()
    show_progress = not target.json
    failures = Failures()
    try:
        nodes = await primaries(client)
        total_keys = sum([await dbsize(client, n) for n in nodes])
        with output.progress("scanning", enabled=show_progress) as step:
            keys = await scan_all(client, KeyKinds(target.keys), lambda i, n, f: step(completed=f, extra=f"node {i + 1} of {n}"))
        with output.progress("reading", len(keys), enabled=show_progress) as step:
            facts = await pipelined(client, keys, _queue_facts, lambda k: 2 + STATE_REPLIES.get(k.kind, 0),
                                    lambda n: step(advance=n), "stats")
        tally = _Tally()
        for key, fact in zip(keys, facts):
            tally.add(key, fact, failures)
        with output.progress("counting responses", len(tally.threads), enabled=show_progress) as step:
            responses = await count_responses(client, tally.threads, failures, lambda n: step(advance=n))
        sampled = random.Random(0).sample(tally.measured, min(sample, len(tally.measured))) if sample > 0 else []
        with output.progress("sizing", len(sampled), enabled=show_progress) as step:
            usage = await pipelined(client, sampled, lambda p, k: p.memory_usage(k.name), 1, lambda n: step(advance=n),
                                    "MEMORY USAGE")
    finally:
        await close_client(client)
    sizes = {k.name: u[0] for k, u in zip(sampled, usage) if isinstance(u[0], int)}
    report = {"prefix": target.prefix, "nodes_scanned": len(nodes), "keys_in_database": total_keys,
              **tally.report(responses), "memory": _memory(tally.measured, sizes), "failed": failures.as_dict()}
    if target.json:
        output.print_json(report)
    else:
        _print_stats(report)
    failures.raise_if_any("stats")
    return 0


@dataclass
class _Tally:
    """What the keys of a prefix hold, key by key (:meth:`add`)."""

    live: Counter[str] = field(default_factory=Counter)
    tombstones: Counter[str] = field(default_factory=Counter)
    items: int = 0
    other: int = 0
    ttl: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    no_ttl_sessions: int = 0
    unread: dict[str, dict[str, list[str]]] = field(
        default_factory=lambda: {what: defaultdict(list) for what in ("wrong_type", "unsupported", "corrupt")})
    """Keys of this layout it does not read, by why (another Redis type, data format, or a
    header that does not parse) and kind."""
    measured: list[Key] = field(default_factory=list)
    threads: list[tuple[Key, int]] = field(default_factory=list)
    """Live threads, with their largest record, for their responses to be counted."""
    persistent: set[str] = field(default_factory=set)
    """Live threads without a TTL."""

    def add(self, key: Key, fact: list[Any], failures: Failures) -> None:
        kind, pttl, *replies = fact
        if not all(failures.check(key.name, v, "stats") for v in (kind, pttl)) or as_text(kind) == "none":
            return  # failed, or expired or deleted since the scan
        self.measured.append(key)
        if key.kind == "other":
            self.other += 1
            return
        if as_text(kind) != EXPECTED_TYPE[key.kind]:
            self.unread["wrong_type"][key.kind].append(f"{key.name} ({as_text(kind)})")
            return
        if not all(failures.check(key.name, v, "stats") for v in replies):
            return
        found = state(key, replies) if key.kind in STATE_REPLIES else None
        if found is not None and found.status == "tombstone":
            self.tombstones[key.kind] += 1
            return
        if found is not None and found.status != "live":
            self.unread[found.status][key.kind].append(key.name)
            return
        self.live[key.kind] += 1
        self.ttl[GROUPS[key.kind]][ttl_bucket(pttl)] += 1
        if key.kind == "thread" and found is not None:
            self.threads.append((key, found.largest))
            if pttl == -1:
                self.persistent.add(key.name)
        elif key.kind == "items" and found is not None:
            self.items += found.items
            self.no_ttl_sessions += pttl == -1

    def report(self, responses: dict[str, int]) -> dict[str, Any]:
        buckets = ["none"] + [name for name, _ in TTL_BUCKETS]

        def examples(found: dict[str, list[str]]) -> dict[str, Any]:
            return {kind: {"count": len(names), "examples": sorted(names)[:5]} for kind, names in sorted(found.items())}

        return {
            "keys": len(self.measured), "threads": self.live["thread"], "responses": sum(responses.values()),
            "item_sessions": self.live["items"], "items": self.items, "conversations": self.live["conversation"],
            "locators": self.live["locator"], "other_keys": self.other,
            "tombstones": {GROUPS[kind]: self.tombstones[kind] for kind in ("thread", "items", "conversation")},
            **{what: examples(found) for what, found in self.unread.items()},
            "ttl": {group: {b: self.ttl[group][b] for b in buckets} for group in GROUPS.values()},
            "no_ttl": {"responses": sum(n for name, n in responses.items() if name in self.persistent),
                       "item_sessions": self.no_ttl_sessions},
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
    p = output.plural
    mem = r["memory"]
    mem_text = "unavailable" if mem["estimated_bytes"] is None else (
        f"about {output.size(mem['estimated_bytes'])} (estimated from {p(mem['sampled_keys'], 'sampled key')})")

    def kinds(found: dict[str, Any]) -> str:
        return ", ".join(f"{v['count']} {NAMES[kind]}" for kind, v in found.items())

    dead = r["tombstones"]
    rows: list[tuple[str, Any]] = [
        ("prefix", f"{r['prefix']}  ({p(r['nodes_scanned'], 'node')} scanned)"),
        ("keys", f"{r['keys']:,} of this prefix ({r['keys_in_database']:,} in the database)"),
        ("responses", f"{r['responses']:,} in {p(r['threads'], 'thread')}"),
        ("item sessions", f"{r['item_sessions']:,} holding {p(r['items'], 'item')}"),
        ("conversations", f"{r['conversations']:,}"),
        ("locators", f"{r['locators']:,}"),
        ("tombstones", f"{p(dead['threads'], 'thread')}, {p(dead['item_sessions'], 'item session')} and "
                       f"{p(dead['conversations'], 'conversation')} deleted or emptied, their keys kept a while "
                       "to answer re-sent writes" if any(dead.values()) else "none"),
        ("other keys", f"{r['other_keys']:,} (under '{r['prefix']}:{{' but not keys of this layout)"),
        ("wrong type", f"{kinds(r['wrong_type'])} (keys of this layout holding another Redis type)"
         if r["wrong_type"] else "none"),
        ("unsupported", f"{kinds(r['unsupported'])} (not in data format 1: not read)" if r["unsupported"] else "none"),
        ("corrupt", f"{kinds(r['corrupt'])} (a header that does not parse: not read)" if r["corrupt"] else "none"),
        ("memory", mem_text),
        ("no TTL", f"{p(r['no_ttl']['responses'], 'response')}, {p(r['no_ttl']['item_sessions'], 'item session')}"),
    ]
    output.pairs(rows)
    for what in ("wrong_type", "unsupported", "corrupt"):
        for v in r[what].values():
            for example in v["examples"]:
                print(f"  {what.replace('_', ' ')}: {example}")
    print()
    buckets = list(r["ttl"]["threads"])
    output.table(["TTL left"] + buckets, [[group.replace("_", " ")] + [r["ttl"][group][b] for b in buckets]
                                          for group in r["ttl"]])
