"""The synchronous item session (issue #31): what only the sync API can show.

Its behaviour is the async session's (tests/test_items.py runs over both APIs); here:
every public method completes on the first ``send`` (no loop), random operations give
the same results on both APIs, close() of a session built from a URL, threads sharing
one session, a lost reply, and the worker example.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import uuid
from typing import Any

import fakeredis
import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faultproxy import FaultProxy
from redis_sessions import ErrorCode, RedisSession, SessionError, SyncRedisSession
from redis_sessions.items.redis import _POP


def msgs(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"type": "message", "role": "assistant", "content": f"m{i}"} for i in range(start, start + n)]


def first_send(call: Any) -> Any:
    assert inspect.iscoroutine(call)
    try:
        call.send(None)
    except StopIteration as done:
        return done.value
    call.close()
    raise AssertionError("suspended")


def test_every_public_method_completes_on_the_first_send():
    session = SyncRedisSession("first", client=fakeredis.FakeRedis(), key_prefix="first")
    core = session.core
    assert first_send(core.add_items(msgs(5))) is None
    assert first_send(core.add_items(msgs(1, 5), idempotency_key="k1")) is None
    assert len(first_send(core.get_items())) == 6
    assert len(first_send(core.get_items(2))) == 2
    assert first_send(core.pop_item())["content"] == "m5"
    assert first_send(core.ping()) is True
    fork = first_send(core.fork("first-fork", upto=3))
    assert len(first_send(fork.get_items())) == 3
    snap = first_send(core.snapshot())
    assert first_send(core.replace_prefix(snap, msgs(1, 9))) is True
    with pytest.raises(SessionError):
        first_send(core.fork("first-fork"))  # a refusal, raised on the first send too
    assert first_send(core.clear_session()) is None
    assert first_send(core.close()) is None
    public = {name for name, _ in inspect.getmembers(SyncRedisSession, inspect.isfunction)
              if not name.startswith("_")}
    assert public == {"get_items", "add_items", "pop_item", "clear_session", "ping", "fork", "snapshot",
                      "replace_prefix", "close"}


def test_the_sync_session_reads_what_the_async_one_wrote():
    server = fakeredis.FakeServer()
    sync = SyncRedisSession("shared", client=fakeredis.FakeRedis(server=server), key_prefix="both")
    sync.add_items(msgs(3))
    fork = sync.fork("shared-fork", upto=2)
    assert isinstance(fork, SyncRedisSession) and [i["content"] for i in fork.get_items()] == ["m0", "m1"]

    async def read() -> list[Any]:
        client = fakeredis.FakeAsyncRedis(server=server)
        try:
            return await RedisSession("shared", client=client, key_prefix="both").get_items()
        finally:
            await client.aclose()

    assert [i["content"] for i in asyncio.run(read())] == ["m0", "m1", "m2"]
    with pytest.raises(SessionError) as err:
        SyncRedisSession("x", client=fakeredis.FakeAsyncRedis())  # type: ignore[arg-type]
    assert err.value.code is ErrorCode.INPUT_INVALID
    with pytest.raises(SessionError) as err:
        RedisSession("x", client=fakeredis.FakeRedis())  # type: ignore[arg-type]
    assert "SyncRedisSession" in err.value.message


@pytest.mark.real
def test_a_session_from_a_url_is_closed_by_close(redis_server):
    session = SyncRedisSession.from_url("closing", url=redis_server.url, key_prefix=f"cl{uuid.uuid4().hex[:6]}")
    with session:
        session.add_items(msgs(1))
        assert session.ping() is True
    with pytest.raises(SessionError) as err:
        session.get_items()
    assert err.value.code is ErrorCode.CLIENT_CLOSED and isinstance(err.value, RuntimeError)
    given = redis.Redis.from_url(redis_server.url)
    kept = SyncRedisSession("kept", client=given, key_prefix="kept")
    kept.close()  # a client it was given: left open, the session usable
    assert kept.ping() is True
    given.close()


OPS = st.lists(st.tuples(st.sampled_from(["add", "add_keyed", "get", "get_all", "pop", "clear", "fork", "compact"]),
                         st.integers(0, 5)), min_size=1, max_size=25)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_random_operations_give_the_same_results_on_both_apis(ops):
    """Each operation on the async session (prefix ``a``) and on the sync one (``s``), on
    one fakeredis server: the same results and errors, and the same items at the end."""
    server = fakeredis.FakeServer()
    sync = SyncRedisSession("d", client=fakeredis.FakeRedis(server=server), key_prefix="s")

    def outcome(call: Any) -> Any:
        try:
            result = call()
        except SessionError as exc:
            return ("error", exc.code)
        if isinstance(result, (RedisSession, SyncRedisSession)):
            return ("session", result.session_id)
        return ("ok", result)

    async def run() -> None:
        client = fakeredis.FakeAsyncRedis(server=server)
        session = RedisSession("d", client=client, key_prefix="a")
        for n, (op, i) in enumerate(ops):
            if op == "compact":
                calls = [("snapshot", ()), ("replace_prefix", None)]
            else:
                args: tuple[Any, ...] = {"add": (msgs(i + 1, n),), "add_keyed": (msgs(1, i),), "get": (i,),
                                         "get_all": (), "pop": (), "clear": (), "fork": (f"f{i}",)}[op]
                calls = [({"add_keyed": "add_items", "get_all": "get_items", "get": "get_items",
                           "add": "add_items", "pop": "pop_item", "clear": "clear_session"}.get(op, op), args)]
            for name, call_args in calls:
                if name == "replace_prefix":
                    a_args: tuple[Any, ...] = (snap_a, msgs(1, 100))
                    s_args: tuple[Any, ...] = (snap_s, msgs(1, 100))
                else:
                    a_args = s_args = call_args
                kw = {"idempotency_key": f"k{i}"} if op == "add_keyed" else {}
                got_a = await _async_outcome(getattr(session, name), a_args, kw)
                got_s = outcome(lambda: getattr(sync, name)(*s_args, **kw))
                if name == "snapshot":
                    snap_a, snap_s = got_a[1], got_s[1]
                    got_a, got_s = ("ok", snap_a.items), ("ok", snap_s.items)
                assert got_a == got_s, (op, name)
        assert await session.get_items() == sync.get_items()
        await client.aclose()

    asyncio.run(run())


async def _async_outcome(method: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    try:
        result = await method(*args, **kw)
    except SessionError as exc:
        return ("error", exc.code)
    if isinstance(result, RedisSession):
        return ("session", result.session_id)
    return ("ok", result)


# -- threads and faults: a real server -----------------------------------------------
THREADS = 32
PER_THREAD = 20


@pytest.mark.real
def test_threads_share_one_session_and_every_item_is_popped_once(redis_server):
    """32 threads, one session: each adds 20 items, then all pop until it is empty; every
    item is popped exactly once, by one thread."""
    session = SyncRedisSession.from_url("shared", url=redis_server.url, key_prefix=f"ti{uuid.uuid4().hex[:8]}")
    barrier = threading.Barrier(THREADS)
    popped: list[list[str]] = [[] for _ in range(THREADS)]
    failures: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            barrier.wait()
            for i in range(PER_THREAD):
                session.add_items([{"role": "user", "content": f"{n}.{i}"}])
            barrier.wait()
            while (item := session.pop_item()) is not None:
                popped[n].append(str(item["content"]))
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures[:3]
    every = [c for mine in popped for c in mine]
    assert sorted(every) == sorted(f"{n}.{i}" for n in range(THREADS) for i in range(PER_THREAD))
    assert session.get_items() == []
    session.close()


@pytest.mark.real
@pytest.mark.parametrize("fault", ["drop", "cut"])
def test_a_lost_reply_to_a_pop_returns_the_item_it_removed_once(redis_server, fault):
    """The proxy loses items_pop's reply after the server ran it; redis-py re-sends it, the
    token makes the copy answer what the first run removed: one item gone, and returned."""
    prefix = f"fi{uuid.uuid4().hex[:6]}"
    with FaultProxy("127.0.0.1", redis_server.port) as proxy:
        session = SyncRedisSession.from_url("lost", url=proxy.url, key_prefix=prefix, timeout=8.0,
                                            redis_kwargs={"socket_timeout": 1.0})
        session.add_items(msgs(3))
        proxy.arm(fault, match=_POP.sha.encode())
        assert session.pop_item()["content"] == "m2"  # type: ignore[index]
        assert proxy.fired == 1
        assert proxy.matched == 2  # sent twice: the lost copy and redis-py's retry
        session.close()
    client = redis.Redis.from_url(redis_server.url)
    left = SyncRedisSession("lost", client=client, key_prefix=prefix)
    assert [i["content"] for i in left.get_items()] == ["m0", "m1"]
    client.close()


@pytest.mark.real
def test_the_worker_example_keeps_a_session_across_calls(redis_server, monkeypatch):
    import importlib
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    monkeypatch.setenv("REDIS_SESSIONS_URL", redis_server.url)
    worker = importlib.reload(importlib.import_module("examples.sync_worker"))
    prefix, sid = f"wk{uuid.uuid4().hex[:6]}", "user-7"
    first = worker.chat_turn(sid, "hello", task_id="t1", key_prefix=prefix)
    second = worker.chat_turn(sid, "again", task_id="t2", key_prefix=prefix)
    retried = worker.chat_turn(sid, "again", task_id="t2", key_prefix=prefix)  # Celery's retry of t2
    assert (first["history"], second["history"], retried["history"]) == (0, 2, 4)
    assert (first["duplicate"], second["duplicate"], retried["duplicate"]) == (False, False, True)
    items = SyncRedisSession(sid, client=redis.Redis.from_url(redis_server.url), key_prefix=prefix).get_items()
    assert [i["content"] for i in items if i["role"] == "user"] == ["hello", "again"]  # t2 appended once
