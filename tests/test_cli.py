"""The ``redis-sessions`` command, run as a subprocess (``python -m redis_sessions``).

Data is saved first with the public API under a fresh prefix per test, then
read, counted and deleted through the CLI, on a real redis-server and on a
real cluster. The demo runs on both embedded servers and on both real ones.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from typing import Any, AsyncIterator

import msgspec
import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from redis_sessions import (
    RedisResponseSessionStore,
    StoredResponseRequestSnapshot,
    StoredResponseSession,
    StoredResponseSnapshot,
)
from redis_sessions.keys import KeySpace

pytestmark = [pytest.mark.slow]

ENV = {k: v for k, v in os.environ.items() if k != "REDIS_SESSIONS_URL"}


def cli(*args: str, stdin: Any = subprocess.DEVNULL, timeout: float = 120,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "redis_sessions", *args], capture_output=True, text=True,
                          stdin=stdin, env=env or ENV, timeout=timeout)


def ok_json(*args: str) -> Any:
    result = cli(*args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def assert_one_line_error(result: subprocess.CompletedProcess[str], code: int = 1) -> None:
    assert result.returncode == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(("error:", "usage:")), result.stderr


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# -- demo --------------------------------------------------------------------
DEMO = ["--workers", "3", "--conversations", "8", "--turns", "4"]
# 8 conversations cycle plain, branch, race, items: 2 of each. A branch adds
# turns - turns//2 = 2 turns; a racing conversation races on all 4 turns.
EXPECTED_TURNS = 8 * 4 + 2 * 2
EXPECTED_RACES = 2 * 4


def check_demo(summary: dict[str, Any]) -> None:
    assert summary["ok"] is True, summary["integrity"]
    assert summary["turns"] == summary["turns_expected"] == EXPECTED_TURNS
    assert summary["conflicts"] == summary["conflicts_expected"] == summary["races"] == EXPECTED_RACES
    assert summary["integrity"]["ok"] is True and summary["integrity"]["problem_count"] == 0
    assert summary["integrity"]["chains_checked"] >= 6
    assert summary["resolves"] > 0
    assert 1 <= summary["round_trips_per_resolve"]["max"] <= 2


@pytest.mark.parametrize("kind", ["fake", pytest.param("redis-server", marks=pytest.mark.real)])
def test_demo_embedded(kind: str) -> None:
    if kind == "redis-server" and not _has_redis_server():
        pytest.skip("redis-server is not installed")
    result = cli("demo", "--embedded", kind, "--json", *DEMO)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    check_demo(summary)
    assert ("fakeredis" if kind == "fake" else "redis-server") in summary["backend"]


def test_demo_human_output_names_the_server() -> None:
    result = cli("demo", "--embedded", "fake", "--workers", "2", "--conversations", "4", "--turns", "2")
    assert result.returncode == 0, result.stderr
    assert "using embedded fakeredis TCP server" in result.stderr
    assert "integrity      ok" in result.stdout and "Traceback" not in result.stderr


def _has_redis_server() -> bool:
    import shutil

    return shutil.which("redis-server") is not None


@pytest.fixture(params=[pytest.param("redis", marks=pytest.mark.real), pytest.param("cluster", marks=pytest.mark.real)])
def url(request: pytest.FixtureRequest) -> str:
    server = request.getfixturevalue("redis_server" if request.param == "redis" else "redis_cluster")
    value: str = server.url
    return value


def test_demo_on_server(url: str) -> None:
    prefix = f"cli{uuid.uuid4().hex[:8]}"
    summary = ok_json("demo", "--url", url, "--prefix", prefix, *DEMO)
    check_demo(summary)
    # the demo's records stay (with a TTL) for the other commands to look at
    stats = ok_json("stats", "--url", url, "--prefix", prefix)
    assert stats["responses"] == summary["responses_saved"] == EXPECTED_TURNS - 2 * 4  # item sessions save none
    assert stats["item_sessions"] == 2
    assert stats["no_ttl"] == {"responses": 0, "item_sessions": 0}


# -- data saved with the public API ----------------------------------------
def turn(rid: str, prev: str | None, text: str, status: str = "completed") -> StoredResponseSession:
    return StoredResponseSession(
        id=rid, previous_response_id=prev, created_at=int(time.time()), status=status,
        request=StoredResponseRequestSnapshot(input=text),
        response=StoredResponseSnapshot(id=rid, output=[{"type": "message", "role": "assistant",
                                                         "content": [{"type": "output_text", "text": "re: " + text}]}]),
    )


class Seeded:
    def __init__(self, url: str, prefix: str, ids: list[str], foreign: str, session_id: str) -> None:
        self.url, self.prefix, self.ids, self.foreign, self.session_id = url, prefix, ids, foreign, session_id

    def args(self) -> list[str]:
        return ["--url", self.url, "--prefix", self.prefix]


def client_for(url: str) -> Any:
    if url.startswith("redis+cluster://"):
        return RedisCluster.from_url(url.replace("redis+cluster://", "redis://"))
    return Redis.from_url(url)


@pytest.fixture
async def seeded(url: str) -> AsyncIterator[Seeded]:
    from redis_sessions.items import RedisSession

    prefix = f"cli{uuid.uuid4().hex[:8]}"
    store = RedisResponseSessionStore.from_url(url, key_prefix=prefix, ttl_seconds=3600)
    ids: list[str] = []
    prev = None
    for text in ("hello", "how are you", "bye"):
        rid = await store.new_response_id(prev)
        await store.save(turn(rid, prev, text), expected_previous_response_id=prev)
        ids.append(rid)
        prev = rid
    foreign = f"resp-foreign-{uuid.uuid4().hex[:6]}"
    await store.save(turn(foreign, None, "from elsewhere"), expected_previous_response_id=None)
    session_id = f"s-{uuid.uuid4().hex[:6]}"
    client = store.client
    session = RedisSession(session_id, client=client, key_prefix=prefix, ttl_seconds=3600)
    await session.add_items([{"type": "message", "role": "user", "content": f"item {i}"} for i in range(5)])
    await client.set(f"{prefix}:unrelated", "x")  # matches prefix:* but is not a key of the prefix
    await client.set(f"{prefix}x:{{t}}:chain", "x")  # another prefix
    await client.set(f"{prefix}:{{x}}:future", "x")  # under prefix:{ but not a key of this layout
    yield Seeded(url, prefix, ids, foreign, session_id)
    await store.close()


def test_show(seeded: Seeded) -> None:
    shown = ok_json("show", seeded.ids[1], *seeded.args())
    assert shown["record"]["id"] == seeded.ids[1]
    assert shown["record"]["previous_response_id"] == seeded.ids[0]
    assert 0 < shown["ttl_ms"] <= 3600_000 and shown["size_bytes"] > 50
    human = cli("show", seeded.foreign, *seeded.args())
    assert human.returncode == 0 and "from elsewhere" in human.stdout and "ttl" in human.stdout


def test_chain(seeded: Seeded) -> None:
    chain = ok_json("chain", seeded.ids[-1], *seeded.args())
    assert [s["id"] for s in chain["sessions"]] == seeded.ids
    texts = [i["content"] if isinstance(i["content"], str) else i["content"][0]["text"] for i in chain["input_items"]]
    assert texts == ["hello", "re: hello", "how are you", "re: how are you", "bye", "re: bye"]
    table = cli("chain", seeded.ids[-1], *seeded.args())
    assert table.returncode == 0 and all(rid in table.stdout for rid in seeded.ids)
    too_deep = cli("chain", seeded.ids[-1], "--max-depth", "2", *seeded.args())
    assert_one_line_error(too_deep, 4)
    assert "session.chain.depth_exceeded" in too_deep.stderr


def test_items(seeded: Seeded) -> None:
    found = ok_json("items", seeded.session_id, "--limit", "2", *seeded.args())
    assert [i["content"] for i in found["items"]] == ["item 3", "item 4"]
    assert found["item_count"] == 5 and found["corrupt_entries"] == 0 and 0 < found["ttl_ms"] <= 3600_000
    table = cli("items", seeded.session_id, *seeded.args())
    assert table.returncode == 0 and "item 0" in table.stdout


def test_stats(seeded: Seeded) -> None:
    stats = ok_json("stats", *seeded.args())
    assert stats["responses"] == 4 and stats["threads"] == 2
    assert stats["item_sessions"] == 1 and stats["items"] == 5
    assert stats["locators"] == 1 and stats["other_keys"] == 1  # prefix:{x}:future; never prefix:unrelated
    assert stats["wrong_type"] == {} and stats["unsupported"] == {} and stats["failed"] == {}
    assert stats["ttl"]["threads"]["<1h"] == 2 and stats["no_ttl"]["responses"] == 0
    assert stats["memory"]["estimated_bytes"] > 0
    human = cli("stats", *seeded.args())
    assert human.returncode == 0 and "estimate" in human.stdout


def test_delete(seeded: Seeded) -> None:
    assert ok_json("delete", seeded.ids[-1], *seeded.args()) == {"deleted": seeded.ids[-1]}
    assert_one_line_error(cli("show", seeded.ids[-1], *seeded.args()))
    assert_one_line_error(cli("delete", seeded.ids[-1], *seeded.args()))
    assert ok_json("show", seeded.ids[0], *seeded.args())["record"]["id"] == seeded.ids[0]


async def _keys(url: str, pattern: str) -> list[bytes]:
    client = client_for(url)
    try:
        if isinstance(client, RedisCluster):
            return [k async for k in client.scan_iter(match=pattern, target_nodes=RedisCluster.PRIMARIES)]
        return [k async for k in client.scan_iter(match=pattern)]
    finally:
        await client.aclose()


async def test_purge_refuses_without_yes_when_not_a_tty(seeded: Seeded) -> None:
    before = await _keys(seeded.url, f"{seeded.prefix}*")
    assert_one_line_error(cli("purge", *seeded.args()), 2)  # stdin is /dev/null
    assert sorted(await _keys(seeded.url, f"{seeded.prefix}*")) == sorted(before)


async def test_purge_all(seeded: Seeded) -> None:
    """Every key of the layout goes; a key under the prefix in no layout of this version
    (an old item-session metadata hash) and an old-layout locator (outside '<prefix>:{',
    so possibly another prefix's) are never deleted by guess."""
    client = client_for(seeded.url)
    try:
        tag = (await client.get(KeySpace(seeded.prefix).locator(seeded.foreign))).decode()
        await client.set(f"{seeded.prefix}:loc:{seeded.foreign}", tag)
        await client.hset(f"{seeded.prefix}:{{s:old}}:meta", "v", 1)
    finally:
        await client.aclose()
    result = ok_json("purge", "--yes", *seeded.args())
    # 2 threads, 1 locator, the item session's one key
    assert result["deleted_keys"] == 4 and result["other_keys_left"] == 2
    assert result["by_kind"] == {"thread": 2, "locator": 1, "items": 1}
    left = sorted(k.decode() for k in await _keys(seeded.url, f"{seeded.prefix}*"))
    assert left == sorted([f"{seeded.prefix}:unrelated", f"{seeded.prefix}x:{{t}}:chain", f"{seeded.prefix}:{{x}}:future",
                           f"{seeded.prefix}:loc:{seeded.foreign}", f"{seeded.prefix}:{{s:old}}:meta"])


def now_s() -> int:
    return int(time.time())


def ring(written_s: int) -> str:
    """A token ring (lua/tokens.lua) whose newest write was made at ``written_s`` (unix s)."""
    return f"{written_s:010d}{'0' * 16} S\n"


async def test_purge_idle(seeded: Seeded) -> None:
    ks = KeySpace(seeded.prefix)
    client = client_for(seeded.url)
    try:  # the minted thread's and the item session's last writes, as their rings record them, were 50 minutes ago
        await client.hset(ks.thread(seeded.ids[0].split("_")[1]), "ops", ring(now_s() - 3000))
        await client.lset(ks.session_items(seeded.session_id), -2, ring(now_s() - 3000))  # its ring, before its header
    finally:
        await client.aclose()
    result = ok_json("purge", "--yes", "--idle-older-than", "1800", *seeded.args())
    assert result["by_kind"] == {"thread": 1, "items": 1}
    # the foreign thread was written seconds ago
    assert result["kept_active"] == 1 and result["kept_unrecorded"] == 0 and result["kept_locators"] == 1
    assert_one_line_error(cli("show", seeded.ids[0], *seeded.args()))
    assert ok_json("show", seeded.foreign, *seeded.args())["record"]["id"] == seeded.foreign


@pytest.mark.parametrize("owner", [None, "tenant-1"], ids=["format-1", "owned-format-2"])
async def test_stats_and_purge_know_conversations(url: str, owner: str | None) -> None:
    """A conversation's hash is a key of the prefix: counted by stats, deleted by a plain
    purge, kept by an idle purge (its ring records a write seconds ago). The command line
    is an operator's: it sees, lists and judges an owner's keys (data format 2) alike."""
    from redis_sessions.conversations import RedisConversationStore

    prefix = f"cli{uuid.uuid4().hex[:8]}"
    args = ["--url", url, "--prefix", prefix]
    conversations = RedisConversationStore.from_url(url, key_prefix=prefix, ttl_seconds=3600)
    store = RedisResponseSessionStore.from_url(url, key_prefix=prefix, ttl_seconds=3600, conversations=conversations)
    try:
        conv = await conversations.create(items=[{"role": "user", "content": "hi"}], owner=owner)
        rid = await store.new_response_id(conversation_id=conv.id, owner=owner)
        await store.save(msgspec.structs.replace(turn(rid, None, "in a conversation"), conversation_id=conv.id),
                         owner=owner)
        stats = ok_json("stats", *args)
        assert stats["unsupported"] == {}
        assert (stats["conversations"], stats["threads"], stats["responses"], stats["locators"]) == (1, 1, 1, 1)
        assert stats["other_keys"] == 0 and stats["ttl"]["conversations"]["<1h"] == 1
        assert run_list("threads", args) == [f"c:{conv.id}"] and run_list("conversations", args) == [conv.id]
        kept = ok_json("purge", "--yes", "--idle-older-than", "1800", *args)
        assert kept["by_kind"] == {} and kept["kept_active"] == 2 and kept["kept_locators"] == 1
        gone = ok_json("purge", "--yes", *args)
        assert gone["by_kind"] == {"conversation": 1, "thread": 1, "locator": 1}
        assert await _keys(url, f"{prefix}*") == []
    finally:
        await store.close()
        await conversations.close()


def run_list(kind: str, args: list[str]) -> list[str]:
    ids: list[str] = ok_json("list", kind, *args)["ids"]
    return ids


@pytest.mark.real
async def test_purge_rechecks_idleness_when_it_deletes(redis_server: Any) -> None:
    """A key written to between the purge's plan and its delete must be kept; a key
    that records no last write is never idle, whatever its TTL, and neither is a key of
    another data format."""
    from redis_sessions.cli.keyscan import Key, pipelined
    from redis_sessions.cli.purge import _judge

    client = Redis.from_url(redis_server.url)
    ks = KeySpace(f"idle{uuid.uuid4().hex[:8]}")
    idle, fresh, unrecorded, later, bare, string = (ks.thread(t * 16) for t in "abcdef")
    await client.hset(idle, mapping={"h": "1 10 0 0 0", "d:x": 1, "ops": ring(now_s() - 2_000)})
    await client.hset(fresh, mapping={"h": "1 10 0 0 0", "d:x": 1, "ops": ring(now_s())})  # written after planning
    await client.hset(unrecorded, mapping={"h": "1 10 0 0 0", "d:x": 1})
    await client.pexpire(unrecorded, 1_000)  # nearly out of TTL: still not provably idle
    await client.hset(later, mapping={"h": "3 10 0 0 0", "d:x": 1, "ops": ring(now_s() - 2_000)})  # data format 3
    await client.hset(bare, mapping={"d:x": 1, "ops": ring(now_s() - 2_000)})  # no header: before format 1
    await client.set(string, 1)
    keys = [Key(k, "thread", "") for k in (idle, fresh, unrecorded, later, bare, string, ks.thread("9" * 16))]
    verdicts = [b"idle", b"active", b"unrecorded", b"unrecorded", b"unrecorded", b"unrecorded", b"gone"]
    judged = await pipelined(client, keys, _judge(1_800_000, False), 1)
    assert [d[0][0] for d in judged] == verdicts
    assert await client.exists(idle) == 1  # judging deletes nothing
    done = await pipelined(client, keys, _judge(1_800_000, True), 1)
    assert [d[0][0] for d in done] == verdicts
    assert await client.exists(idle, fresh, later, bare, string) == 4
    await client.delete(fresh, string, unrecorded, later, bare)
    await client.aclose()


async def test_a_write_counts_as_made_at_the_end_of_its_second(clocked: Any) -> None:
    """The ring keeps whole seconds: a thread written 0.3 s ago, late in a second, is
    active for a window of 0.5 s, and idle for it once 1.3 s have passed."""
    from redis_sessions.cli.keyscan import Key, pipelined
    from redis_sessions.cli.purge import _judge

    store = RedisResponseSessionStore(clocked.client, key_prefix=clocked.prefix)
    clocked.clock.now = 1_700_000_000.9
    rid = await store.new_response_id()
    await store.save(turn(rid, None, "late in its second"))
    key = Key(store.keys.thread(rid.split("_")[1]), "thread", "")
    clocked.clock.advance(0.3)
    assert (await pipelined(clocked.client, [key], _judge(500, True), 1))[0][0][0] == b"active"
    clocked.clock.advance(1.0)
    assert (await pipelined(clocked.client, [key], _judge(500, True), 1))[0][0][0] == b"idle"
    assert await store.get(rid) is None


# -- errors --------------------------------------------------------------------
def test_unknown_id_is_one_line(redis_server: Any) -> None:
    args = ["--url", redis_server.url, "--prefix", f"cli{uuid.uuid4().hex[:8]}"]
    for command in ("show", "chain", "delete"):
        result = cli(command, "resp_0123456789abcdef_0123456789abcdef0123456789abcdef", *args)
        assert_one_line_error(result)
        assert "session.chain.not_found" in result.stderr
    assert_one_line_error(cli("show", "has space", *args), 2)


def test_unreachable_server_is_one_line() -> None:
    for command in (["show", "resp_x"], ["stats"], ["demo", "--workers", "1"]):
        result = cli(*command, "--url", f"redis://127.0.0.1:{closed_port()}/0")
        assert_one_line_error(result, 3)
        assert "session.backend.unavailable" in result.stderr and "127.0.0.1" not in result.stderr


def test_wrong_url_is_one_line() -> None:
    for command in (["show", "resp_x"], ["purge", "--yes"], ["demo"]):
        result = cli(*command, "--url", "foo://x")
        assert_one_line_error(result, 2)
        assert "session.input.invalid: bad Redis URL" in result.stderr


def test_bad_usage_exits_2() -> None:
    result = cli("chain")
    assert_one_line_error(result, 2)
    assert result.stderr.startswith("error: session.input.invalid: redis-sessions chain: ") and "--help" in result.stderr
    assert cli("--help").returncode == 0
    assert "OBJECT IDLETIME" in cli("purge", "--help").stdout
