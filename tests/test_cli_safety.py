"""The ``redis-sessions`` command cannot hurt: each case found by trying the CLI,
run as a subprocess against real servers.

- idleness is what each key records (its last write), so nothing written within
  the idle window is deleted, whatever its TTL; the ``--help`` example keeps the
  demo's fresh data;
- no key of another prefix is read, counted or deleted (``t`` and ``t:loc``), nor any
  key outside this data format's layout (old-layout locators, ``<prefix>:loc:<id>``);
  keys of the layout in another data format are counted as unsupported, never read;
- a purge that keeps a thread keeps that thread's locators;
- no output shows the URL's password;
- per-key errors (an ACL's ``NOPERM``) fail the command with a count;
- ``--json`` errors are JSON; ``items`` reports corrupt entries and ``stats``
  wrong-type keys; a standalone URL to a cluster node is refused.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
import uuid
from typing import Any, Callable

import pytest
import redis as sync_redis

from faultservers import FaultServer, fault_servers  # noqa: F401 - fixture
from redis_sessions import RedisResponseSessionStore, SyncResponseSessionStore
from redis_sessions.cli import EPILOG
from redis_sessions.items import RedisSession
from redis_sessions.keys import KeySpace
from test_cli import ENV, assert_one_line_error, cli, client_for, turn

pytestmark = [pytest.mark.slow, pytest.mark.real]

DAY = 86400


def now_s() -> int:
    return int(time.time())


def ring(written_s: int) -> str:
    """A token ring (lua/tokens.lua) whose newest write was made at ``written_s`` (unix s)."""
    return f"{written_s:010d}{'0' * 16} S\n"


def fresh_prefix() -> str:
    return f"safe{uuid.uuid4().hex[:8]}"


def run_json(*args: str, code: int = 0) -> tuple[Any, subprocess.CompletedProcess[str]]:
    result = cli(*args, "--json")
    assert result.returncode == code, (result.stdout, result.stderr)
    return (json.loads(result.stdout) if result.stdout.strip() else None), result


def json_error(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The one line of a --json error: {"error": {"code", "message", "type"}}."""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    body: dict[str, Any] = json.loads(lines[0])["error"]
    assert set(body) == {"code", "message", "type"}
    return body


