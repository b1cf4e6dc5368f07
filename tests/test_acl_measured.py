"""The ACL rules the README gives are measured, not guessed.

Every operation of the package and every command of the CLI runs as a user
that may run any command on the prefix's keys only; ``INFO commandstats``
then says which commands they sent. A second user with exactly that command
set (``-@all`` plus each one) must be able to run everything again, and the
README must list exactly that set.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from chains import record
from faultservers import FaultServer
from redis_sessions import (
    CompactionSession,
    RedisConversationStore,
    RedisResponseSessionStore,
    RedisSession,
    new_response_id,
)

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "rs"
# Sent by the admin steps of this test, or by redis-py when it connects, not by the package.
NOT_THE_PACKAGES = {"config|resetstat", "acl|setuser", "script|flush", "client|setinfo", "auth", "hello"}


async def every_operation(url: str) -> None:
    store = RedisResponseSessionStore.from_url(url, key_prefix=PREFIX, sliding_ttl=True)
    root = new_response_id()
    await store.save(record(root))
    child = await store.new_response_id(root)
    await store.save(record(child, root), expected_previous_response_id=root)
    await store.save(record("ext-acl-1"))  # a foreign id: a locator
    await store.save(record("ext-acl-2", "ext-acl-1"), expected_previous_response_id="ext-acl-1")
    assert (await store.get("ext-acl-2")) is not None and (await store.get(child)) is not None
    assert len((await store.resolve_chain(child)).sessions) == 2
    assert len((await store.resolve_chain("ext-acl-2")).sessions) == 2
    assert await store.delete("ext-acl-2") and await store.delete(child)
    # a chain past the inline budget (its records read by HMGET), then the whole thread deleted
    parent = None
    for i in range(4):
        rid = f"ext-acl-big-{i}"
        await store.save(record(rid, parent, payload="x" * 4000))
        parent = rid
    assert len((await store.resolve_chain(parent)).sessions) == 4
    assert await store.delete_thread(parent) == 4
    await store.close()

    # the Conversations store, and a response saved into a conversation
    conversations = RedisConversationStore.from_url(url, key_prefix=PREFIX, sliding_ttl=True)
    turns = RedisResponseSessionStore.from_url(url, key_prefix=PREFIX, conversations=conversations)
    conv = await conversations.create(items=[{"role": "user", "content": "hi"}], metadata={"k": "v"})
    added = await conversations.add_items(conv.id, [{"role": "assistant", "content": "hello"}])
    await conversations.update(conv.id, {"k": "w"})
    assert (await conversations.get(conv.id)).metadata == {"k": "w"}
    assert (await conversations.get_item(conv.id, added.data[0]["id"]))["content"] == "hello"
    await conversations.delete_item(conv.id, added.data[0]["id"])
    rid = await turns.new_response_id(conversation_id=conv.id)
    await turns.save(record(rid).__class__(**{**{f: getattr(record(rid), f) for f in record(rid).__struct_fields__},
                                              "conversation_id": conv.id}))
    assert len(await conversations.history(conv.id)) == 3
    assert len((await conversations.list_items(conv.id, limit=2)).data) == 2
    await conversations.delete(conv.id)
    await turns.close()
    await conversations.close()

    session = RedisSession.from_url("acl-items", url=url, key_prefix=PREFIX, sliding_ttl=True)
    await session.add_items([{"role": "user", "content": f"m{i}"} for i in range(12)])
    assert len(await session.get_items()) == 12 and len(await session.get_items(limit=3)) == 3
    assert (await session.pop_item()) is not None

    async def summarize(items):  # type: ignore[no-untyped-def]
        return [{"role": "assistant", "content": f"summary of {len(items)}"}]

    compacting = CompactionSession(session, summarize)
    await compacting.run_compaction({"force": True})
    fork = await session.fork("acl-items-fork")
    assert await fork.get_items()
    await session.clear_session()
    await session.close()


def every_cli_command(url: str, response_id: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDIS_SESSIONS_")}
    commands = [
        ["show", response_id], ["chain", response_id], ["items", "acl-items-fork"], ["stats"],
        *(["list", kind] for kind in ("threads", "responses", "sessions", "conversations")),
        ["purge", "--idle-older-than", "3600", "--yes"], ["delete", response_id],
        ["delete-thread", response_id], ["purge", "--yes"],
    ]
    for args in commands:
        out = subprocess.run([sys.executable, "-m", "redis_sessions", "--url", url, "--prefix", PREFIX, *args],
                             capture_output=True, text=True, timeout=60, env=env)
        # delete-thread after delete finds nothing left: exit 1 (not found), not a refusal
        assert out.returncode in ((0, 1) if args[0] == "delete-thread" else (0,)), (args, out.stdout, out.stderr)


def flush_scripts(server: FaultServer) -> None:
    """The first call of each script then takes the EVAL path. (Valkey counts a CONFIG GET
    for SCRIPT FLUSH in commandstats, so this runs before the stats are reset.)"""
    with server.admin() as admin:
        admin.execute_command("SCRIPT", "FLUSH")


async def run_everything(server: FaultServer, user: str, password: str) -> None:
    url = server.url_for(user, password)
    await every_operation(url)
    store = RedisResponseSessionStore.from_url(url, key_prefix=PREFIX)
    rid = new_response_id()
    await store.save(record(rid))
    await store.close()
    every_cli_command(url, rid)


def commands_used(server: FaultServer) -> set[str]:
    with server.admin() as admin:
        stats = admin.info("commandstats")
    used = {name.removeprefix("cmdstat_") for name, value in stats.items() if value.get("calls", 0)}
    return used - NOT_THE_PACKAGES  # this INFO is counted only after it answers


def readme_acl_commands() -> set[str]:
    readme = (ROOT / "docs" / "production.md").read_text()
    line = re.search(r"ACL SETUSER gateway on >\S+ resetkeys ~rs:\* -@all (.*)", readme)
    assert line, "docs/production.md's ACL SETUSER line"
    return {word[1:].lower() for word in line.group(1).split()}


async def test_the_readme_acl_rules_are_the_measured_minimum():
    with FaultServer() as server:
        server.acl_user("probe", "probe-pw", f"~{PREFIX}:*", "+@all")
        flush_scripts(server)
        with server.admin() as admin:
            admin.execute_command("CONFIG", "RESETSTAT")
        await run_everything(server, "probe", "probe-pw")
        measured = commands_used(server)
        assert {"evalsha", "eval", "scan"} <= measured, measured

        readme = readme_acl_commands()
        assert readme == measured, f"README lists {sorted(readme)}, the package used {sorted(measured)}"

        # Exactly that set is enough: every operation and command again as such a user.
        server.acl_user("gateway", "gw-pw", f"~{PREFIX}:*", "-@all", *[f"+{c}" for c in sorted(measured)])
        flush_scripts(server)
        await run_everything(server, "gateway", "gw-pw")
