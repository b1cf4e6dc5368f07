"""Destructive commands: ``delete`` and ``delete-thread`` (through the response store)
and ``purge``.

``purge`` deletes only keys that :class:`~redis_sessions.keys.KeySpace` builds for the
given prefix (threads, item sessions, conversations, locators); anything else under
``<prefix>:{`` is left alone and reported. Keys of other prefixes are never seen
(:mod:`.keyscan`).

With ``--idle-older-than`` a key is deleted only if it records when it was last written
(the newest entry of its token ring, ``lua/tokens.lua``) and that was longer ago than
the window, judged and deleted in one step on the server (``lua/purge_if_idle.lua``), so
nothing written within the window is ever deleted; a key that records no write this
version reads (another data format, or none) is kept. A locator goes once its thread is
gone, and is put back if a save brought its record back meanwhile.

Every per-key error is counted: the command does what it can, reports, and fails with
``purge: N keys failed (<code>)``. ``--dry-run`` prints the plan: every key that would
go (with ``--idle-older-than``, judged by the same script with its delete turned off),
and deletes nothing.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import ErrorCode, SessionError
from ..ids import validate_id
from ..keys import KeySpace
from ..link import AnyRedis, as_text, close_client
from ..scripts import script
from . import output
from .common import Target
from .keyscan import Failures, Key, KeyKinds, pipelined, scan_all, wrong_type

DATA_KINDS = ("thread", "items", "conversation")

IDLE_HELP = """\
Delete only keys idle for longer than SECONDS: keys that record when they
were last written (the newest entry of the token ring every write leaves in
its key, server time), judged and deleted in one step on the server, so
nothing written within the window is ever deleted. A key that records no last
write this version reads is kept and counted: neither its TTL (set by
whichever writer came last, with that writer's TTL) nor OBJECT IDLETIME (not
updated while a fork saves; an error under LFU) proves a key idle, on every
maxmemory policy. A locator is deleted once its thread is gone, and put back if
a save brought its record back meanwhile; the locators of a kept thread stay."""


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
    """Delete the thread of a thread id (as ``list threads`` prints it) or of a response
    id, with the store's ``delete_thread``: every response of it, every branch, and
    their locators. An id that names no thread of the prefix is taken as a response id."""
    store = target.store()
    try:
        held = await store._thread_ids(store.keys.thread(validate_id(ident)))
        deleted = await store.delete_thread(held[0] if held else ident)
    finally:
        await store.close()
    if not deleted:
        raise SessionError(ErrorCode.CHAIN_NOT_FOUND, f"no thread holds {ident!r}")
    if target.json:
        output.print_json({"deleted_thread_of": ident, "deleted_responses": deleted})
    else:
        print(f"deleted the thread of {ident}: {output.plural(deleted, 'response')}")
    return 0


@dataclass
class Plan:
    """What a purge will try to delete, and what it leaves and why."""

    data: list[Key] = field(default_factory=list)
    locators: list[tuple[Key, str]] = field(default_factory=list)
    """Each with the key of its thread ("": it holds none, being of another type)."""
    other: int = 0
    kept: Counter[str] = field(default_factory=Counter)
    failures: Failures = field(default_factory=Failures)

    def kinds(self) -> Counter[str]:
        return Counter([k.kind for k in self.data] + ["locator"] * len(self.locators))

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


async def _verdicts(client: AnyRedis, keys: list[Key], idle_ms: int, delete: bool, plan: Plan,
                    bar: Callable[[int], None]) -> list[Key]:
    """The keys purge_if_idle.lua finds idle (and deletes, with ``delete``); the others are
    counted as kept, by the script's verdict."""
    idle = []
    for key, (reply,) in zip(keys, await pipelined(client, keys, _judge(idle_ms, delete), 1, bar, "purge_if_idle")):
        if plan.failures.check(key.name, reply, "purge_if_idle"):
            verdict = as_text(reply[0])
            if verdict == "idle":
                idle.append(key)
            elif verdict != "gone":
                plan.kept[verdict] += 1
    return idle


async def _plan(client: AnyRedis, target: Target, idle_ms: int | None, progress: bool) -> Plan:
    with output.progress("scanning", enabled=progress) as step:
        found = await scan_all(client, KeyKinds(target.keys), lambda i, n, f: step(completed=f, extra=f"node {i + 1} of {n}"))
    plan = Plan(other=sum(1 for k in found if k.kind == "other"))
    data = [k for k in found if k.kind in DATA_KINDS]
    locators = [k for k in found if k.kind == "locator"]
    values = await pipelined(client, locators, lambda p, k: p.get(k.name), 1, None, "locators")
    for key, (value,) in zip(locators, values):
        if wrong_type(value):  # one of our keys holding something else: it goes in a full purge
            plan.locators.append((key, ""))
        elif value is not None and plan.failures.check(key.name, value, "GET"):
            plan.locators.append((key, target.keys.thread(as_text(value))))
    if idle_ms is None:
        plan.data = data
        return plan
    with output.progress("judging", len(data), enabled=progress) as step:
        plan.data = await _verdicts(client, data, idle_ms, False, plan, lambda n: step(advance=n))
    plan.locators = await _orphans(client, plan, {k.name for k in plan.data})
    return plan