def interactive(args: list[str], at_prompt: Callable[[], None], answer: bytes = b"y\n") -> tuple[int, str, str]:
    """Run the CLI with a terminal on stdin; when it asks, call ``at_prompt`` and answer."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "redis_sessions", *args], stdin=slave,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    os.close(slave)
    assert proc.stderr is not None
    seen, deadline = b"", time.monotonic() + 60
    try:
        while b"[y/N]" not in seen:
            assert time.monotonic() < deadline, seen
            ready, _, _ = select.select([proc.stderr], [], [], 1)
            if ready:
                chunk = os.read(proc.stderr.fileno(), 4096)
                assert chunk, (seen, proc.wait())
                seen += chunk
        at_prompt()
        os.write(master, answer)
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out.decode(), (seen + err).decode()


async def all_values(url: str, pattern: str) -> dict[bytes, Any]:
    """Every key matching ``pattern`` with its type, value and TTL: to prove nothing changed."""
    client = client_for(url)
    out: dict[bytes, Any] = {}
    try:
        kwargs: dict[str, Any] = {"match": pattern}
        if url.startswith("redis+cluster://"):
            kwargs["target_nodes"] = client.PRIMARIES
        async for key in client.scan_iter(**kwargs):
            kind = await client.type(key)
            read = {b"hash": client.hgetall, b"list": lambda k: client.lrange(k, 0, -1), b"string": client.get}[kind]
            out[key] = (kind, await read(key), await client.pttl(key) > 0)
    finally:
        await client.aclose()
    return out


async def seed(url: str, prefix: str, *, session_ttl: int = 7 * DAY, store_ttl: int = 3600) -> dict[str, Any]:
    """A minted thread, a foreign chain (two locators) and an item session, written now."""
    store = RedisResponseSessionStore.from_url(url, key_prefix=prefix, ttl_seconds=store_ttl)
    try:
        minted = await store.new_response_id(None)
        await store.save(turn(minted, None, "hello"))
        await store.save(turn("ext-root", None, "from elsewhere"))
        await store.save(turn("ext-child", "ext-root", "more"), expected_previous_response_id="ext-root")
        session = RedisSession("s-1", client=store.client, key_prefix=prefix, ttl_seconds=session_ttl)
        await session.add_items([{"type": "message", "role": "user", "content": "just now"}])
        ks = KeySpace(prefix)
        foreign_thread = (await store.client.get(ks.locator("ext-root"))).decode()
        return {"minted": minted, "thread": ks.thread(minted.split("_")[1]), "foreign_thread": ks.thread(foreign_thread),
                "items": ks.session_items("s-1")}
    finally:
        await store.close()


@pytest.fixture(params=["redis", "cluster"])
def url(request: pytest.FixtureRequest) -> str:
    server = request.getfixturevalue("redis_server" if request.param == "redis" else "redis_cluster")
    value: str = server.url
    return value


# -- idleness -------------------------------------------------------------------------
async def test_nothing_written_within_the_idle_window_is_deleted(url: str) -> None:
    """An item session with a 7-day TTL written a second ago, and threads whose TTL is
    almost out: none of them recorded a write older than the window, so all stay."""
    prefix = fresh_prefix()
    keys = await seed(url, prefix)
    client = client_for(url)
    try:
        await client.pexpire(keys["foreign_thread"], 30_000)  # a TTL nearly out says nothing about writes
        await client.hset(keys["thread"], "ops", ring(now_s()))  # written now, on record
        await client.pexpire(keys["thread"], 60_000)
    finally:
        await client.aclose()
    before = await all_values(url, f"{prefix}:*")
    result, _ = run_json("purge", "--idle-older-than", "3600", "--yes", "--url", url, "--prefix", prefix)
    assert result["deleted_keys"] == 0 and result["by_kind"] == {}
    # each records a write seconds ago
    assert result["kept_active"] == 3 and result["kept_unrecorded"] == 0
    assert result["kept_locators"] == 2
    assert await all_values(url, f"{prefix}:*") == before


async def test_a_thread_that_records_an_old_last_write_goes_with_its_locators(url: str) -> None:
    prefix = fresh_prefix()
    keys = await seed(url, prefix)
    client = client_for(url)
    try:
        await client.hset(keys["foreign_thread"], "ops", ring(now_s() - 2 * 3600))
    finally:
        await client.aclose()
    result, _ = run_json("purge", "--idle-older-than", "3600", "--yes", "--url", url, "--prefix", prefix)
    assert result["by_kind"] == {"thread": 1, "locator": 2}
    left = await all_values(url, f"{prefix}:*")
    assert set(left) == {keys["thread"].encode(), keys["items"].encode()}


@pytest.mark.parametrize("kind", ["redis"])
async def test_the_help_example_keeps_the_demos_fresh_data(redis_server: Any, kind: str) -> None:
    prefix = fresh_prefix()
    args = ["--url", redis_server.url, "--prefix", prefix]
    demo = cli("demo", *args, "--workers", "2", "--conversations", "4", "--turns", "2", "--json")
    assert demo.returncode == 0, demo.stderr
    example = next(line for line in EPILOG.splitlines() if "redis-sessions purge" in line).split("(")[0].split()
    assert example[:2] == ["redis-sessions", "purge"] and "--dry-run" in example
    before = await all_values(redis_server.url, f"{prefix}:*")
    assert before
    result, _ = run_json(*example[1:], *args)
    assert result["would_delete"] == [] and result["kept_active"] > 0
    result, _ = run_json(*example[1:-1], "--yes", *args)  # and for real: the same
    assert result["deleted_keys"] == 0
    assert await all_values(redis_server.url, f"{prefix}:*") == before


async def test_a_purge_that_keeps_a_thread_keeps_its_locators(redis_server: Any) -> None:
    """The thread is idle when purge plans, and written before it deletes: purge's
    atomic re-check keeps it, and its locators must stay with it."""
    prefix = fresh_prefix()
    keys = await seed(redis_server.url, prefix)
    with sync_redis.Redis.from_url(redis_server.url) as r:
        r.hset(keys["foreign_thread"], "ops", ring(now_s() - 2 * 3600))

    def write_to_it() -> None:
        store = SyncResponseSessionStore.from_url(redis_server.url, key_prefix=prefix)
        try:
            store.save(turn("ext-later", "ext-child", "written while purge asked"))
        finally:
            store.close()

    code, out, err = interactive(["purge", "--idle-older-than", "3600", "--url", redis_server.url,
                                  "--prefix", prefix, "--json"], write_to_it)
    assert code == 0, err
    assert "delete 3 keys (2 locators, 1 thread)" in err
    result = json.loads(out)
    assert result["deleted_keys"] == 0 and result["kept_active"] >= 1 and result["kept_locators"] == 2
    for rid in ("ext-root", "ext-child", "ext-later"):
        shown, _ = run_json("show", rid, "--url", redis_server.url, "--prefix", prefix)
        assert shown["record"]["id"] == rid


# -- prefixes -------------------------------------------------------------------------
async def test_a_prefix_never_touches_another_whose_name_starts_alike(url: str) -> None:
    """Prefixes t, t:loc and t:x: purge, stats and delete on t see t's keys only."""
    base = fresh_prefix()
    for prefix in (base, f"{base}:loc", f"{base}:x"):
        await seed(url, prefix)
    mine, loc = RedisResponseSessionStore.from_url(url, key_prefix=base), RedisResponseSessionStore.from_url(
        url, key_prefix=f"{base}:loc")
    try:
        await mine.save(turn("loc:x", None, "mine"))  # the old layout gave these one locator key
        await loc.save(turn("x", None, "theirs"))
    finally:
        await mine.close()
        await loc.close()
    others = {**await all_values(url, f"{base}:loc:*"), **await all_values(url, f"{base}:x:*")}
    stats, _ = run_json("stats", "--url", url, "--prefix", base)
    assert stats["threads"] == 3 and stats["locators"] == 3 and stats["item_sessions"] == 1
    assert stats["other_keys"] == 0 and stats["unsupported"] == {}
    assert run_json("delete", "loc:x", "--url", url, "--prefix", base)[0] == {"deleted": "loc:x"}
    result, _ = run_json("purge", "--yes", "--url", url, "--prefix", base)
    # the deleted loc:x keeps a ring-only thread for a few minutes (a re-sent delete answers alike)
    assert result["by_kind"] == {"thread": 3, "locator": 2, "items": 1} and result["other_keys_left"] == 0
    assert {**await all_values(url, f"{base}:loc:*"), **await all_values(url, f"{base}:x:*")} == others
    assert await all_values(url, f"{base}:{{*") == {}
    shown, _ = run_json("show", "x", "--url", url, "--prefix", f"{base}:loc")
    assert shown["record"]["id"] == "x"


