"""``replica_acks``: a write is acknowledged only once that many replicas have it.

Against a real master and replica started here (and once against a cluster with
replicas): the write is on the replica when the call returns; a frozen replica
makes the call fail with ``session.backend.not_replicated`` (503) while the write
is on the master; NOSCRIPT is handled; and a write re-sent after its reply was
lost (FaultProxy ``drop``), or retried by the caller on a connection whose own
last write is older, is not acknowledged by a WAIT that has nothing of its own
to wait for.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from typing import Any, Iterator

import pytest
import redis

from async_front import AsyncFront
from chains import record
from faultservers import admin, fault_proxies, freezer, key_slot, migrate_keys, node_id, slot_owner  # noqa: F401
from redis_sessions import (
    RedisResponseSessionStore,
    RedisSession,
    SessionConfig,
    SessionError,
    create_item_session,
    create_response_session_store,
)
from redis_sessions.errors import ErrorCode
from servers import REDIS_SERVER, ClusterServer, RedisProcess, free_port

pytestmark = pytest.mark.real


class Pair:
    """A master and one replica of it, on free ports in a temporary folder."""

    def __init__(self) -> None:
        assert REDIS_SERVER, "no redis-server"
        self.dir = tempfile.mkdtemp(prefix="rs-acks-")
        self.master = RedisProcess(free_port(), self.dir + "/m")
        self.replica = RedisProcess(free_port(), self.dir + "/r")
        for node in (self.master, self.replica):
            os.makedirs(node.workdir)
        self.master.start()
        self.replica.extra = ["--replicaof", "127.0.0.1", str(self.master.port)]
        self.replica.start()
        deadline = time.monotonic() + 20
        while self.info(self.replica).get("master_link_status") != "up":
            assert time.monotonic() < deadline, "the replica did not sync"
            time.sleep(0.05)

    def command(self, node: RedisProcess, *args: object) -> object:
        with redis.Redis(port=node.port, socket_timeout=5) as client:
            return client.execute_command(*args)

    def info(self, node: RedisProcess) -> dict[str, str]:
        text = self.command(node, "INFO", "replication")
        if isinstance(text, dict):
            return {k: str(v) for k, v in text.items()}
        return dict(line.split(":", 1) for line in text.decode().splitlines() if ":" in line)  # type: ignore[union-attr]

    def close(self) -> None:
        self.replica.stop()
        self.master.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    if not REDIS_SERVER:
        pytest.skip("redis-server not installed")
    servers = Pair()
    yield servers
    servers.close()


async def _retried(call: Any, seconds: float = 30) -> None:
    """Until ``call()`` is not refused as not replicated (a replica just thawed may lag)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return await call()  # type: ignore[no-any-return]
        except SessionError as exc:
            if exc.code is not ErrorCode.BACKEND_NOT_REPLICATED or time.monotonic() > deadline:
                raise


async def _until_on_master(pair: Pair, key: str, field: str, seconds: float = 30) -> None:
    """Until the master has run a write sent as [write, ROLE, WAIT, ROLE]: the commands
    after it arrived with it, so WAIT is waiting (or, on a machine slower than WAIT's
    timeout, is over: the call's outcome is the same)."""
    deadline = time.monotonic() + seconds
    while pair.command(pair.master, "HEXISTS", key, field) != 1:
        assert time.monotonic() < deadline, "the write never reached the master"
        await asyncio.sleep(0.005)


def _prefix() -> str:
    return f"acks{time.monotonic_ns()}"


async def test_a_save_returns_once_the_replica_has_it(pair: Pair) -> None:
    store = RedisResponseSessionStore.from_url(pair.master.url, key_prefix=_prefix(), replica_acks=1)
    try:
        first = await store.new_response_id()
        await store.save(record(first))
        second = await store.new_response_id(first)
        await store.save(record(second, first))
        key = store.keys.thread(second.split("_")[1])
        # WAIT returned 1: the replica has applied both writes, no waiting needed here.
        assert pair.command(pair.replica, "HEXISTS", key, store.keys.data_field(second)) == 1
        assert await store.delete(second) is True
        assert pair.command(pair.replica, "HEXISTS", key, store.keys.data_field(second)) == 0
    finally:
        await store.close()


