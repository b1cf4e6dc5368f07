"""Memory mode: the Redis stores on an in-process fakeredis server (redis_sessions/memory.py).

What is particular to it: who shares a server, that expired state is swept, that
the GodeX constructor saves from sync and async code, and that it refuses what
Redis refuses, as Redis does (the same scripts: there is no twin to disagree).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import fakeredis
import pytest

from chains import record
from conftest import Backend
from redis_sessions import (
    MemoryConversationStore,
    MemoryResponseSessionStore,
    MemorySession,
    RedisSession,
)
from redis_sessions import memory
from redis_sessions.items import Snapshot


def held(server: fakeredis.FakeServer) -> int:
    """Keys the fake server holds, expired or not (its internal dict: DBSIZE would sweep)."""
    return len(server.dbs[0]._dict)


def msgs(n: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"m{i}"} for i in range(n)]


async def test_expired_state_is_swept_without_being_touched_again(clocked: Backend,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Defect 9: expired threads and locators stayed until the same id was touched again
    (15,000 of each after three expired hours). Now every SWEEP_EVERY commands drop them."""
    monkeypatch.setattr(memory, "SWEEP_EVERY", 64)
    store = MemoryResponseSessionStore(server=clocked.server, ttl_seconds=60)
    for n in range(100):
        await store.save(record(f"ext-{n}"))  # foreign ids: a thread and a locator each
    assert held(clocked.server) == 200
    clocked.clock.advance(3 * 3600)
    other = MemoryResponseSessionStore(server=clocked.server, key_prefix="other", ttl_seconds=None)
    for n in range(40):
        await other.save(record(f"ext-other-{n}"))  # 40 x 3 commands: at least one sweep
    assert held(clocked.server) == 80  # the other prefix's live keys only


async def test_item_sessions_share_one_process_wide_server_and_stores_have_their_own() -> None:
    a, b = MemorySession("shared", key_prefix="mm"), MemorySession("shared", key_prefix="mm")
    await a.clear_session()
    await a.add_items(msgs(2))
    assert await b.get_items() == msgs(2)
    assert a.server is b.server is memory.SHARED_SERVER
    assert MemoryResponseSessionStore().server is not MemoryResponseSessionStore().server
    conversations = MemoryConversationStore()
    assert MemoryResponseSessionStore(conversations=conversations).server is conversations.server
    await a.clear_session()


def test_a_memory_session_works_across_event_loops_and_after_close() -> None:
    """A client per event loop, as from_url's: asyncio.run per request works, and close()
    releases the loop's client while the session stays usable."""
    s = MemorySession("loops", server=fakeredis.FakeServer())

    async def add_then_close(n: int) -> list[Any]:
        await s.add_items(msgs(1))
        await s.close()
        return await s.get_items()

    assert len(asyncio.run(add_then_close(1))) == 1
    assert len(asyncio.run(add_then_close(2))) == 2


async def test_a_fork_stays_on_its_sessions_server() -> None:
    s = MemorySession("src", server=fakeredis.FakeServer())
    await s.add_items(msgs(3))
    fork = await s.fork("dst")
    assert isinstance(fork, MemorySession) and fork.server is s.server
    assert await fork.get_items() == msgs(3)


@pytest.mark.parametrize("epoch", ["\ud800", "\udfff-tail", "é"])
async def test_replace_prefix_with_an_epoch_that_was_never_issued_changes_nothing(backend: Backend,
                                                                                  epoch: str) -> None:
    """Defect 13: the memory twin raised a raw UnicodeEncodeError for a lone surrogate,
    where Redis answered False. Both are the same script now: False, nothing changed."""
    sessions = [RedisSession("s", client=backend.client, key_prefix=backend.prefix)]
    if backend.name == "fakeredis":
        sessions.append(MemorySession("s", server=backend.server, key_prefix=backend.prefix + "m"))
    for s in sessions:
        await s.add_items(msgs(2))
        snap = await s.snapshot()
        forged = Snapshot(items=snap.items, count=snap.count, version=snap.version, epoch=epoch,
                          rewrites=snap.rewrites)
        assert await s.replace_prefix(forged, msgs(1)) is False
        assert await s.get_items() == msgs(2)


def _fork_and_call(call: Any, children: int = 10, deadline_s: float = 10.0) -> list[int]:
    """Fork ``children`` times while other threads are calling; each child makes ``call``
    once and exits 0 if it answered. Returns the exit codes; a child still running at the
    deadline (hung) is killed and counts as -9."""
    import os
    import signal
    import time
    import warnings

    codes: list[int] = []
    for _ in range(children):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12+: fork with threads
            pid = os.fork()
        if pid == 0:  # the child: one call, then out, without running pytest's teardown
            status = 1
            try:
                call()
                status = 0
            finally:
                os._exit(status)
        end = time.monotonic() + deadline_s
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                codes.append(os.waitstatus_to_exitcode(status))
                break
            if time.monotonic() > end:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                codes.append(-9)
                break
            time.sleep(0.01)
    return codes


@pytest.mark.parametrize("kind", ["responses", "session"])
def test_a_process_forked_while_another_thread_uses_memory_mode_works(kind: str) -> None:
    """Row 3 of issue 39: a child forked while another thread was inside a memory-mode call
    hung forever (10 of 10: fakeredis's server lock was held at the fork). Each child now
    gets the server as it was between two commands, and its own call answers."""
    import threading

    from redis_sessions import SessionConfig, create_sync_item_session, create_sync_response_session_store

    config = SessionConfig.parse(backend="memory")
    store: Any = (create_sync_response_session_store(config) if kind == "responses"
                  else create_sync_item_session(config, "forked"))
    call = (lambda: store.save(record(f"ext-{uuid.uuid4().hex}"))) if kind == "responses" \
        else (lambda: store.add_items(msgs(1)))
    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            call()

    workers = [threading.Thread(target=busy) for _ in range(2)]
    for worker in workers:
        worker.start()
    try:
        codes = _fork_and_call(call)
    finally:
        stop.set()
        for worker in workers:
            worker.join()
    assert codes == [0] * 10