async def test_keys_this_version_cannot_read_are_counted_apart_and_never_judged(redis_server: Any) -> None:
    """Keys of the layout in another data format, or in none (written before format 1):
    stats counts them as unsupported and reads no further, list leaves them out, an
    idle purge keeps them whatever their ring says, and only a full purge deletes them.
    A key outside the layout (an old-layout locator '<prefix>:loc:<id>', which another
    prefix's key could look like, or an old metadata hash) is never counted or deleted."""
    prefix, url = fresh_prefix(), redis_server.url
    keys = await seed(url, prefix)
    ks = KeySpace(prefix)
    tag = keys["foreign_thread"].split("{")[1].split("}")[0]
    old = [f"{prefix}:loc:ext-child", f"{prefix}:{{s:s-1}}:meta"]
    unread = [ks.thread("0" * 16), ks.thread("1" * 16), ks.conversation("conv_2"), ks.session_items("bare")]
    with sync_redis.Redis.from_url(url) as r:
        r.set(old[0], tag)
        r.hset(old[1], "v", 1)
        r.hset(unread[0], mapping={"d:x": b"r", "p:x": b"", "ops": ring(now_s() - DAY)})  # records without a header
        r.hset(unread[1], mapping={"h": "3 1 0 0 0", "d:x": b"r", "p:x": b"", "ops": ring(now_s() - DAY)})
        r.hset(unread[2], mapping={"h": "3 0 0 0 0 0", "ops": ring(now_s() - DAY)})
        r.rpush(unread[3], b"\x81\xa4type\xa7message")  # items without a header
    args = ["--url", url, "--prefix", prefix]
    stats, _ = run_json("stats", *args)
    assert (stats["threads"], stats["responses"], stats["conversations"], stats["item_sessions"]) == (2, 3, 0, 1)
    assert {k: v["count"] for k, v in stats["unsupported"].items()} == {"thread": 2, "conversation": 1, "items": 1}
    assert set(stats["unsupported"]["thread"]["examples"]) == set(unread[:2])
    assert stats["keys"] == 10 and stats["other_keys"] == 1 and stats["locators"] == 2 and stats["failed"] == {}
    human = cli("stats", *args).stdout
    assert f"  unsupported: {unread[0]}\n" in human and f"  unsupported: {unread[3]}\n" in human
    listed, _ = run_json("list", "threads", *args)
    assert sorted(listed["ids"]) == sorted([keys["thread"].split("{")[1][:-7], tag])
    idle, _ = run_json("purge", "--idle-older-than", "3600", "--yes", *args)
    assert idle["deleted_keys"] == 0 and idle["kept_active"] + idle["kept_unrecorded"] == 7
    assert set(unread) <= {k.decode() for k in await all_values(url, f"{prefix}:*")}
    full, _ = run_json("purge", "--yes", *args)
    assert full["deleted_keys"] == 9 and full["other_keys_left"] == 1
    assert {k.decode() for k in await all_values(url, f"{prefix}:*")} == set(old)