async def test_item_writes_return_once_the_replica_has_them(pair: Pair) -> None:
    session = RedisSession.from_url("s1", url=pair.master.url, key_prefix=_prefix(), replica_acks=1)
    try:
        key = session._items_key

        def same_on_both() -> bool:
            return pair.command(pair.master, "LRANGE", key, 0, -1) == pair.command(pair.replica, "LRANGE", key, 0, -1)

        await session.add_items([{"role": "user", "content": "one"}, {"role": "user", "content": "two"}])
        assert pair.command(pair.replica, "LLEN", key) == 6 and same_on_both()  # the stash, two items, the ring, the header
        assert (await session.pop_item()) == {"role": "user", "content": "two"}
        assert pair.command(pair.replica, "LLEN", key) == 5 and same_on_both()  # the stash (with the pop), one item, ring, header
        await session.clear_session()
        assert same_on_both()
    finally:
        await session.close()


async def test_a_frozen_replica_means_not_replicated_and_the_write_is_on_the_master(pair: Pair, freezer) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    store = RedisResponseSessionStore.from_url(pair.master.url, key_prefix=_prefix(), replica_acks=1,
                                               replica_ack_timeout=0.3)
    session = RedisSession.from_url("s2", url=pair.master.url, key_prefix=store.keys.prefix, replica_acks=1,
                                    replica_ack_timeout=0.3)
    # Another client, whose connection's last write the replica has (before the freeze).
    other = RedisResponseSessionStore.from_url(pair.master.url, key_prefix=store.keys.prefix, replica_acks=1,
                                               replica_ack_timeout=0.3)
    try:
        healthy = await other.new_response_id()
        await _retried(lambda: other.save(record(healthy)))  # the replica is healthy: only a slow machine says no
        first = await store.new_response_id()
        freezer.freeze(pair.replica)
        with pytest.raises(SessionError) as caught:
            await store.save(record(first))
        assert caught.value.code is ErrorCode.BACKEND_NOT_REPLICATED and caught.value.http_status == 503
        assert "on the master" in caught.value.message
        with pytest.raises(SessionError) as caught:
            await session.add_items([{"role": "user", "content": "hi"}])
        assert caught.value.code is ErrorCode.BACKEND_NOT_REPLICATED
        assert (await store.get(first)) is not None
        assert len(await session.get_items()) == 1
        # The caller retries through the other client: the save writes nothing (the record
        # is there), so WAIT alone, counting from that connection's own last write, would
        # count the frozen replica. The offsets do not.
        with pytest.raises(SessionError) as caught:
            await other.save(record(first))
        assert caught.value.code is ErrorCode.BACKEND_NOT_REPLICATED
        freezer.thaw(pair.replica)
        # A retry is safe: the same save again succeeds once the replica has caught up.
        await _retried(lambda: store.save(record(first)))
    finally:
        freezer.thaw(pair.replica)
        await other.close()
        await session.close()
        await store.close()


async def test_more_acks_than_replicas_is_not_replicated(pair: Pair) -> None:
    store = RedisResponseSessionStore.from_url(pair.master.url, key_prefix=_prefix(), replica_acks=2,
                                               replica_ack_timeout=0.1)
    try:
        with pytest.raises(SessionError) as caught:
            await store.save(record(await store.new_response_id()))
        assert caught.value.code is ErrorCode.BACKEND_NOT_REPLICATED
        assert "1 of the 2 replica(s)" in caught.value.message
    finally:
        await store.close()


async def test_noscript_is_sent_again_as_eval(pair: Pair) -> None:
    store = RedisResponseSessionStore.from_url(pair.master.url, key_prefix=_prefix(), replica_acks=1)
    session = RedisSession.from_url("s3", url=pair.master.url, key_prefix=store.keys.prefix, replica_acks=1)
    try:
        pair.command(pair.master, "SCRIPT", "FLUSH")
        await store.save(record(await store.new_response_id()))
        pair.command(pair.master, "SCRIPT", "FLUSH")
        await session.add_items([{"role": "user", "content": "hi"}])
        assert len(await session.get_items()) == 1
    finally:
        await session.close()
        await store.close()


