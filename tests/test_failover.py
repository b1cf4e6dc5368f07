"""Through a master's failover (#11): ``kill -9`` of a cluster master under load.

A 6-node cluster (3 masters, 1 replica each, cluster-node-timeout 2 s) started
here; 16 coroutines (FAILOVER_WORKERS) on ONE cluster client save chains and add items,
half of them with ``replica_acks=1``. One master (the owner of worker 0's item
session) is killed with SIGKILL. What must hold:

- no raw exception: every failure is a SessionError with a 503 code;
- the calls recover without restarting the workers, within a bound derived from
  cluster-node-timeout (``RECOVERY_BOUND``);
- every write acknowledged with ``replica_acks=1`` is there after the promotion
  (the ones without are counted and printed, not asserted: on loopback the
  replica is usually current, but nothing promises it);
- the killed node, restarted, rejoins as a replica, after which ``replica_acks=1``
  writes to its shard succeed again (until then the promoted master has no
  replica, so they fail with ``session.backend.not_replicated``, as they must).

Also here: client options reach every node of a cluster client (a node stopped
until the calls end, a socket timeout from the URL or the config).
"""

from __future__ import annotations

import asyncio
import collections
import gc
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

import pytest

from chains import record
from faultservers import Freezer, freezer, key_slot, slot_owner  # noqa: F401 - fixture
from redis_sessions import RedisResponseSessionStore, RedisSession, SessionConfig, SessionError, create_item_session
from redis_sessions.errors import ErrorCode
from redis_sessions.link import close_client
from redis_sessions.client import from_url
from servers import REDIS_SERVER, ClusterServer

NODE_TIMEOUT_MS = 2000
BUDGET = 5.0
# A master is marked FAIL once it has not answered for node-timeout and the others
# agree (gossip: up to another node-timeout); its replica waits 500 ms + up to 500 ms
# (rank 0) before asking for votes, and an election lasts at most 2 x node-timeout;
# a call already in flight then needs at most its budget. Doubled, for a loaded machine.
RECOVERY_BOUND = 2 * (2 * NODE_TIMEOUT_MS / 1000 + 1.0 + 2 * NODE_TIMEOUT_MS / 1000 + BUDGET)
WORKERS = int(os.environ.get("FAILOVER_WORKERS", "16"))
"""Coroutines sharing one cluster client (the issue saw raw errors with 64: FAILOVER_WORKERS=64)."""


@dataclass
class Tally:
    """What one worker saw; times are time.monotonic()."""

    acks: int
    ok_at: list[float] = field(default_factory=list)
    failed: list[tuple[float, str]] = field(default_factory=list)
    raw: list[BaseException] = field(default_factory=list)
    saved: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)


async def _work(index: int, client: Any, prefix: str, acks: int, tally: Tally, stop: asyncio.Event) -> None:
    store = RedisResponseSessionStore(client, key_prefix=prefix, replica_acks=acks, timeout=BUDGET)
    session = RedisSession(f"w{index}", client=client, key_prefix=prefix, replica_acks=acks, timeout=BUDGET)
    parent: str | None = None
    pending_id: str | None = None
    n = 0
    while not stop.is_set():
        n += 1
        try:
            if n % 2:
                pending_id = pending_id or await store.new_response_id(parent)
                await store.save(record(pending_id, parent))  # the same record again after a failure
                tally.saved.append(pending_id)
                parent, pending_id = pending_id, None
            else:
                content = f"w{index}-{len(tally.added)}"  # the same items again after a failure
                await session.add_items([{"role": "user", "content": content}])
                tally.added.append(content)
            tally.ok_at.append(time.monotonic())
        except SessionError as exc:
            tally.failed.append((time.monotonic(), exc.code.value))
            await asyncio.sleep(0.05)
        except Exception as exc:  # the point of the test: there must be none
            tally.raw.append(exc)
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.005)


def _ok_after(tallies: list[Tally], moment: float, count: int) -> bool:
    return all(sum(t > moment for t in tally.ok_at) >= count for tally in tallies)


async def _until(condition: Any, deadline: float, what: str) -> None:
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


@pytest.fixture
def failover_cluster() -> Iterator[ClusterServer]:
    if not REDIS_SERVER:
        pytest.skip("redis-server not installed")
    cluster = ClusterServer(masters=3, replicas=1, node_timeout_ms=NODE_TIMEOUT_MS)
    yield cluster
    cluster.close()