# -- credentials ----------------------------------------------------------------------
SECRET = "S3cret-pw-4242"


def assert_no_secret(result: subprocess.CompletedProcess[str] | tuple[int, str, str]) -> None:
    text = result.stdout + result.stderr if isinstance(result, subprocess.CompletedProcess) else result[1] + result[2]
    assert SECRET not in text and SECRET.replace("-", "%2D") not in text, text


async def test_no_output_shows_the_password(fault_servers: Callable[..., FaultServer]) -> None:
    server = fault_servers()
    server.require_password(SECRET)
    url = server.url_for(None, SECRET)
    prefix = fresh_prefix()
    keys = await seed(url, prefix)
    minted = keys.get("minted")
    args = ["--url", url, "--prefix", prefix]
    runs = [
        cli("show", minted, *args), cli("show", minted, *args, "--json"),
        cli("chain", "ext-child", *args), cli("items", "s-1", *args, "--json"),
        cli("stats", *args), cli("stats", *args, "--json"),
        cli("show", "resp-missing", *args), cli("show", "resp-missing", *args, "--json"),
        cli("purge", *args),  # refused: no terminal
        cli("stats", "--url", url.replace(SECRET, SECRET + "x"), "--prefix", prefix),  # WRONGPASS
        cli("stats", "--prefix", prefix, "--url", f"redis://127.0.0.1:{server.port}/0?password={SECRET}x"),
        cli("stats", "--prefix", prefix, "--url", f"redis://default:{SECRET}@127.0.0.1:1/0"),  # unreachable
        cli("demo", "--url", url, "--workers", "1", "--conversations", "2", "--turns", "2"),
        cli("demo", "--url", url, "--workers", "1", "--conversations", "2", "--turns", "2", "--json"),
        cli("delete", "ext-child", *args),
    ]
    for result in runs:
        assert_no_secret(result)
    assert runs[0].returncode == 0 and runs[-1].returncode == 0 and runs[-2].returncode == 0
    assert "session.backend.denied" in runs[9].stderr and "responses" in runs[4].stdout
    for result in runs:  # nor a host name, an unreachable one included
        assert "127.0.0.1" not in result.stdout + result.stderr, result
    prompt = interactive(["purge", *args], lambda: None, b"n\n")
    assert prompt[0] == 0 and "purge cancelled: nothing was deleted" in prompt[2] and "127.0.0.1" not in prompt[2]
    assert_no_secret(prompt)
    assert_no_secret(cli("purge", "--yes", *args, "--json"))


# -- per-key errors -------------------------------------------------------------------
async def test_keys_an_acl_forbids_fail_the_command_with_a_count(fault_servers: Callable[..., FaultServer]) -> None:
    """A user who may SCAN everything but touch only other:* keys: purge and stats
    name how many keys failed and why, exit 1, and delete nothing."""
    server = fault_servers()
    prefix = fresh_prefix()
    await seed(server.url, prefix)
    server.acl_user("tenant", "tenant-pw", "~other:*", "+@all")
    before = await all_values(server.url, f"{prefix}:*")
    args = ["--url", server.url_for("tenant", "tenant-pw"), "--prefix", prefix]

    result, run = run_json("purge", "--yes", *args, code=3)
    assert result["deleted_keys"] == 0 and result["by_kind"] == {}
    assert result["failed"] == {"session.backend.denied": 5}
    error = json_error(run)
    assert error["code"] == "session.backend.denied" and error["message"].startswith("purge: 5 keys failed")

    human = cli("purge", "--yes", "--idle-older-than", "60", *args)
    assert_one_line_error(human, 3)
    assert re.search(r"error: session\.backend\.denied: purge: \d+ keys failed \(\d+ session\.backend\.denied\)",
                     human.stderr)
    stats = cli("stats", *args)
    assert_one_line_error(stats, 3)
    assert "stats: 5 keys failed" in stats.stderr
    assert await all_values(server.url, f"{prefix}:*") == before