async def test_a_resent_write_is_confirmed_by_offset_not_by_an_empty_wait(pair: Pair, fault_proxies, freezer) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    """The first copy runs and its reply is lost; the re-sent copy writes nothing (its
    token is there), so WAIT alone would count the frozen replica. ROLE's offsets do not."""
    proxy = fault_proxies("127.0.0.1", pair.master.port)
    store = RedisResponseSessionStore.from_url(proxy.url, key_prefix=_prefix(), replica_acks=1,
                                               replica_ack_timeout=0.3)
    try:
        first = await store.new_response_id()
        await _retried(lambda: store.save(record(first)))  # connects, and loads the script
        second = await store.new_response_id(first)
        freezer.freeze(pair.replica)
        proxy.arm("drop", match=b"EVALSHA")
        with pytest.raises(SessionError) as caught:
            await store.save(record(second, first))
        assert proxy.fired == 1
        assert caught.value.code is ErrorCode.BACKEND_NOT_REPLICATED
        freezer.thaw(pair.replica)
        await _retried(lambda: store.save(record(second, first)))
        # Healthy replica: the re-sent copy waits for the replica's own acknowledgement
        # (once a second), so give it room, in a budget that has room for it too.
        patient = RedisResponseSessionStore.from_url(proxy.url, key_prefix=store.keys.prefix, replica_acks=1,
                                                     replica_ack_timeout=5, timeout=20)
        try:
            third = await patient.new_response_id(second)
            await patient.save(record(third, second))  # connects, loads nothing new
            fourth = await patient.new_response_id(third)
            proxy.arm("drop", match=b"EVALSHA")
            await patient.save(record(fourth, third))  # re-sent, and confirmed by the replica's offset
            assert proxy.fired == 2
            key = store.keys.thread(fourth.split("_")[1])
            assert pair.command(pair.replica, "HEXISTS", key, store.keys.data_field(fourth)) == 1
        finally:
            await patient.close()
    finally:
        freezer.thaw(pair.replica)
        await store.close()


async def test_a_master_stalled_during_wait_is_a_session_error(pair: Pair, freezer) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    """The master stops (SIGSTOP) while WAIT waits for a frozen replica, longer than a
    read's timeout, and comes back before the call's budget is spent. The call ends as
    a SessionError (a raw ``int(None)`` TypeError escaped here once: redis-py answers
    None for a read given its own timeout)."""
    store = RedisResponseSessionStore.from_url(pair.master.url, key_prefix=_prefix(), replica_acks=1,
                                               replica_ack_timeout=0.5, timeout=10,
                                               redis_kwargs={"socket_timeout": 1.0})
    try:
        loaded = await store.new_response_id()
        await _retried(lambda: store.save(record(loaded)))  # connects, and loads the script
        response_id = await store.new_response_id()
        freezer.freeze(pair.replica)
        call = asyncio.ensure_future(store.save(record(response_id)))
        key = store.keys.thread(response_id.split("_")[1])
        await _until_on_master(pair, key, store.keys.data_field(response_id))  # WAIT waits for the frozen replica
        freezer.freeze(pair.master)
        await asyncio.sleep(2.0)  # past a read's 1 s and REPLAYED_WAIT's 1.5 s (a longer stall changes nothing)
        freezer.thaw(pair.master)
        with pytest.raises(SessionError) as caught:
            await call
        assert caught.value.code is ErrorCode.BACKEND_NOT_REPLICATED
        freezer.thaw(pair.replica)
        await _retried(lambda: store.save(record(response_id)))
    finally:
        freezer.thaw(pair.master)
        freezer.thaw(pair.replica)
        await store.close()


def test_settings_reach_the_store_and_the_session(pair: Pair) -> None:
    config = SessionConfig(url=pair.master.url, replica_acks=1, replica_ack_timeout_seconds=0.25)
    store = create_response_session_store(config)
    session = create_item_session(config, "s4")
    assert store.edge.acks is not None and (store.edge.acks.replicas, store.edge.acks.timeout) == (1, 0.25)  # type: ignore[attr-defined]
    assert session.edge.acks is not None and (session.edge.acks.replicas, session.edge.acks.timeout) == (1, 0.25)  # type: ignore[attr-defined]
    assert create_response_session_store(SessionConfig(url=pair.master.url)).edge.acks is None  # type: ignore[attr-defined]


