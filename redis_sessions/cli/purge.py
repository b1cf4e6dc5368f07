"""Destructive commands: ``delete`` (one response, through the store) and ``purge``.

``purge`` deletes only keys that :class:`~redis_sessions.keys.KeySpace` builds
for the given prefix (threads, item sessions, locators); anything else that
happens to match ``<prefix>:*`` is left alone and reported.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import ErrorCode, SessionError
from ..redis_client import AnyRedis, close_client
from ..scripts import script
from . import output
from .common import Target
from .keyscan import KeyKinds, pipelined, scan_all

IDLE_HELP = """\
Delete only threads and item sessions idle for longer than SECONDS. Idle time
is read from the remaining TTL: every save (and, with sliding TTLs, every read)
resets a key's TTL to the store's TTL (--ttl, default 30 days), so
idle = TTL - PTTL is the time since the last write. Unlike OBJECT IDLETIME this
survives restarts and failovers (TTLs are replicated and persisted), is not
reset by this tool's own reads, and works under any maxmemory policy. Keys
without a TTL are never idle by this rule and are kept. A locator is deleted
with its thread, or when its thread no longer exists."""


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


@dataclass
class Plan:
    victims: list[str] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)
    kept_no_ttl: int = 0
    kept_active: int = 0
    other: int = 0
    locators: set[str] = field(default_factory=set)

    def add(self, key: str, kind: str) -> None:
        if kind == "locator":
            self.locators.add(key)
        self.victims.append(key)
        self.kinds[kind] = self.kinds.get(kind, 0) + 1


async def _plan(client: AnyRedis, target: Target, idle_ms: int | None, ttl_ms: int, progress: bool) -> Plan:
    kinds = KeyKinds(target.keys)
    with output.Progress("scanning", enabled=progress) as bar:
        found = await scan_all(client, kinds, lambda i, n, f: bar.update(f, f"node {i + 1}/{n}"))
    plan = Plan(other=sum(1 for _, kind, _ in found if kind == "other"))
    owned = [(key, kind, ident) for key, kind, ident in found if kind != "other"]
    if idle_ms is None:
        for key, kind, _ in owned:
            plan.add(key, kind)
        return plan
    data = [(k, kind, ident) for k, kind, ident in owned if kind != "locator"]
    with output.Progress("checking TTLs", len(data), enabled=progress) as bar:
        ttls = await pipelined(client, [k for k, _, _ in data], lambda p, k: p.pttl(k), 1, bar.advance, "PTTL")
    idle_sessions: set[str] = set()
    for (key, kind, ident), (pttl,) in zip(data, ttls):
        if not isinstance(pttl, int) or pttl == -2:
            continue
        if pttl == -1:
            plan.kept_no_ttl += 1
        elif ttl_ms - pttl > idle_ms:
            plan.add(key, kind)
            if kind != "thread":
                idle_sessions.add(ident)
        else:
            plan.kept_active += 1
    await _plan_locators(client, target, owned, plan, progress)
    return plan


async def _plan_locators(client: AnyRedis, target: Target, owned: list[tuple[str, str, str]],
                         plan: Plan, progress: bool) -> None:
    """Locators go with their thread, or when the thread is gone (checked now, not at scan time)."""
    locators = [key for key, kind, _ in owned if kind == "locator"]
    with output.Progress("checking locators", len(locators), enabled=progress) as bar:
        values = await pipelined(client, locators, lambda p, k: p.get(k), 1, bar.advance, "locators")
    doomed = set(plan.victims)
    threads = {key: target.keys.thread(v[0].decode()) for key, v in zip(locators, values) if isinstance(v[0], bytes)}
    to_check = [t for t in threads.values() if t not in doomed]
    exists = await pipelined(client, to_check, lambda p, k: p.exists(k), 1, None, "EXISTS")
    alive = {t for t, (n,) in zip(to_check, exists) if n}
    for key, thread in threads.items():
        if thread in doomed or thread not in alive:
            plan.add(key, "locator")


def _unlink(pipe: Any, key: str) -> None:
    # execute_command, not pipe.unlink: a cluster pipeline's unlink is a coroutine (multi-key aware).
    pipe.execute_command("UNLINK", key)


def _unlink_if_idle(max_pttl_ms: int) -> Callable[[Any, str], None]:
    """Queue lua/purge_if_idle.lua: the TTL is checked again at delete time, atomically.
    Sent as EVAL (a few hundred bytes) so a pipeline never meets NOSCRIPT."""
    source = script("purge_if_idle").source

    def queue(pipe: Any, key: str) -> None:
        pipe.execute_command("EVAL", source, 1, key, max_pttl_ms)

    return queue


def _confirm(plan: Plan, target: Target) -> bool:
    summary = ", ".join(f"{n} {kind}" for kind, n in sorted(plan.kinds.items()))
    prompt = f"delete {len(plan.victims)} keys ({summary}) of prefix {target.prefix!r} at {target.url}? [y/N] "
    try:
        sys.stderr.write(prompt)
        sys.stderr.flush()
        answer = sys.stdin.readline()
    except (EOFError, KeyboardInterrupt):
        return False
    return answer.strip().lower() in ("y", "yes")


async def purge(target: Target, idle_seconds: float | None, ttl_seconds: int, yes: bool) -> int:
    if not yes and not sys.stdin.isatty():
        raise SessionError(ErrorCode.INPUT_INVALID, "refusing to purge without --yes: stdin is not a terminal to confirm on")
    if idle_seconds is not None and idle_seconds < 0:
        raise SessionError(ErrorCode.INPUT_INVALID, "--idle-older-than must be zero or more seconds")
    progress = not target.json
    client = target.client()
    try:
        idle_ms = None if idle_seconds is None else int(idle_seconds * 1000)
        plan = await _plan(client, target, idle_ms, ttl_seconds * 1000, progress)
        if plan.victims and not yes and not _confirm(plan, target):
            raise SessionError(ErrorCode.INPUT_INVALID, "purge cancelled; nothing was deleted")
        with output.Progress("deleting", len(plan.victims), enabled=progress) as bar:
            if idle_ms is None:
                done = await pipelined(client, plan.victims, _unlink, 1, bar.advance, "UNLINK")
            else:
                data = [k for k in plan.victims if k not in plan.locators]
                done = await pipelined(client, data, _unlink_if_idle(ttl_seconds * 1000 - idle_ms), 1,
                                       bar.advance, "purge_if_idle")
                done += await pipelined(client, sorted(plan.locators), _unlink, 1, bar.advance, "UNLINK")
    finally:
        await close_client(client)
    deleted = sum(r[0] for r in done if isinstance(r[0], int))
    _report(target, plan, deleted, idle_seconds)
    return 0


def _report(target: Target, plan: Plan, deleted: int, idle_seconds: float | None) -> None:
    result: dict[str, Any] = {
        "prefix": target.prefix,
        "deleted_keys": deleted,
        "by_kind": plan.kinds,
        "kept_active": plan.kept_active,
        "kept_no_ttl": plan.kept_no_ttl,
        "other_keys_left": plan.other,
        "idle_older_than": idle_seconds,
    }
    if target.json:
        output.print_json(result)
        return
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(plan.kinds.items())) or "nothing"
    print(f"deleted {deleted} keys of prefix {target.prefix!r} ({kinds})")
    if idle_seconds is not None:
        print(f"kept {plan.kept_active} active keys and {plan.kept_no_ttl} keys without a TTL")
    if plan.other:
        print(f"left {plan.other} keys that match '{target.prefix}:*' but are not keys of this prefix")