# -- errors, corrupt and wrong-type data -------------------------------------------------
def test_json_errors_are_json(redis_server: Any) -> None:
    args = ["--url", redis_server.url, "--prefix", fresh_prefix()]
    missing = cli("show", "resp-missing", *args, "--json")
    assert missing.returncode == 1 and missing.stdout == ""
    assert json_error(missing)["code"] == "session.chain.not_found"
    usage = cli("chain", "--json", *args)
    assert usage.returncode == 2 and json_error(usage)["code"] == "session.input.invalid"
    down = cli("stats", "--json", "--url", "redis://127.0.0.1:1/0")
    assert down.returncode == 3 and json_error(down)["code"] == "session.backend.unavailable"
    bad = cli("items", "has space", *args, "--json")
    assert bad.returncode == 2 and json_error(bad)["code"] == "session.id.invalid"
    never = cli("items", "never", *args, "--json")
    assert never.returncode == 1 and json_error(never)["code"] == "not_found" and never.stdout == ""


async def test_items_reports_corrupt_entries_and_wrong_types(redis_server: Any) -> None:
    prefix = fresh_prefix()
    ks = KeySpace(prefix)
    client = client_for(redis_server.url)
    try:
        for sid, good in (("all-bad", 0), ("some-bad", 1)):
            session = RedisSession(sid, client=client, key_prefix=prefix, ttl_seconds=3600)
            await session.add_items([{"type": "message", "role": "user", "content": f"item {i}"} for i in range(3)])
            for index in range(2 + good, 5):  # the items are at 2 .. n+1, after the stash
                await client.lset(ks.session_items(sid), index, b"\xc1 not msgpack")
        await client.set(ks.session_items("a-string"), "x")
    finally:
        await client.aclose()
    args = ["--url", redis_server.url, "--prefix", prefix]
    found, _ = run_json("items", "all-bad", *args)
    assert found["items"] == [] and found["corrupt_entries"] == 3
    human = cli("items", "all-bad", *args)
    assert human.returncode == 0 and "0 items" in human.stdout
    assert "3 stored entries of 3 do not decode (corrupt): get_items skips them" in human.stdout
    found, _ = run_json("items", "some-bad", *args)
    assert [i["content"] for i in found["items"]] == ["item 0"] and found["corrupt_entries"] == 2
    assert "2 stored entries of 3 do not decode" in cli("items", "some-bad", *args).stdout
    never = cli("items", "never", *args)
    assert_one_line_error(never, 1)
    assert "error: not_found: item session 'never' was not found" in never.stderr
    wrong = cli("items", "a-string", *args)
    assert_one_line_error(wrong, 4)
    assert "session.record.corrupt" in wrong.stderr and "holds a Redis string" in wrong.stderr


async def test_stats_reports_keys_of_the_wrong_type(url: str) -> None:
    prefix = fresh_prefix()
    await seed(url, prefix)
    ks = KeySpace(prefix)
    client = client_for(url)
    try:
        await client.set(ks.thread("0" * 16), "a string where a thread should be")
        await client.hset(ks.session_items("h"), "f", 1)
        await client.rpush(ks.locator("ext-l"), "x")
    finally:
        await client.aclose()
    stats, _ = run_json("stats", "--url", url, "--prefix", prefix)
    assert stats["threads"] == 2 and stats["responses"] == 3 and stats["item_sessions"] == 1
    assert stats["locators"] == 2
    assert {k: v["count"] for k, v in stats["wrong_type"].items()} == {"thread": 1, "items": 1, "locator": 1}
    assert f"{ks.thread('0' * 16)} (string)" in stats["wrong_type"]["thread"]["examples"]
    human = cli("stats", "--url", url, "--prefix", prefix)
    assert human.returncode == 0 and "wrong type: " + ks.thread("0" * 16) in human.stdout