@pytest.mark.parametrize("bad", [-1, True, "1", 1.5, 17])
def test_bad_replica_acks_are_refused(bad: object) -> None:
    with pytest.raises(SessionError) as caught:
        RedisResponseSessionStore.from_url("redis://127.0.0.1:1", replica_acks=bad)  # type: ignore[arg-type]
    assert caught.value.code is ErrorCode.INPUT_INVALID


@pytest.mark.parametrize("bad", [0, -1, None, "1", float("inf")])
def test_bad_replica_ack_timeouts_are_refused(bad: object) -> None:
    with pytest.raises(SessionError) as caught:
        RedisSession.from_url("s", url="redis://127.0.0.1:1", replica_acks=1, replica_ack_timeout=bad)  # type: ignore[arg-type]
    assert caught.value.code is ErrorCode.INPUT_INVALID


@pytest.fixture(scope="module")
def replicated_cluster() -> Iterator[ClusterServer]:
    if not REDIS_SERVER:
        pytest.skip("redis-server not installed")
    cluster = ClusterServer(masters=3, replicas=1)
    yield cluster
    cluster.close()


def _on(api: str, store_or_session: type, *args: Any, **kwargs: Any) -> Any:
    """``store_or_session.from_url(...)`` of the API asked for: the async class, or its sync
    twin behind async methods (tests/async_front.py), so one test covers both clients."""
    if api == "async":
        return store_or_session.from_url(*args, **kwargs)
    from redis_sessions import SyncRedisSession, SyncResponseSessionStore

    sync = {RedisResponseSessionStore: SyncResponseSessionStore, RedisSession: SyncRedisSession}[store_or_session]
    return AsyncFront(sync.from_url(*args, **kwargs))


ON_BOTH_CLIENTS = pytest.mark.parametrize("api", ["async", "sync"])


@ON_BOTH_CLIENTS
async def test_on_a_cluster_the_write_and_wait_go_to_the_key_owner(replicated_cluster: ClusterServer, api: str) -> None:
    prefix = _prefix()
    store = _on(api, RedisResponseSessionStore, replicated_cluster.url, key_prefix=prefix, replica_acks=1)
    session = _on(api, RedisSession, "s5", url=replicated_cluster.url, key_prefix=prefix, replica_acks=1)
    try:
        ids = [await store.new_response_id() for _ in range(12)]  # threads spread over the masters
        for response_id in ids:
            await store.save(record(response_id))
        for response_id in ids:
            assert (await store.get(response_id)) is not None
        for node in replicated_cluster.nodes:
            with redis.Redis(port=node.port, socket_timeout=5) as client:
                client.execute_command("SCRIPT", "FLUSH")
        await session.add_items([{"role": "user", "content": "hi"}])
        assert len(await session.get_items()) == 1
    finally:
        await session.close()
        await store.close()


@ON_BOTH_CLIENTS
async def test_on_a_cluster_a_moving_slot_is_followed(replicated_cluster: ClusterServer, api: str) -> None:
    """The key moved to another master while its slot is open (ASK), then the slot
    moved with it (MOVED, the client's map stale): each write waits for the replica
    of the master that took it. (The slot stays moved: the cluster is this module's.)"""
    cluster = replicated_cluster
    session = _on(api, RedisSession, "s6", url=cluster.url, key_prefix=_prefix(), replica_acks=1)
    try:
        key = session._items_key
        await session.add_items([{"role": "user", "content": "one"}])
        slot = key_slot(key)
        src = slot_owner(cluster, slot)
        dst = next(node for node in cluster.masters() if node is not src)
        replica = next(node for node in cluster.nodes if cluster.info(node).get("master_port") == str(dst.port))
        with admin(dst.port) as r:
            r.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", node_id(src))
        with admin(src.port) as r:
            r.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", node_id(dst))
        migrate_keys(src, dst, [key])
        await session.add_items([{"role": "user", "content": "two"}])  # ASK
        for master in [dst, src, *(node for node in cluster.masters() if node not in (src, dst))]:
            with admin(master.port) as r:
                r.execute_command("CLUSTER", "SETSLOT", slot, "NODE", node_id(dst))

        def on_the_replica() -> object:  # it serves the slot's keys once its master owns the slot
            with admin(replica.port) as r:
                r.execute_command("READONLY")
                return r.execute_command("LLEN", key)

        assert on_the_replica() == 6  # the stash, two items, the ring, the header
        await session.add_items([{"role": "user", "content": "three"}])  # MOVED
        assert on_the_replica() == 7  # three items now
        assert len(await session.get_items()) == 3
    finally:
        await session.close()


