"""``redis-sessions list`` pages are bounded: at most ``--limit`` ids, a thread of
thousands of responses read batch by batch with a cursor that stops inside it, and
nothing skipped while keys come and go between pages. On a real redis-server and
a real cluster; what holds only while nothing changes (each id listed once, a batch
read again from where the page stopped) on a private server that only this module
writes to, since the shared ones hold other tests' keys, which expire meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any, Iterator

import pytest
import redis as sync_redis

from redis_sessions import RedisResponseSessionStore
from redis_sessions.cli import main
from servers import StandaloneServer
from test_cli import cli, turn

pytestmark = [pytest.mark.slow, pytest.mark.real]

THREAD = 3001


@pytest.fixture(params=["redis", "cluster"])
def url(request: pytest.FixtureRequest) -> str:
    server = request.getfixturevalue("redis_server" if request.param == "redis" else "redis_cluster")
    value: str = server.url
    return value


@pytest.fixture(scope="module")
def private() -> Iterator[StandaloneServer]:
    server = StandaloneServer()
    yield server
    server.close()


def fresh_prefix() -> str:
    return f"page{uuid.uuid4().hex[:8]}"


def page(url: str, prefix: str, kind: str, limit: int, cursor: str | None) -> dict[str, Any]:
    result = cli("list", kind, "--limit", str(limit), "--url", url, "--prefix", prefix, "--json",
                 *(["--cursor", cursor] if cursor else []))
    assert result.returncode == 0, result.stderr
    body: dict[str, Any] = json.loads(result.stdout)
    return body


async def one_big_thread(url: str, prefix: str, size: int, others: int) -> tuple[list[str], list[str]]:
    """A thread of ``size`` responses (a root and its replies) and ``others`` one-response threads."""
    store = RedisResponseSessionStore.from_url(url, key_prefix=prefix, ttl_seconds=3600)
    try:
        root = await store.new_response_id()
        await store.save(turn(root, None, "root"))

        async def reply() -> str:
            rid = await store.new_response_id(root)
            await store.save(turn(rid, root, "reply"), expected_previous_response_id=root)
            return rid

        big = [root]
        for start in range(1, size, 100):
            big += await asyncio.gather(*(reply() for _ in range(min(100, size - start))))
        rest = []
        for _ in range(others):
            rid = await store.new_response_id()
            await store.save(turn(rid, None, "alone"))
            rest.append(rid)
    finally:
        await store.close()
    return big, rest


def every_page(url: str, prefix: str, kind: str, limit: int) -> tuple[list[str], list[str]]:
    """The ids of every page from the first, and the cursors the pages printed."""
    listed: list[str] = []
    cursors: list[str] = []
    while True:
        body = page(url, prefix, kind, limit, cursors[-1] if cursors else None)
        assert len(body["ids"]) <= limit
        listed += body["ids"]
        if body["cursor"] is None:
            return listed, cursors
        cursors.append(body["cursor"])
        assert len(cursors) < 100


async def test_a_thread_of_thousands_is_listed_page_by_page(url: str) -> None:
    prefix = fresh_prefix()
    big, rest = await one_big_thread(url, prefix, THREAD, 5)
    first = page(url, prefix, "responses", 1, None)
    assert len(first["ids"]) == 1 and first["cursor"] is not None
    listed, cursors = every_page(url, prefix, "responses", 400)
    assert set(listed) == set(big + rest)
    assert len(cursors) >= (THREAD + 5) // 400
    # the first page stops inside the big thread (it cannot hold all of it): its cursor names it
    assert f":{big[0].split('_')[1]}:" in cursors[0]


async def test_while_nothing_changes_each_id_is_listed_once(private: StandaloneServer) -> None:
    prefix = fresh_prefix()
    big, rest = await one_big_thread(private.url, prefix, THREAD, 30)
    listed, cursors = every_page(private.url, prefix, "responses", 400)
    assert sorted(listed) == sorted(big + rest) and len(cursors) == (THREAD + 30) // 400
    threads, cursors = every_page(private.url, prefix, "threads", 4)
    assert sorted(threads) == sorted(rid.split("_")[1] for rid in [big[0], *rest]) and len(cursors) == 31 // 4


async def test_a_page_reads_one_hscan_batch_of_a_thread_not_all_of_it(private: StandaloneServer) -> None:
    """The server counts the HSCANs one page makes: reading all of a 3,001-response
    thread (6,002 fields and more) takes many; a page of one id takes one batch."""
    prefix = fresh_prefix()
    await one_big_thread(private.url, prefix, THREAD, 0)
    client = sync_redis.Redis.from_url(private.url)
    try:
        def hscans() -> int:
            return int(client.info("commandstats").get("cmdstat_hscan", {}).get("calls", 0))

        before = hscans()
        body = page(private.url, prefix, "responses", 1, None)
        used = hscans() - before
    finally:
        client.close()
    assert len(body["ids"]) == 1
    assert used <= 2, f"one id took {used} HSCANs"


def test_nothing_that_stays_is_skipped_while_keys_come_and_go(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Pages of 3 threads, with threads saved and deleted between pages (so SCAN batches are
    read again after they changed, and the table grows): each page holds at most 3, and
    every thread there the whole time is listed."""
    prefix = fresh_prefix()

    async def save(n: int) -> list[str]:
        store = RedisResponseSessionStore.from_url(url, key_prefix=prefix, ttl_seconds=3600)
        try:
            ids = []
            for _ in range(n):
                rid = await store.new_response_id()
                await store.save(turn(rid, None, "t"))
                ids.append(rid)
            return ids
        finally:
            await store.close()

    async def delete(ids: list[str]) -> None:
        store = RedisResponseSessionStore.from_url(url, key_prefix=prefix, ttl_seconds=3600)
        try:
            for rid in ids:
                await store.delete_thread(rid)
        finally:
            await store.close()

    staying = {rid.split("_")[1] for rid in asyncio.run(save(40))}
    churn = asyncio.run(save(10))
    listed: list[str] = []
    cursor: str | None = None
    for pages in range(1, 200):
        code = main(["list", "threads", "--limit", "3", "--url", url, "--prefix", prefix, "--json",
                     *(["--cursor", cursor] if cursor else [])])
        out = capsys.readouterr().out
        assert code == 0
        body = json.loads(out)
        assert len(body["ids"]) <= 3
        listed += body["ids"]
        cursor = body["cursor"]
        if cursor is None:
            break
        asyncio.run(delete(churn[:2]))
        churn = churn[2:] + asyncio.run(save(5))
    assert cursor is None
    assert staying <= set(listed), sorted(staying - set(listed))


async def test_a_cursor_whose_batch_moved_lists_that_batch_again(private: StandaloneServer) -> None:
    """A page that stops inside a batch names where that batch ended; when the batch,
    read again, ends elsewhere (the key space changed under it: here, a cursor edited
    to say so), the next page lists the whole batch again rather than skip into it."""
    prefix, url = fresh_prefix(), private.url
    await one_big_thread(url, prefix, 300, 0)  # 600 fields and more: HSCAN goes in batches
    first = page(url, prefix, "responses", 1, None)
    node, scan, end, thread, hscan, hend, after = first["cursor"].split(":")
    assert after > first["ids"][0]  # the first id the page did not list: ids are taken in order
    assert page(url, prefix, "responses", 1, first["cursor"])["ids"] == [after]  # the same batch, on from there
    for moved in (f"{node}:{scan}:{end}:{thread}:{hscan}:{int(hend) + 1}:{after}",
                  f"{node}:{scan}:{int(end) + 1}:{thread}:{hscan}:{hend}:{after}"):
        assert page(url, prefix, "responses", 1, moved)["ids"] == first["ids"], moved