# -- a cluster node behind a standalone URL ------------------------------------------------
async def test_a_standalone_url_to_a_cluster_node_is_refused(redis_cluster: Any) -> None:
    prefix = fresh_prefix()
    keys = await seed(redis_cluster.url, prefix)
    before = await all_values(redis_cluster.url, f"{prefix}:*")
    plain = f"redis://127.0.0.1:{redis_cluster.ports[0]}/0"
    args = ["--url", plain, "--prefix", prefix]
    for command in (["purge", "--yes"], ["purge", "--yes", "--idle-older-than", "0"], ["stats"],
                    ["show", keys["minted"]], ["delete", keys["minted"]], ["items", "s-1"],
                    ["demo", "--workers", "1", "--conversations", "1", "--turns", "1"]):
        result = cli(*command, *args)
        assert_one_line_error(result, 2)
        assert "session.input.invalid" in result.stderr and "redis+cluster://" in result.stderr
    assert json_error(cli("purge", "--yes", *args, "--json"))["code"] == "session.input.invalid"
    assert await all_values(redis_cluster.url, f"{prefix}:*") == before


@pytest.mark.parametrize("idle_ms", [None, 0])
async def test_a_locator_is_put_back_if_a_save_lands_while_purge_deletes_it(
        redis_server: Any, monkeypatch: pytest.MonkeyPatch, idle_ms: int | None) -> None:
    """Purge sees the thread gone and deletes the locator; a save of that id lands in
    between (its SET NX found the old locator and left it). Purge looks again and
    points the locator back, as the store's own delete does, in a full purge and in
    an idle one."""
    from redis.asyncio import Redis

    from redis_sessions.cli import purge
    from redis_sessions.cli.common import Target, settings
    from redis_sessions.cli.keyscan import Key

    prefix = fresh_prefix()
    ks = KeySpace(prefix)
    tag = "0123456789abcdef"
    client = Redis.from_url(redis_server.url)
    await client.set(ks.locator("ext-x"), tag)
    real = purge.pipelined

    async def pipelined(c: Any, keys: Any, queue: Any, per_key: Any, on_done: Any = None, where: str = "") -> Any:
        done = await real(c, keys, queue, per_key, on_done, where)
        if where == "UNLINK" and keys:  # the racing save's script, right after the locator went
            await client.hset(ks.thread(tag), mapping={"d:ext-x": b"r", "p:ext-x": b""})
            await client.pexpire(ks.thread(tag), 60_000)
        return done

    monkeypatch.setattr(purge, "pipelined", pipelined)
    plan = purge.Plan(locators=[(Key(ks.locator("ext-x"), "locator", "ext-x"), ks.thread(tag))])
    deleted = await purge._delete(client, Target(settings(redis_server.url, prefix)), plan, idle_ms, lambda n: None)
    assert deleted == {} and len(plan.failures) == 0
    assert await client.get(ks.locator("ext-x")) == tag.encode()
    assert 0 < await client.pttl(ks.locator("ext-x")) <= 60_000
    await client.delete(ks.locator("ext-x"), ks.thread(tag))
    await client.aclose()


async def test_threads_the_store_wrote_go_once_idle_and_not_before(url: str) -> None:
    """Saves leave the server's time in their thread's token ring: no hand-set ring here.
    The ring keeps whole seconds and a write counts as made at the end of its second, so
    after 2.1 s the threads and the item session are idle for a window of 1 s, and go,
    the threads with their locators."""
    prefix = fresh_prefix()
    keys = await seed(url, prefix)
    kept, _ = run_json("purge", "--idle-older-than", "60", "--yes", "--url", url, "--prefix", prefix)
    assert kept["deleted_keys"] == 0 and kept["kept_active"] == 3
    time.sleep(2.1)
    gone, _ = run_json("purge", "--idle-older-than", "1", "--yes", "--url", url, "--prefix", prefix)
    assert gone["by_kind"] == {"thread": 2, "locator": 2, "items": 1} and gone["kept_unrecorded"] == 0
    client = client_for(url)
    try:
        assert not await client.exists(keys["thread"], keys["foreign_thread"], keys["items"])
    finally:
        await client.aclose()