@pytest.mark.real
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")
async def test_kill_9_of_a_master_under_load(failover_cluster: ClusterServer) -> None:
    cluster = failover_cluster
    prefix = f"fo{os.getpid()}"
    client = from_url(cluster.url, timeout=BUDGET)
    tallies = [Tally(acks=i % 2) for i in range(WORKERS)]
    stop = asyncio.Event()
    tasks = [asyncio.create_task(_work(i, client, prefix, tallies[i].acks, tallies[i], stop)) for i in range(WORKERS)]
    try:
        start = time.monotonic()
        await _until(lambda: _ok_after(tallies, start, 4), start + 60, "every worker to write")

        victim = slot_owner(cluster, key_slot(f"{prefix}:{{s:w0}}:items"))
        replica_ports = [n.port for n in cluster.nodes if n is not victim and cluster.role(n) == "slave"
                         and cluster.info(n).get("master_port") == str(victim.port)]
        assert len(replica_ports) == 1
        assert victim.proc is not None
        os.kill(victim.proc.pid, signal.SIGKILL)
        killed = time.monotonic()
        victim.proc.wait()

        # The replica is promoted, and every worker without replica_acks writes again.
        promoted = next(n for n in cluster.nodes if n.port == replica_ports[0])
        await _until(lambda: cluster.role(promoted) == "master", killed + RECOVERY_BOUND, "the promotion")
        promoted_at = time.monotonic()
        plain = [t for t in tallies if t.acks == 0]
        await _until(lambda: _ok_after(plain, promoted_at, 3), killed + RECOVERY_BOUND, "the calls to recover")
        last_plain_failure = max((at for t in plain for at, _ in t.failed if at > killed), default=killed)
        recovered_at = min(at for t in plain for at in t.ok_at if at > last_plain_failure)

        # The killed node, restarted, rejoins as the promoted master's replica; then
        # replica_acks=1 writes to that shard succeed again.
        victim.start()
        await asyncio.to_thread(cluster.wait_replicas, 3, 60)
        assert cluster.role(victim) == "slave"
        assert cluster.info(victim).get("master_port") == str(promoted.port)
        rejoined = time.monotonic()
        await _until(lambda: _ok_after(tallies, rejoined, 3), rejoined + 30, "every worker to write after the rejoin")
    finally:
        stop.set()
        await asyncio.gather(*tasks)

    raw = [exc for t in tallies for exc in t.raw]
    assert not raw, f"raw exceptions: {raw[:5]!r}"
    codes = collections.Counter(code for t in tallies for _, code in t.failed)
    assert set(codes) <= {"session.backend.unavailable", "session.backend.timeout", "session.backend.not_replicated"}
    assert all(code != "session.backend.not_replicated" for t in tallies if t.acks == 0 for _, code in t.failed)

    # Every acknowledged write, read back from the cluster as it is now.
    lost = {0: 0, 1: 0}
    reader = RedisResponseSessionStore(client, key_prefix=prefix, timeout=BUDGET)
    try:
        for index, tally in enumerate(tallies):
            for response_id in tally.saved:
                lost[tally.acks] += (await reader.get(response_id)) is None
            items = await RedisSession(f"w{index}", client=client, key_prefix=prefix, timeout=BUDGET).get_items()
            present = {item["content"] for item in items}  # type: ignore[typeddict-item]
            lost[tally.acks] += sum(content not in present for content in tally.added)
    finally:
        await close_client(client)
        # Connections that were mid-call when their node was killed are dropped by
        # redis-py's cluster client without being closed; collect them here, where the
        # warnings they raise are expected (see the mark), not in a later test.
        gc.collect()

    writes = {acks: sum(len(t.saved) + len(t.added) for t in tallies if t.acks == acks) for acks in (0, 1)}
    print(f"\nfailover: promoted {promoted_at - killed:.2f} s after kill -9; calls without replica_acks "
          f"recovered {recovered_at - killed:.2f} s after it (bound {RECOVERY_BOUND:.0f} s); "
          f"failed calls {dict(codes)}; acknowledged writes {writes}, lost {lost}")
    assert recovered_at - killed < RECOVERY_BOUND
    assert lost[1] == 0


# -- client options reach every node ----------------------------------------------


@pytest.mark.real
async def test_socket_timeouts_from_the_url_and_the_config_reach_a_stopped_node(redis_cluster: ClusterServer,
                                                                                freezer: Freezer) -> None:
    """The node that owns the session's key is stopped (SIGSTOP) until the calls have
    ended. With a 0.2 s socket timeout and no call budget, only that timeout can end a
    call: without it, the call would wait for the node, which answers only after the
    calls have ended. redis-py retries 3 times, so the call fails after about 4 x 0.2 s
    plus backoff, not 0.2 s."""
    prefix = f"busy{os.getpid()}"
    config = SessionConfig(url=redis_cluster.url, socket_timeout_seconds=0.2, timeout_seconds=None, key_prefix=prefix)
    sessions = [
        RedisSession.from_url("b", url=redis_cluster.url + "?socket_timeout=0.2", timeout=None, key_prefix=prefix),
        create_item_session(config, "b"),
        RedisSession.from_url("b", url=redis_cluster.url, timeout=None, key_prefix=prefix,
                              redis_kwargs={"socket_timeout": 0.2}),
    ]
    try:
        for session in sessions:
            await session.get_items()  # connected, slot map read
            assert {node.connection_kwargs.get("socket_timeout") for node in session.client.get_nodes()} == {0.2}
        owner = slot_owner(redis_cluster, key_slot(f"{prefix}:{{s:b}}:items"))
        freezer.freeze(owner)
        try:  # a generous deadline: a call left to wait for the node would otherwise never end
            outcomes = await asyncio.wait_for(asyncio.gather(*(s.get_items() for s in sessions), return_exceptions=True), 60)
        finally:
            freezer.thaw(owner)
        assert [getattr(o, "code", o) for o in outcomes] == [ErrorCode.BACKEND_TIMEOUT] * 3
    finally:
        for session in sessions:
            await session.close()


def test_the_call_budget_sets_every_node_s_socket_timeouts() -> None:
    client = from_url("redis+cluster://127.0.0.1:7000", timeout=2.0, redis_kwargs={"socket_connect_timeout": 0.1})
    kwargs = client.nodes_manager.connection_kwargs  # every ClusterNode is built from these
    assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"]) == (pytest.approx(0.45), 0.1)