@ON_BOTH_CLIENTS
async def test_a_wait_cut_short_by_the_read_timeout_is_made_up_by_role(replicated_cluster: ClusterServer, api: str) -> None:
    """WAIT stays under a read's timeout (a read that times out is redis-py's to retry,
    not an answer); the rest of ``replica_ack_timeout`` is waited for by asking the
    key's master for ROLE."""
    store = _on(api, RedisResponseSessionStore, replicated_cluster.url, key_prefix=_prefix(), replica_acks=2,
                replica_ack_timeout=1.0, redis_kwargs={"socket_timeout": 0.5})
    try:
        response_id = await store.new_response_id()
        started = time.monotonic()
        with pytest.raises(SessionError) as caught:
            await store.save(record(response_id))
        assert time.monotonic() - started >= 1.0  # not WAIT's 0.25 s alone
        assert caught.value.code is ErrorCode.BACKEND_NOT_REPLICATED
        assert "1 of the 2 replica(s)" in caught.value.message
    finally:
        await store.close()


def test_the_sync_store_waits_for_the_replica_too(pair: Pair) -> None:
    """The same write path (replication.write_acked) on redis-py's sync client."""
    from redis_sessions import SyncResponseSessionStore, new_response_id

    with SyncResponseSessionStore.from_url(pair.master.url, key_prefix=_prefix(), replica_acks=1) as store:
        first = store.new_response_id()
        store.save(record(first))
        second = store.new_response_id(first)
        store.save(record(second, first))
        key = store.keys.thread(second.split("_")[1])
        assert pair.command(pair.replica, "HEXISTS", key, store.keys.data_field(second)) == 1
        assert store.delete(second) is True
        assert pair.command(pair.replica, "HEXISTS", key, store.keys.data_field(second)) == 0
    with SyncResponseSessionStore.from_url(pair.master.url, key_prefix=_prefix(), replica_acks=2,
                                           replica_ack_timeout=0.2) as two:
        with pytest.raises(SessionError) as err:
            two.save(record(new_response_id()))  # one replica only: the poll between ROLEs blocks, no loop
        assert err.value.code is ErrorCode.BACKEND_NOT_REPLICATED


def test_the_sync_conversation_store_and_item_session_wait_for_the_replica(pair: Pair) -> None:
    """The conversation and item writes take the same path on the sync client."""
    from redis_sessions import SyncConversationStore, SyncRedisSession

    prefix = _prefix()
    with SyncConversationStore.from_url(pair.master.url, key_prefix=prefix, replica_acks=1) as store:
        conv = store.create(items=[{"role": "user", "content": "hi"}])
        key = store.keys.conversation(conv.id)
        assert pair.command(pair.replica, "HEXISTS", key, "h") == 1
    with SyncRedisSession.from_url("acked", url=pair.master.url, key_prefix=prefix, replica_acks=1) as session:
        session.add_items([{"role": "user", "content": "hi"}])
        assert pair.command(pair.replica, "LLEN", session.core._items_key) == 5  # the stash, the item, the ring, the header
    with SyncRedisSession.from_url("acked2", url=pair.master.url, key_prefix=prefix, replica_acks=2,
                                   replica_ack_timeout=0.2) as two:
        with pytest.raises(SessionError) as err:
            two.add_items([{"role": "user", "content": "x"}])  # one replica only
        assert err.value.code is ErrorCode.BACKEND_NOT_REPLICATED
