"""``redis+sentinel://`` URLs against a real master, replica and sentinel started here.

The store and the item session find the master through the sentinel, and find
the new one after ``SENTINEL FAILOVER`` promotes the replica, with no raw
exception and nothing written before the failover lost.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import time
from typing import Iterator

import pytest
import redis

from chains import record
from redis_sessions import SessionConfig, SessionError, create_item_session, create_response_session_store
from redis_sessions.cli.embedded import ping, stop_process
from servers import REDIS_SERVER, RedisProcess, free_port

pytestmark = pytest.mark.real

SERVICE = "sessions-main"


def command(port: int, *args: object):  # type: ignore[no-untyped-def]
    """One command to a server of this test's own, on a connection closed right after."""
    with redis.Redis(port=port, socket_timeout=2) as client:
        return client.execute_command(*args)


def replication(port: int) -> dict[str, object]:
    with redis.Redis(port=port, socket_timeout=2) as client:
        return client.info("replication")


class SentinelSetup:
    """A master, one replica and one sentinel (quorum 1), on free ports in a temporary folder."""

    def __init__(self) -> None:
        assert REDIS_SERVER, "no redis-server"
        self.dir = tempfile.mkdtemp(prefix="rs-sentinel-")
        self.master = RedisProcess(free_port(), self._sub("master"))
        self.master.start()
        self.replica = RedisProcess(free_port(), self._sub("replica"),
                                    ["--replicaof", "127.0.0.1", str(self.master.port)])
        self.replica.start()
        self.sentinel_port = free_port()
        conf = os.path.join(self._sub("sentinel"), "sentinel.conf")
        with open(conf, "w") as f:
            f.write(f"port {self.sentinel_port}\nbind 127.0.0.1\ndir {os.path.dirname(conf)}\n"
                    f"sentinel monitor {SERVICE} 127.0.0.1 {self.master.port} 1\n"
                    f"sentinel down-after-milliseconds {SERVICE} 1000\n"
                    f"sentinel failover-timeout {SERVICE} 5000\n")
        self.sentinel = subprocess.Popen([REDIS_SERVER, conf, "--sentinel"], stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        self._wait(lambda: ping(self.sentinel_port), "the sentinel did not start")
        self._wait(self._replica_in_sync, "the replica did not sync")
        self._wait(lambda: command(self.sentinel_port, "SENTINEL", "REPLICAS", SERVICE), "the sentinel did not see the replica")

    def _sub(self, name: str) -> str:
        path = os.path.join(self.dir, name)
        os.makedirs(path)
        return path

    @staticmethod
    def _wait(check, what: str, seconds: float = 20) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                if check():
                    return
            except (redis.RedisError, OSError):
                pass
            time.sleep(0.1)
        raise RuntimeError(what)

    def _replica_in_sync(self) -> bool:
        return replication(self.replica.port).get("master_link_status") == "up"

    @property
    def url(self) -> str:
        return f"redis+sentinel://127.0.0.1:{self.sentinel_port}/{SERVICE}"

    def master_port(self) -> int:
        _, port = command(self.sentinel_port, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE)
        return int(port)

    def failover(self) -> None:
        """Promote the replica and wait until the sentinel and both servers agree.

        Until the old master is demoted it still accepts writes, and those are lost
        when it resyncs from the new one (replication is asynchronous; that window is
        what WAIT-style acknowledgement is for). The test writes only once it is over.
        """
        command(self.sentinel_port, "SENTINEL", "FAILOVER", SERVICE)
        self._wait(lambda: self.master_port() == self.replica.port, "the sentinel did not promote the replica")
        self._wait(lambda: replication(self.replica.port).get("role") == "master",
                   "the replica did not become master")
        self._wait(lambda: replication(self.master.port).get("role") == "slave",
                   "the old master was not demoted")

    def close(self) -> None:
        stop_process(self.sentinel)
        self.replica.stop()
        self.master.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def sentinel_setup() -> Iterator[SentinelSetup]:
    setup = SentinelSetup()
    yield setup
    setup.close()


async def until_ok(call, seconds: float = 20.0):  # type: ignore[no-untyped-def]
    """Run ``call()`` until it succeeds; only coded SessionErrors may happen on the way."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return await call()
        except SessionError as exc:
            assert exc.http_status == 503, exc
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def test_a_sentinel_url_reaches_the_master_and_follows_a_failover(sentinel_setup, monkeypatch):
    monkeypatch.setenv("REDIS_SESSIONS_URL", sentinel_setup.url)
    monkeypatch.setenv("REDIS_SESSIONS_KEY_PREFIX", "sent")
    config = SessionConfig()  # from the environment: a url means Redis
    assert config.store_backend == "redis"
    store = create_response_session_store(config)
    session = create_item_session(config, "conv-1")
    try:
        first = record("resp_sentinel_1")
        await store.save(first)
        await session.add_items([{"role": "user", "content": "before"}])
        old_master = sentinel_setup.master_port()
        assert old_master == sentinel_setup.master.port
        # Replication is asynchronous: make sure the replica has both writes before promoting it.
        assert command(old_master, "WAIT", 1, 5000) == 1

        sentinel_setup.failover()

        assert (await until_ok(lambda: store.get(first.id))).id == first.id
        second = record("resp_sentinel_2", first.id)
        await until_ok(lambda: store.save(second))
        await until_ok(lambda: session.add_items([{"role": "user", "content": "after"}]))
        chain = await until_ok(lambda: store.resolve_chain(second.id))
        assert [r.id for r in chain.sessions] == [first.id, second.id]
        items = await until_ok(lambda: session.get_items())
        assert [i["content"] for i in items] == ["before", "after"]
        # The writes after the failover went to the promoted node.
        with redis.Redis(port=sentinel_setup.replica.port) as promoted:
            assert len(list(promoted.scan_iter("sent:*"))) >= 2
    finally:
        await store.close()
        await session.close()


@pytest.mark.parametrize("url, words", [
    ("redis+sentinel://127.0.0.1:1", "service name"),
    ("redis+sentinel://127.0.0.1:1/a/0/extra", "service name"),
    ("redis+sentinel://127.0.0.1:notaport/svc", "sentinel address"),
    ("redis+sentinel://127.0.0.1:1/svc?cluster=true", "not a cluster"),
])
def test_bad_sentinel_urls_are_refused_before_any_io(url, words):
    with pytest.raises(SessionError) as err:
        create_response_session_store(SessionConfig(url=url))
    assert err.value.http_status == 400 and words in err.value.message


def test_the_sync_store_finds_the_master_through_the_sentinel(sentinel_setup):
    """redis-py's sync Sentinel, built from the same URL parsing and options."""
    from redis_sessions import SyncResponseSessionStore

    with SyncResponseSessionStore.from_url(sentinel_setup.url, key_prefix="sync-sent") as store:
        first = record("resp_sync_sentinel_1")
        store.save(first)
        store.save(record("resp_sync_sentinel_2", first.id))
        assert [r.id for r in store.resolve_chain("resp_sync_sentinel_2").sessions] == [first.id, "resp_sync_sentinel_2"]
        with redis.Redis(port=sentinel_setup.master_port()) as master:
            assert len(list(master.scan_iter("sync-sent:*"))) >= 2