async def _orphans(client: AnyRedis, plan: Plan, doomed: set[str]) -> list[tuple[Key, str]]:
    """The planned locators whose thread is ``doomed`` or gone; the others are kept."""
    ask = [thread for _, thread in plan.locators if thread and thread not in doomed]
    exists = {thread: reply for thread, (reply,) in
              zip(ask, await pipelined(client, ask, lambda p, k: p.exists(k), 1, None, "EXISTS"))}
    out = []
    for key, thread in plan.locators:
        here = exists.get(thread, 0)
        if not thread:
            plan.kept["unrecorded"] += 1
        elif thread in doomed or (plan.failures.check(thread, here, "EXISTS") and not here):
            out.append((key, thread))
        elif not isinstance(here, BaseException):
            plan.kept["locator"] += 1
    return out


def _kinds(counts: Counter[str]) -> str:
    names = {"items": "item session"}
    return ", ".join(output.plural(n, names.get(kind, kind)) for kind, n in sorted(counts.items())) or "nothing"


def _confirm(plan: Plan, target: Target) -> bool:
    prompt = f"delete {output.plural(plan.size, 'key')} ({_kinds(plan.kinds())}) of prefix {target.prefix!r}? [y/N] "
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


async def _unlinked(client: AnyRedis, keys: list[Key], plan: Plan, bar: Callable[[int], None]) -> list[Key]:
    replies = await pipelined(client, keys, _unlink, 1, bar, "UNLINK")
    return [key for key, (reply,) in zip(keys, replies) if plan.failures.check(key.name, reply, "UNLINK") and reply]


async def _delete(client: AnyRedis, target: Target, plan: Plan, idle_ms: int | None,
                  bar: Callable[[int], None]) -> Counter[str]:
    """Delete the plan: its data keys (the idle ones judged again as they go), then the
    locators whose thread is gone now (all of them in a full purge)."""
    if idle_ms is None:
        data, locators = await _unlinked(client, plan.data, plan, bar), plan.locators
    else:
        data = await _verdicts(client, plan.data, idle_ms, True, plan, bar)
        locators = await _orphans(client, plan, set())
    gone = {key.name for key in await _unlinked(client, [key for key, _ in locators], plan, bar)}
    back = await _repoint(client, target.keys, [(k, t) for k, t in locators if k.name in gone and t], plan.failures)
    return Counter([key.kind for key in data] + ["locator"] * (len(gone) - back))


async def _repoint(client: AnyRedis, ks: KeySpace, gone: list[tuple[Key, str]], failures: Failures) -> int:
    """A save racing the purge may have put a locator's record back after the thread
    was deleted: point its locator again (SET NX, the thread's TTL), as the store's own
    delete does. Returns how many."""
    def check(pipe: Any, kt: tuple[Key, str]) -> None:
        pipe.hexists(kt[1], "p:" + kt[0].ident)
        pipe.pttl(kt[1])

    facts = await pipelined(client, gone, check, 2, None, "HEXISTS")
    back = [(key, thread, pttl) for (key, thread), (held, pttl) in zip(gone, facts)
            if failures.check(thread, held, "HEXISTS") and held and isinstance(pttl, int)]

    def point(pipe: Any, item: tuple[Key, str, int]) -> None:
        key, thread, pttl = item
        pipe.set(key.name, thread[thread.index("{") + 1 : thread.index("}")], nx=True, px=pttl if pttl > 0 else None)

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
            _report(target, plan, None, idle_seconds)
            plan.failures.raise_if_any("purge --dry-run")
            return 0
        if plan.size and not yes and not _confirm(plan, target):
            output.note("purge cancelled: nothing was deleted")
            if target.json:
                output.print_json({"cancelled": True, "deleted_keys": 0})
            return 0
        with output.progress("deleting", plan.size, enabled=progress) as step:
            deleted = await _delete(client, target, plan, idle_ms, lambda n: step(advance=n))
    finally:
        await close_client(client)
    _report(target, plan, deleted, idle_seconds)
    plan.failures.raise_if_any("purge")
    return 0


def _report(target: Target, plan: Plan, deleted: Counter[str] | None, idle_seconds: float | None) -> None:
    """What a purge deleted, or with ``deleted`` None (--dry-run) every key it would delete
    now; then what it leaves."""
    would = [k.name for k in plan.data] + [k.name for k, _ in plan.locators]
    kept = {"kept_active": plan.kept["active"], "kept_unrecorded": plan.kept["unrecorded"],
            "kept_locators": plan.kept["locator"], "other_keys_left": plan.other,
            "failed": plan.failures.as_dict(), "idle_older_than": idle_seconds}
    if target.json:
        done = ({"dry_run": True, "would_delete": would, "by_kind": dict(plan.kinds())} if deleted is None else
                {"deleted_keys": sum(deleted.values()), "by_kind": dict(deleted)})
        output.print_json({"prefix": target.prefix, **done, **kept})
        return
    p = output.plural
    if deleted is None:
        print("\n".join(would + [""]))
        print(f"would delete {p(len(would), 'key')} of prefix {target.prefix!r} ({_kinds(plan.kinds())}); "
              "nothing was deleted")
    else:
        print(f"deleted {p(sum(deleted.values()), 'key')} of prefix {target.prefix!r} ({_kinds(deleted)})")
    if idle_seconds is not None:
        print(f"kept {p(plan.kept['active'], 'key')} written within the last {idle_seconds:g} s, "
              f"{p(plan.kept['unrecorded'], 'key')} that record no last write this version reads, and "
              f"{p(plan.kept['locator'], 'locator')} of kept threads")
    if plan.other:
        print(f"left {p(plan.other, 'key')} under '{target.prefix}:{{' that are not keys of this layout")
