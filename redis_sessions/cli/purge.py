"""Destructive commands: ``delete`` and ``delete-thread`` (through the response store)
and ``purge``.

``purge`` deletes only keys that :class:`~redis_sessions.keys.KeySpace` builds
for the given prefix (threads, item sessions, locators, and old-layout locators
it proves are this prefix's); anything else under ``<prefix>:{`` is left alone
and reported. Keys of other prefixes are never seen (:mod:`.keyscan`).

With ``--idle-older-than`` a key is deleted only if it records when it was last
written and that was longer ago than the window, judged and deleted in one step
on the server (``lua/purge_if_idle.lua``), so nothing written within the window
is ever deleted. A locator goes only once its thread is gone, and is put back
if a save brought the record back meanwhile.

Every per-key error is counted: the command does what it can, reports, and
fails with ``purge: N keys failed (<code>)``. ``--dry-run`` prints the plan:
every key that would go (with ``--idle-older-than``, judged by the same script
with its delete turned off), and deletes nothing.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import ErrorCode, SessionError
from ..keys import KeySpace
from ..link import AnyRedis, as_text, close_client
from ..errors import translate_errors
from ..scripts import script
from . import output
from .common import Target
from .keyscan import Failures, Key, KeyKinds, pipelined, prove_legacy, scan_all, wrong_type

DATA_KINDS = ("thread", "items", "meta", "conversation")
LOCATOR_KINDS = ("locator", "legacy_locator")

IDLE_HELP = """\
Delete only keys idle for longer than SECONDS: keys that record when they
were last written (a thread hash's 'w' field, server time in ms), judged and
deleted in one step on the server, so nothing written within the window is
ever deleted. A key that records no last write is kept and counted: neither
its TTL (set by whichever writer came last, with that writer's TTL) nor OBJECT
IDLETIME (not updated while a fork saves; an error under LFU) proves a key idle,
on every maxmemory policy. A locator is deleted once its thread is gone, and
put back if a save brought its record back meanwhile; the locators of a kept
thread stay."""


async def delete(target: Target, response_id: str) -> int:
    store = target.store()
    try:
        deleted = await store.delete(response_id)
    finally:
        await store.close()
    if not deleted:
        raise SessionError(ErrorCode.CHAIN_NOT_FOUND, f"response {response_id!r} was not found")
    if target.json:
        output.print_json({"deleted": response_id})
    else:
        print(f"deleted {response_id} (its descendants, if any, stay and now end at a gap)")
    return 0


async def delete_thread(target: Target, ident: str) -> int:
    """Delete the thread of a response id, or of a thread id (``list threads``), with the
    store's ``delete_thread``: every response of it, every branch, and their locators."""
    store = target.store()
    try:
        # 16 hex digits name a thread, unless no thread has them: then a response minted elsewhere
        response_id = (await _some_response(store, ident) if _THREAD_ID.fullmatch(ident) else None) or ident
        deleted = await store.delete_thread(response_id)
    finally:
        await store.close()
    if not deleted:
        raise SessionError(ErrorCode.CHAIN_NOT_FOUND, f"no thread holds {ident!r}")
    if target.json:
        output.print_json({"deleted_thread_of": ident, "deleted_responses": deleted})
    else:
        print(f"deleted the thread of {ident}: {output.plural(deleted, 'response')}")
    return 0


_THREAD_ID = re.compile(r"[0-9a-f]{16}")


async def _some_response(store: Any, thread: str) -> str | None:
    """A response id the thread ``thread`` holds (one HSCAN page of its ``d:`` fields)."""
    key, field = store.keys.thread(thread), KeySpace.data_field("")
    cursor = 0
    while True:
        async with translate_errors(f"HSCAN {key!r}"):
            cursor, page = await store.client.hscan(key, cursor, match=field + "*", count=100)
        for name in page:
            return as_text(name)[len(field):]
        if int(cursor) == 0:
            return None


@dataclass
class Plan:
    """What a purge will try to delete, and what it leaves and why."""

    data: list[Key] = field(default_factory=list)
    locators: list[tuple[Key, str]] = field(default_factory=list)  # (locator, its thread's key)
    other: int = 0
    legacy_left: int = 0
    kept: Counter[str] = field(default_factory=Counter)
    failures: Failures = field(default_factory=Failures)

    def kinds(self) -> Counter[str]:
        counts = Counter(k.kind for k in self.data)
        counts.update("locator" for _ in self.locators)
        return counts

    @property
    def size(self) -> int:
        return len(self.data) + len(self.locators)


def _judge(idle_ms: int, delete: bool) -> Callable[[Any, Key], None]:
    """Queue lua/purge_if_idle.lua. Sent as EVAL (a few hundred bytes) so a pipeline
    never meets NOSCRIPT."""
    source = script("purge_if_idle").source

    def queue(pipe: Any, key: Key) -> None:
        pipe.execute_command("EVAL", source, 1, key.name, idle_ms, 1 if delete else 0)

    return queue


def _verdict(reply: Any) -> str:
    return as_text(reply[0]) if isinstance(reply, list) and reply else "unknown"


async def _plan(client: AnyRedis, target: Target, idle_ms: int | None, progress: bool) -> Plan:
    ks = target.keys
    with output.progress("scanning", enabled=progress) as step:
        found = await scan_all(client, KeyKinds(ks), lambda i, n, f: step(completed=f, extra=f"node {i + 1} of {n}"))
    plan = Plan(other=sum(1 for k in found if k.kind == "other"))
    legacy = [k for k in found if k.kind == "legacy_locator"]
    with output.progress("checking old locators", len(legacy), enabled=progress) as step:
        proven = await prove_legacy(client, ks, legacy, plan.failures, lambda n: step(advance=n))
    plan.legacy_left = len(legacy) - len(proven)
    data = [k for k in found if k.kind in DATA_KINDS]
    locators = await _locators(client, ks, [k for k in found if k.kind == "locator"], plan.failures, progress)
    locators += [(key, ks.thread(tag)) for key, tag in proven]
    if idle_ms is None:
        plan.data, plan.locators = data, locators
        return plan
    with output.progress("judging", len(data), enabled=progress) as step:
        verdicts = await pipelined(client, data, _judge(idle_ms, False), 1, lambda n: step(advance=n), "purge_if_idle")
    for key, (reply,) in zip(data, verdicts):
        if not plan.failures.check(key.name, reply, "purge_if_idle"):
            continue
        verdict = _verdict(reply)
        if verdict == "idle":
            plan.data.append(key)
        elif verdict != "gone":
            plan.kept[verdict] += 1
    # A locator goes with its thread, or once its thread is gone; the others stay.
    doomed = {k.name for k in plan.data}
    open_threads = [thread for _, thread in locators if thread and thread not in doomed]
    exists = dict(zip(open_threads, await pipelined(client, open_threads, lambda p, k: p.exists(k), 1, None, "EXISTS")))
    for key, thread in locators:
        here = exists.get(thread, [0])[0]
        if not thread:  # a locator key holding another type: records nothing, kept
            plan.kept["unrecorded"] += 1
        elif thread in doomed or (plan.failures.check(thread, here, "EXISTS") and not here):
            plan.locators.append((key, thread))
        else:
            plan.kept["locator_of_kept_thread"] += 1
    return plan


async def _locators(client: AnyRedis, ks: KeySpace, keys: list[Key], failures: Failures,
                    progress: bool) -> list[tuple[Key, str]]:
    """Every locator of the prefix with the key of the thread it points at."""
    with output.progress("reading locators", len(keys), enabled=progress) as step:
        values = await pipelined(client, keys, lambda p, k: p.get(k.name), 1, lambda n: step(advance=n), "locators")
    out: list[tuple[Key, str]] = []
    for key, (value,) in zip(keys, values):
        if wrong_type(value):  # one of our keys holding something else: it still goes in a full purge
            out.append((key, ""))
        elif value is not None and failures.check(key.name, value, "GET"):
            out.append((key, ks.thread(as_text(value))))
    return out


KIND_NAMES = {"thread": ("thread", None), "items": ("item session", None), "meta": ("old metadata key", None),
              "conversation": ("conversation", None), "locator": ("locator", None)}


def _kinds(counts: Counter[str]) -> str:
    return ", ".join(output.plural(n, *KIND_NAMES[kind]) for kind, n in sorted(counts.items())) or "nothing"


def _confirm(plan: Plan, target: Target) -> bool:
    prompt = (f"delete {output.plural(plan.size, 'key')} ({_kinds(plan.kinds())}) of prefix {target.prefix!r} "
              f"at {target.shown_url}? [y/N] ")
    try:
        sys.stderr.write(output.scrub(prompt))
        sys.stderr.flush()
        answer = sys.stdin.readline()
    except (EOFError, KeyboardInterrupt):
        return False
    return answer.strip().lower() in ("y", "yes")


def _unlink(pipe: Any, key: Key) -> None:
    # execute_command, not pipe.unlink: a cluster pipeline's unlink is a coroutine (multi-key aware).
    pipe.execute_command("UNLINK", key.name)


async def _delete_data(client: AnyRedis, plan: Plan, idle_ms: int | None, bar: Callable[[int], None]) -> Counter[str]:
    deleted: Counter[str] = Counter()
    if idle_ms is None:
        replies = await pipelined(client, plan.data, _unlink, 1, bar, "UNLINK")
        for key, (reply,) in zip(plan.data, replies):
            if plan.failures.check(key.name, reply, "UNLINK") and reply:
                deleted[key.kind] += 1
        return deleted
    replies = await pipelined(client, plan.data, _judge(idle_ms, True), 1, bar, "purge_if_idle")
    for key, (reply,) in zip(plan.data, replies):
        if not plan.failures.check(key.name, reply, "purge_if_idle"):
            continue
        verdict = _verdict(reply)
        if verdict == "idle":
            deleted[key.kind] += 1
        elif verdict != "gone":  # written since the plan: kept, with its locators
            plan.kept[verdict] += 1
    return deleted


async def _delete_locators(client: AnyRedis, target: Target, plan: Plan, everything: bool,
                           bar: Callable[[int], None]) -> int:
    """Delete the planned locators whose thread is gone now (all of them in a full purge);
    then look again, and put back any whose record a save brought back meanwhile."""
    todo = plan.locators
    if not everything:
        threads = [thread for _, thread in todo]
        exists = await pipelined(client, threads, lambda p, k: p.exists(k), 1, None, "EXISTS")
        todo = []
        for (key, thread), (here,) in zip(plan.locators, exists):
            if not plan.failures.check(thread, here, "EXISTS"):
                continue
            if here:
                plan.kept["locator_of_kept_thread"] += 1
            else:
                todo.append((key, thread))
    replies = await pipelined(client, todo, lambda p, kt: _unlink(p, kt[0]), 1, bar, "UNLINK")
    gone = [(key, thread) for (key, thread), (reply,) in zip(todo, replies)
            if plan.failures.check(key.name, reply, "UNLINK") and reply]
    if everything:
        return len(gone)
    return len(gone) - await _repoint(client, target.keys, gone, plan.failures)


async def _repoint(client: AnyRedis, ks: KeySpace, gone: list[tuple[Key, str]], failures: Failures) -> int:
    """A save racing the purge may have put a locator's record back after the thread
    was deleted: point its locator again (SET NX, the thread's TTL). Returns how many."""
    def check(pipe: Any, kt: tuple[Key, str]) -> None:
        pipe.hexists(kt[1], ks.data_field(kt[0].ident))
        pipe.pttl(kt[1])

    facts = await pipelined(client, gone, check, 2, None, "HEXISTS")
    back = [(key, thread, pttl) for (key, thread), (held, pttl) in zip(gone, facts)
            if failures.check(thread, held, "HEXISTS") and held and isinstance(pttl, int)]

    def point(pipe: Any, item: tuple[Key, str, int]) -> None:
        key, thread, pttl = item
        pipe.set(ks.locator(key.ident), thread[thread.index("{") + 1 : thread.index("}")], nx=True,
                 px=pttl if pttl > 0 else None)

    replies = await pipelined(client, back, point, 1, None, "SET")
    for (key, _, _), (reply,) in zip(back, replies):
        failures.check(key.name, reply, "SET")
    return len(back)


async def purge(target: Target, idle_seconds: float | None, yes: bool, dry_run: bool = False) -> int:
    if not (yes or dry_run) and not sys.stdin.isatty():
        raise SessionError(ErrorCode.INPUT_INVALID, "refusing to purge without --yes: stdin is not a terminal to confirm on "
                                                    "(--dry-run shows what would go)")
    progress = not target.json
    idle_ms = None if idle_seconds is None else int(idle_seconds * 1000)
    client = target.client()
    try:
        plan = await _plan(client, target, idle_ms, progress)
        if dry_run:
            _report_plan(target, plan, idle_seconds)
            plan.failures.raise_if_any("purge --dry-run")
            return 0
        if plan.size and not yes and not _confirm(plan, target):
            output.note("purge cancelled: nothing was deleted")
            if target.json:
                output.print_json({"cancelled": True, "deleted_keys": 0})
            return 0
        with output.progress("deleting", plan.size, enabled=progress) as step:
            deleted = await _delete_data(client, plan, idle_ms, lambda n: step(advance=n))
            locators = await _delete_locators(client, target, plan, idle_ms is None, lambda n: step(advance=n))
    finally:
        await close_client(client)
    if locators:
        deleted["locator"] = locators
    _report(target, plan, deleted, idle_seconds)
    plan.failures.raise_if_any("purge")
    return 0


def _report_plan(target: Target, plan: Plan, idle_seconds: float | None) -> None:
    """--dry-run: every key the purge would delete now, then what it would leave."""
    keys = [k.name for k in plan.data] + [k.name for k, _ in plan.locators]
    if target.json:
        output.print_json({"dry_run": True, "prefix": target.prefix, "url": target.shown_url, "would_delete": keys,
                           "by_kind": dict(plan.kinds()), **_kept(plan), "failed": plan.failures.as_dict(),
                           "idle_older_than": idle_seconds})
        return
    for key in keys:
        print(key)
    print(f"\nwould delete {output.plural(len(keys), 'key')} of prefix {target.prefix!r} ({_kinds(plan.kinds())}); "
          "nothing was deleted")
    _print_kept(target, plan, idle_seconds)


def _kept(plan: Plan) -> dict[str, int]:
    return {"kept_active": plan.kept["active"], "kept_unrecorded": plan.kept["unrecorded"],
            "kept_locators": plan.kept["locator_of_kept_thread"], "other_keys_left": plan.other,
            "old_locators_left": plan.legacy_left}


def _print_kept(target: Target, plan: Plan, idle_seconds: float | None) -> None:
    p = output.plural
    if idle_seconds is not None:
        print(f"kept {p(plan.kept['active'], 'key')} written within the last {idle_seconds:g} s, "
              f"{p(plan.kept['unrecorded'], 'key')} that record no last write (item sessions and conversations "
              f"do not yet), and {p(plan.kept['locator_of_kept_thread'], 'locator')} of kept threads")
    if plan.other:
        print(f"left {p(plan.other, 'key')} under '{target.prefix}:{{' that are not keys of this layout")
    if plan.legacy_left:
        print(f"left {p(plan.legacy_left, 'old-layout locator')} not proven to be this prefix's "
              "(they expire with their TTL)")


def _report(target: Target, plan: Plan, deleted: Counter[str], idle_seconds: float | None) -> None:
    total = sum(deleted.values())
    if target.json:
        output.print_json({"prefix": target.prefix, "url": target.shown_url, "deleted_keys": total,
                           "by_kind": dict(deleted), **_kept(plan), "failed": plan.failures.as_dict(),
                           "idle_older_than": idle_seconds})
        return
    print(f"deleted {output.plural(total, 'key')} of prefix {target.prefix!r} ({_kinds(deleted)})")
    _print_kept(target, plan, idle_seconds)
